"""Mission rules offline: the same 5 formulas (3 per vehicle, 2 per pair) on the same 100-vehicle x 10-minute x
10 Hz flight, evaluated by rtamt's discrete-time offline monitor (looping over vehicles and pairs) and by this
project (rules.check: every vehicle or pair a column of one array, pairs that never came close skipped), in one run.

rtamt is given the signals ready-made (not timed); this project computes them from the grid inside its timing.
rtamt's cost is linear in the number of vehicles or pairs it loops over (one independent evaluation each), so for
the per-pair formulas it runs a seeded sample of pairs and the time is scaled to all of them (printed as such).
Target (issue 26): this project >= 100x faster than rtamt.
Run: python benchmarks/bench_rules.py [--uavs 100] [--duration 600] [--rate 10] [--pair-sample 200]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uav_debate_eval.rules import check as check_module  # noqa: E402
from uav_debate_eval.rules.check import check_rule, grid_of  # noqa: E402
from uav_debate_eval.rules.evaluator import steps_of  # noqa: E402
from uav_debate_eval.sim.scenarios import simulate  # noqa: E402
from uav_debate_eval.stl.spec import make_rule  # noqa: E402
from uav_debate_eval.stl.syntax import Arith, Binary, Compare, Logic, Not, Num, Signal, Temporal  # noqa: E402

SPEEDUP_TARGET = 100.0
FORMULAS = [
    ("altitude_band", "each_vehicle", "always ((z >= 0.5) and (z <= 20.0))"),
    ("slow_down", "each_vehicle", "always ((speed > 4.0) -> eventually[0, 2] (speed <= 3.0))"),
    ("keep_clear", "each_vehicle", "always[0, 300] (nearest >= 0.5)"),
    ("climb_apart", "each_pair", "always ((separation < 3.5) -> (abs(a.vz - b.vz) <= 0.5))"),
    ("part_quickly", "each_pair", "always ((separation < 2.0) -> eventually[0, 3] (separation >= 2.0))"),
]


def rtamt_text(node, dt: float) -> str:
    """rtamt's spelling: bounds in whole samples (its sampling period is then 1 s), a.vz as a_vz."""
    if isinstance(node, Num):
        return repr(node.value)
    if isinstance(node, Signal):
        return node.name.replace(".", "_")
    if isinstance(node, Arith):
        if node.op == "abs":
            return f"abs({rtamt_text(node.left, dt)})"
        if node.op == "neg":
            return f"(0.0 - {rtamt_text(node.left, dt)})"
        return f"({rtamt_text(node.left, dt)} {node.op} {rtamt_text(node.right, dt)})"
    if isinstance(node, Compare | Logic):
        return f"({rtamt_text(node.left, dt)} {node.op} {rtamt_text(node.right, dt)})"
    if isinstance(node, Not):
        return f"(not {rtamt_text(node.arg, dt)})"
    bound = "" if node.hi is None else "[{},{}]".format(*steps_of(node.lo, node.hi, dt))
    if isinstance(node, Temporal):
        return f"({node.op}{bound}({rtamt_text(node.arg, dt)}))"
    assert isinstance(node, Binary)
    return f"({rtamt_text(node.left, dt)} {node.op}{bound} {rtamt_text(node.right, dt)})"


