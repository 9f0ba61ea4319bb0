"""The Foxglove flight MCAP at show scale: `evaluate --mcap-out` and the replay of the file it writes (issue 35);
and the same flight recorded as `ros2 bag record` writes a show (a rosbag2 MCAP, a PoseStamped topic per vehicle).

The 1,024 vehicles x 120 s grid flight of bench_scale.py (10 Hz, 1.2M samples): the wall time, CPU and peak memory
(PSS of the process tree) of `evaluate CSV --mcap-out flight.mcap` and of `evaluate flight.mcap` (the replay), the
file's size, and whether the replay's report equals the evaluation's (verdict, violations, data quality, findings,
events, metrics, scores, safety). Targets: both within the evaluation's own memory target (1.5 GB), the replay the
same report; the bag within it too. The times are reported beside the evaluation's of the CSV for reference.

    python benchmarks/bench_flight_mcap.py [--data DIR] [--vehicles 1024] [--duration 120]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import TARGET_RSS_GB, flight_csv, mark, run_cli  # noqa: E402

#: The report sections the replay must give as the evaluation did.
SAME = ("verdict", "violations", "data_quality", "findings", "events", "metrics", "scores", "safety")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "uav_bench_scale"))
    ap.add_argument("--vehicles", type=int, default=1024)
    ap.add_argument("--duration", type=float, default=120.0)
    args = ap.parse_args()
    csv_path = flight_csv(Path(args.data), args.vehicles, args.duration)
    mission = str(csv_path.parent / "mission.yaml")
    bag = csv_path.parent / "per_vehicle_poses.mcap"
    if not bag.is_file():
        from uav_debate_eval.io.loader import load_inputs
        from uav_debate_eval.io.rosbag_write import write_bag

        write_bag(load_inputs([csv_path]), bag)
    ok = True
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        mcap = tmp / "flight.mcap"
        runs = {}
        for name, args_ in (("plain", ["evaluate", str(csv_path), "--out", str(tmp / "plain")]),
                            ("export", ["evaluate", str(csv_path), "--out", str(tmp / "export"),
                                        "--mcap-out", str(mcap)]),
                            ("replay", ["evaluate", str(mcap), "--out", str(tmp / "replay")]),
                            ("bag", ["evaluate", str(bag), "--out", str(tmp / "bag")])):
            _, wall, _, cpu = run_cli([*args_, "--quiet", "--mission", mission, "--llm", "rules"])
            _, _, peak, _ = run_cli([*args_, "--quiet", "--mission", mission, "--llm", "rules"], sample_memory=True)
            runs[name] = (wall, cpu, peak)
        reports = {k: json.loads((tmp / k / "report.json").read_text(encoding="utf-8")) for k in ("export", "replay")}
        same = [k for k in SAME if reports["export"].get(k) == reports["replay"].get(k)]
        size = mcap.stat().st_size
    print(f"{args.vehicles} vehicles x {args.duration:g} s (bench_scale's grid flight):")
    plain = runs["plain"][0]
    for name, label in (("plain", "evaluate (no MCAP)"), ("export", "evaluate --mcap-out"),
                        ("replay", "evaluate flight.mcap (replay)"),
                        ("bag", "evaluate a rosbag2 of the flight")):
        wall, cpu, peak = runs[name]
        within = peak <= TARGET_RSS_GB * 1e9
        ok &= within
        print(f"  {label:<33} wall {wall:6.2f} s ({wall - plain:+6.2f} s beside the plain evaluation), CPU "
              f"{cpu:6.2f} s, peak memory (PSS) {peak / 1e9:4.2f} GB  target <= {TARGET_RSS_GB} GB  {mark(within)}")
    print(f"  the MCAP: {size / 1e6:.0f} MB; the replay's report equals the evaluation's in {len(same)} of "
          f"{len(SAME)} sections ({', '.join(k for k in SAME if k not in same) or 'all equal'})  "
          f"{mark(len(same) == len(SAME))}")
    ok &= len(same) == len(SAME)
    print(f"targets met: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
