"""Mission rules at show size (issue 35): the demo's rules (one per vehicle, one per pair) plus a plain separation
rule, checked offline on the simulator's `grid` flight of 1,000 vehicles x 120 s at 10 Hz with a near miss.

Two ways of listing the pairs a per-pair rule must read (rules.near_pairs), in one run on the same grid:
- by k-d tree: the pairs whose closest approach may lie within a radius, the radius grown only while the pairs
  beyond it might still matter (what `evaluate` does from 200 vehicles on);
- every pair: each of the N (N - 1) / 2 pairs' closest approach bounded, then sorted (what it did before).
Both must give the same results (asserted). Printed: CPU seconds of the whole check per way and per rule, pairs
evaluated of all. Target: the rules' check at 1,000 vehicles within 1 s of CPU (10 % of the 10 s the issue's
1,024-vehicle flight may take at 100x real time).

    python benchmarks/bench_rules_scale.py [--uavs 1000] [--duration 120]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uav_debate_eval.rules import near_pairs  # noqa: E402
from uav_debate_eval.rules.check import check_rules, grid_of  # noqa: E402
from uav_debate_eval.sim.scenarios import simulate  # noqa: E402
from uav_debate_eval.stl.spec import make_rule  # noqa: E402

TARGET_CPU_S = 1.0
RULES = [("min_altitude", "soft", "each_vehicle", "always (z >= 5.0)"),
         ("calm_when_close", "soft", "each_pair",
          "always ((separation < 3.0) -> (abs(a.vz) <= 1.0 and abs(b.vz) <= 1.0))"),
         ("apart", "hard", "each_pair", "always (separation >= 1.5)")]


def timed(fn):
    t0 = time.process_time()
    value = fn()
    return value, time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--uavs", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=120.0)
    args = ap.parse_args()
    sim = simulate("grid", seed=0, n_uavs=args.uavs, duration_s=args.duration, rate_hz=10.0, faults=["near_miss"])
    mission = replace(sim.mission, rules=[make_rule(*r) for r in RULES])
    grid, grid_s = timed(lambda: grid_of(sim.traj, mission))
    tree, tree_s = timed(lambda: check_rules(sim.traj, mission, grid=grid))
    near_pairs.TREE_MIN_VEHICLES = 10**9
    grid._cache.pop("pair_queue")  # the pairs listed anew
    every, every_s = timed(lambda: check_rules(sim.traj, mission, grid=grid))
    for a, b in zip(tree, every, strict=True):
        assert (a.satisfied, a.worst, a.intervals) == (b.satisfied, b.worst, b.intervals), a.rule.id
        assert a.robustness == b.robustness or abs(a.robustness - b.robustness) < 1e-9, a.rule.id
    n = len(sim.traj.tracks)
    print(f"rules at {n} vehicles x {args.duration:g} s ({len(grid.snaps.t)} grid steps, {n * (n - 1) // 2} pairs); "
          f"grid {grid_s:.2f} s CPU (shared with the checker)")
    for r in tree:
        print(f"  {r.rule.id:<16} {r.rule.over:<13} evaluated {r.evaluated:>7} of {r.columns:>7}  "
              f"satisfied {r.satisfied}  robustness {r.robustness:.3f}")
    ok = tree_s <= TARGET_CPU_S
    print(f"rules check, pairs by k-d tree: {tree_s:6.2f} s CPU   target <= {TARGET_CPU_S:g} s  "
          f"{'ok' if ok else 'MISSED'};  every pair listed (before): {every_s:6.2f} s CPU;  same results: yes")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
