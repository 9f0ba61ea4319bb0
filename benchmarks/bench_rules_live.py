"""The live verifier's check tick with and without mission rules: 100 vehicles on a 3 m grid at 50 Hz (one check per
pose round, as the safety_verifier's timer runs it), SafetyMonitor.update timed per tick, ROS-free. The 5 rules are
those of bench_veto_latency --rules (3 per vehicle, 2 per pair); one vehicle dips low now and then, so the hard rule
fails and the veto rises on `rule:<id>`.

Target (issue 26): the rules add < 1 ms to the p99 tick (judged on the tick's CPU time; the wall-clock figures are
printed beside it: on a shared machine their p99 is the other processes' preemption).
At show size (issue 35): --uavs 1000 --rate 10; the pair rules read only the pairs that can matter: without a
temporal operator in their body those near on each tick (rules.live_pairs), with one a tracked set of pairs
(rules.live_tracked); --every-pair reads all of them (as before).
--checks-per-array 5 checks each array five times, as the verifier's 50 Hz check does a 10 Hz stream: the checks
between two arrays reuse the snapshot's comparison values (rules.monitor), and the rules' CPU per second of stream
is printed beside the ticks.
Run: python benchmarks/bench_rules_live.py [--seconds 20] [--uavs 100] [--rate 50] [--every-pair] [--demo-rules]
     [--checks-per-array K]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uav_debate_eval.core.mission import Constraints, Mission  # noqa: E402
from uav_debate_eval.safety.monitor import SafetyMonitor  # noqa: E402
from uav_debate_eval.stl.spec import make_rule  # noqa: E402

N_UAVS, RATE_HZ = 100, 50.0
TARGET_MS = 1.0
LIVE_RULES = [
    ("floor", "hard", "each_vehicle", "always (z >= 0.5)"),
    ("recover", "soft", "each_vehicle", "always ((z < 1.0) -> eventually[0, 0.5] (z >= 1.0))"),
    ("calm", "soft", "each_vehicle", "always (historically[0, 1] (speed <= 6.0))"),
    ("climb_apart", "soft", "each_pair", "always ((separation < 2.0) -> (abs(a.vz - b.vz) <= 1.0))"),
    ("part_quickly", "soft", "each_pair", "always ((separation < 1.0) -> eventually[0, 1] (separation >= 1.0))"),
]

#: config/demo_mission.yaml's rules (--demo-rules)
DEMO_RULES = [
    ("min_altitude", "soft", "each_vehicle", "always (z >= 5.0)"),
    ("calm_when_close", "soft", "each_pair", "always ((separation < 3.0) -> (abs(a.vz) <= 1.0 and abs(b.vz) <= 1.0))"),
]


def mission(rules: bool) -> Mission:
    return Mission(constraints=Constraints(min_separation_m=0.5, max_speed_mps=20.0, stale_timeout_s=1.0),
                   rules=[make_rule(*r) for r in LIVE_RULES] if rules else [])


def ticks(seconds: float, checks: int = 1) -> tuple[np.ndarray, int]:
    """Tick times (ms; columns: wall without, wall with, CPU without, CPU with the rules): two monitors on the same
    snapshots, timed alternately, so a busy shared machine slows both alike. The CPU time (this thread's) leaves out
    the time other processes held the cores, which dominates a wall-clock p99 on a shared machine. `checks` per pose
    array: the verifier's 50 Hz check on a 10 Hz stream sees each snapshot five times (the later ones without new
    poses), its rules on a grid of the check period."""
    period = 1.0 / (RATE_HZ * checks)
    plain = SafetyMonitor(mission(False), hold_s=0.2, predict_period_s=0.1, rule_period_s=period)
    ruled = SafetyMonitor(mission(True), hold_s=0.2, predict_period_s=0.1, rule_period_s=period)
    side = int(np.ceil(np.sqrt(N_UAVS)))
    base = np.array([[3.0 * (k % side), 3.0 * (k // side), 2.0] for k in range(N_UAVS)])
    names = [f"uav{k}" for k in range(N_UAVS)]
    out: list[tuple[float, float, float, float]] = []
    vetoes = 0
    for i in range(int(seconds * RATE_HZ)):
        t = i / RATE_HZ
        pos = base + [0.2 * np.sin(0.5 * t), 0.0, 0.0]
        if i % 150 in range(100, 110):  # uav7 dips to 0.3 m for 0.2 s every 3 s
            pos[7, 2] = 0.3
        latest = {u: (t, *p, 0.1 * np.cos(0.5 * t), 0.0, 0.0) for u, p in zip(names, pos.tolist(), strict=True)}
        for j in range(checks):  # the first check with the new array, the others on the same snapshot
            now, given = t + j * period, latest if j == 0 else None
            t0, c0 = time.perf_counter(), time.thread_time()
            plain.update(now, given)
            t1, c1 = time.perf_counter(), time.thread_time()
            state = ruled.update(now, given)
            t2, c2 = time.perf_counter(), time.thread_time()
            out.append((t1 - t0, t2 - t1, c1 - c0, c2 - c1))
            vetoes += state.changed and state.veto and any(a["constraint"] == "rule:floor" for a in state.active)
    return np.array(out[int(RATE_HZ) * checks:]) * 1e3, vetoes  # the first second warms up


def main() -> int:
    global N_UAVS, RATE_HZ
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--uavs", type=int, default=N_UAVS)
    ap.add_argument("--rate", type=float, default=RATE_HZ)
    ap.add_argument("--every-pair", action="store_true", help="no live pair pruning (the figures before issue 35)")
    ap.add_argument("--demo-rules", action="store_true", help="config/demo_mission.yaml's 2 rules instead of the 5")
    ap.add_argument("--checks-per-array", type=int, default=1, help="checks per pose array (the verifier checks at "
                    "50 Hz: 5 on a 10 Hz stream)")
    args = ap.parse_args()
    N_UAVS, RATE_HZ = args.uavs, args.rate
    if args.demo_rules:
        LIVE_RULES[:] = DEMO_RULES
    if args.every_pair:
        from uav_debate_eval.rules import monitor

        monitor.LIVE_PRUNE_MIN_VEHICLES = 10**9
    times, vetoes = ticks(args.seconds, args.checks_per_array)
    kinds = [r[2] for r in LIVE_RULES]
    print(f"{N_UAVS} vehicles, {RATE_HZ:g} Hz, {args.checks_per_array} check(s) per array, {len(times)} ticks each; "
          f"{len(kinds)} rules ({kinds.count('each_vehicle')} per vehicle, {kinds.count('each_pair')} per pair)")
    stream_s = len(times) / (RATE_HZ * args.checks_per_array)
    print(f"the rules' CPU per second of stream: {(times[:, 3] - times[:, 2]).sum() / 1e3 / stream_s:.3f} s")
    for label, cols in (("wall", (0, 1)), ("CPU", (2, 3))):
        for k in (50, 99):
            a, b = (np.percentile(times[:, c], k) for c in cols)
            print(f"p{k} tick ({label:<4})       {a:7.3f} ms without rules   {b:7.3f} ms with rules   (+{b - a:.3f})")
    added = float(np.percentile(times[:, 3], 99) - np.percentile(times[:, 2], 99))
    if not args.demo_rules:
        dips = sum(1 for i in range(int(RATE_HZ), int(args.seconds * RATE_HZ)) if i % 150 == 100)
        print(f"veto raised on rule:floor {vetoes} times (expected {dips})")
    print(f"added to the p99 tick (CPU) {added:7.3f} ms      target < {TARGET_MS:g} ms   "
          f"{'OK' if added < TARGET_MS else 'MISSED'}")
    return 0 if added < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
