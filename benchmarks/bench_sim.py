"""Simulator speed: scenario generation (dynamics, faults, truth, trajectory ingest) and bag writing.

Targets (issue 2 / simulator brief): the grid swarm with 1000 vehicles for 60 s at 10 Hz generates
in a few seconds (< 5 s); the default 5-vehicle formation in well under a second.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from uav_debate_eval.io.rosbag_write import write_bag
from uav_debate_eval.sim.scenarios import simulate
from uav_debate_eval.sim.truth import TruthFault


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--uavs", type=int, default=1000)
    args = ap.parse_args()

    _, dt = timed(lambda: simulate("formation"))
    print(f"formation, 5 vehicles, 60 s at 20 Hz:          {dt:6.2f} s   (target < 1 s)")
    res, dt = timed(lambda: simulate("formation", faults=["near_miss", "altitude_drop", "overspeed"]))
    faults = [f for f in res.truth if isinstance(f, TruthFault) and f.kind != "route_turn"]
    print(f"formation + 3 faults ({res.duration_s:g} s):              {dt:6.2f} s   (target < 1 s), "
          f"{len(faults)} truth entries")
    for rate in (10, 20):
        res, dt = timed(lambda rate=rate: simulate("grid", n_uavs=args.uavs, rate_hz=rate))
        print(f"grid, {args.uavs} vehicles, 60 s at {rate} Hz:           {dt:6.2f} s   (target < 5 s at 10 Hz), "
              f"{res.traj.n_samples / dt:,.0f} samples/s")
    res = simulate("formation")
    with tempfile.TemporaryDirectory() as tmp:
        for fmt, suffix in (("mcap", ".mcap"), ("sqlite3", ".db3"), ("ros1", ".bag")):
            path = Path(tmp) / f"t{suffix}"
            _, dt = timed(lambda fmt=fmt, path=path: write_bag(res.traj, path, fmt=fmt))
            print(f"write {fmt:7s} bag, {res.traj.n_samples} PoseStamped:     {dt:6.2f} s   "
                  f"({res.traj.n_samples / dt:,.0f} msg/s, {path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