def rtamt_loop(rtamt, rule, grid, columns: list) -> tuple[float, float]:
    """(seconds, minimum robustness at step 0) of rtamt over the given vehicles or pairs (signals made untimed)."""
    names = rule.signals
    spec = rtamt.StlDiscreteTimeOfflineSpecification()
    for name in names:
        spec.declare_var(name.replace(".", "_"), "float")
    spec.spec = rtamt_text(rule.formula, grid.dt)
    spec.set_sampling_period(1, "s", 0.1)
    spec.parse()
    steps = list(range(len(grid.t)))
    elapsed, worst = 0.0, np.inf
    for col in columns:
        data = {"time": steps}
        for name in names:
            values = grid.vehicle(name)[0][:, col] if rule.over == "each_vehicle" else \
                grid.pair(name, np.array([col[0]]), np.array([col[1]]))[0][:, 0]
            data[name.replace(".", "_")] = np.asarray(values, dtype=float).tolist()
        t0 = time.perf_counter()
        out = spec.evaluate(data)
        elapsed += time.perf_counter() - t0
        worst = min(worst, out[0][1])
    return elapsed, worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uavs", type=int, default=100)
    ap.add_argument("--duration", type=float, default=600.0)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--pair-sample", type=int, default=200, help="pairs rtamt evaluates per pair formula")
    args = ap.parse_args()
    try:
        import rtamt
    except ImportError:
        print("rtamt is not installed (pip install -e .[test]): no comparison")
        return 1

    sim = simulate("grid", seed=0, n_uavs=args.uavs, duration_s=args.duration, rate_hz=args.rate,
                   faults=["near_miss"])
    traj, mission = sim.traj, sim.mission
    grid = grid_of(traj, mission)
    T, N = grid.snaps.valid.shape
    print(f"flight: {N} vehicles, {args.rate:g} Hz, {traj.duration:.0f} s, {T} grid steps, {N * (N - 1) // 2} pairs")
    rules = [make_rule(rid, "soft", over, stl, geofence=True) for rid, over, stl in FORMULAS]
    check_rule(make_rule("warm", "soft", "each_pair", "always (separation >= 0)"), grid_of(traj.window(0, 5), mission))

    rng = np.random.default_rng(0)
    first, second = np.triu_indices(N, k=1)
    total_pairs = len(first)
    ours = ours_all = theirs = 0.0
    print(f"{'rule':<14} {'over':<13} {'ours [s]':>9} {'all pairs':>10} {'rtamt [s]':>10} {'ratio':>8}  robustness")
    for rule in rules:
        grid = grid_of(traj, mission)  # a fresh grid: the signals are computed inside the timing
        t0 = time.perf_counter()
        res = check_rule(rule, grid)
        mine = time.perf_counter() - t0
        mine_all = mine
        if rule.over == "each_pair":
            keep = check_module._stop
            check_module._stop = lambda formula, body, stripped, closest, order, start, found: len(order)
            t0 = time.perf_counter()
            full = check_rule(rule, grid_of(traj, mission))
            mine_all = time.perf_counter() - t0
            check_module._stop = keep
            assert abs(full.robustness - res.robustness) < 1e-9, "pruning changed the robustness"
            pick = rng.choice(total_pairs, size=min(args.pair_sample, total_pairs), replace=False)
            columns = [(int(first[k]), int(second[k])) for k in pick]
            spent, worst = rtamt_loop(rtamt, rule, grid, columns)
            rt = spent * total_pairs / len(columns)
            note = f"(rtamt: {len(columns)} sampled pairs, scaled x{total_pairs / len(columns):.1f})"
            agree = worst >= res.robustness - 1e-9
        else:
            spent, worst = rtamt_loop(rtamt, rule, grid, list(range(N)))
            rt = spent
            note = "(rtamt: every vehicle)"
            agree = abs(worst - res.robustness) <= 1e-9
        ours, ours_all, theirs = ours + mine, ours_all + mine_all, theirs + rt
        print(f"{rule.id:<14} {rule.over:<13} {mine:9.3f} {mine_all:10.3f} {rt:10.1f} {rt / mine:7.0f}x  "
              f"{res.robustness:.4f} {'agrees with rtamt' if agree else 'DISAGREES with rtamt'} {note}, "
              f"{res.evaluated}/{res.columns} columns evaluated")
        if not agree:
            return 1
    ratio = theirs / ours
    print(f"total: ours {ours:.3f} s (every pair: {ours_all:.3f} s), rtamt {theirs:.1f} s")
    print(f"speed-up vs rtamt       {ratio:7.0f} x      target >= {SPEEDUP_TARGET:.0f} x   "
          f"{'OK' if ratio >= SPEEDUP_TARGET else 'MISSED'}")
    print(f"speed-up, every pair    {theirs / ours_all:7.0f} x      (no pruning)")
    return 0 if ratio >= SPEEDUP_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
