"""Per-tick cost of the live safety check vs swarm size, and the kd-tree vs the naive O(N^2) numpy check.

Swarm: N vehicles on a jittered 3-D lattice (3 m spacing, a few pairs closer than 0.5 m), random
velocities up to 1 m/s, all stamps fresh. One tick = SafetyMonitor.update(now, latest) with every
constraint and the predictive warnings (CPA within 2 s, time-to-geofence). The pair check alone
(kd-tree query_pairs at the separation limit) is compared with a naive O(N^2) distance matrix.
Target (issue 3): p99 < 2 ms per tick at 1000 vehicles.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from uav_debate_eval.core.mission import parse_mission
from uav_debate_eval.safety.geometry import close_pairs
from uav_debate_eval.safety.monitor import SafetyMonitor

MISSION = parse_mission("""
constraints:
  min_separation_m: 0.5
  max_speed_mps: 3.0
  max_vertical_speed_mps: 2.0
  geofence: {min: [-500, -500, 0], max: [500, 500, 200]}
  stale_timeout_s: 0.5
""")


def swarm(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    side = int(np.ceil(n ** (1 / 3)))
    grid = np.stack(np.meshgrid(*[np.arange(side)] * 3, indexing="ij"), -1).reshape(-1, 3)[:n] * 3.0
    pos = grid + rng.uniform(-0.3, 0.3, size=(n, 3)) + np.array([0.0, 0.0, 10.0])
    pos[1::97] = pos[0::97][: len(pos[1::97])] + 0.2  # a few near misses (rows 1, 98, ... next to 0, 97, ...)
    vel = rng.normal(size=(n, 3))
    vel *= rng.uniform(0, 1.0, size=(n, 1)) / np.linalg.norm(vel, axis=1, keepdims=True)
    return pos, vel


def naive_pairs(pos: np.ndarray, r: float, chunk: int = 500) -> int:
    """O(N^2) reference: full distance rows in numpy (chunked so 5000 vehicles fit in memory)."""
    n, count = len(pos), 0
    sq = (pos * pos).sum(1)
    for a in range(0, n, chunk):
        d2 = sq[a:a + chunk, None] + sq[None, :] - 2.0 * pos[a:a + chunk] @ pos.T
        rows = np.arange(a, min(a + chunk, n))[:, None]
        count += int(((d2 < r * r) & (np.arange(n)[None, :] > rows)).sum())
    return count


def timed(fn, args: tuple, reps: int) -> np.ndarray:
    out = np.empty(reps)
    for k in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        out[k] = time.perf_counter() - t0
    return out * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 5000])
    ap.add_argument("--ticks", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows, cpu_rows = [], []
    load0 = os.getloadavg()[0]
    for n in args.sizes:
        pos, vel = swarm(n, rng)
        ids = [f"uav{k}" for k in range(n)]
        ticks = max(30, args.ticks if n <= 1000 else args.ticks // 3)
        full, pred10, full_cpu, pred10_cpu = (np.empty(ticks) for _ in range(4))
        mon_full, mon_10 = SafetyMonitor(MISSION), SafetyMonitor(MISSION, predict_period_s=0.1)
        state = None
        for k0 in range(0, ticks, 10):  # inputs built outside the timing: the caller's dict is not the check
            frames = []
            for f in range(min(10, ticks - k0)):
                t = (k0 + f) * 0.02
                p = pos + vel * t
                frames.append((t, {u: (t, *p[k], *vel[k]) for k, u in enumerate(ids)}))
            for f, (t, latest) in enumerate(frames):
                for mon, out, cpu in ((mon_full, full, full_cpu), (mon_10, pred10, pred10_cpu)):
                    c0, t0 = time.thread_time(), time.perf_counter()
                    state = mon.update(t, latest)
                    out[k0 + f] = (time.perf_counter() - t0) * 1e3
                    cpu[k0 + f] = (time.thread_time() - c0) * 1e3
        reps = max(5, ticks // (1 if n <= 1000 else 10))
        kd = timed(close_pairs, (pos, 0.5), reps)
        naive = timed(naive_pairs, (pos, 0.5), max(3, reps // (10 if n >= 1000 else 1)))
        assert naive_pairs(pos, 0.5) == len(close_pairs(pos, 0.5)[0])
        sep = next((a for a in state.active if a["constraint"] == "min_separation"), None)
        rows.append((n, np.percentile(full, 50), np.percentile(full, 99), np.percentile(pred10, 50),
                     np.percentile(pred10, 99), np.median(kd), np.median(naive),
                     sep["count"] if sep else 0, len(state.warnings)))
        cpu_rows.append((n, *(np.percentile(a, q) for a in (full_cpu, pred10_cpu) for q in (50, 99))))
    print("tick = SafetyMonitor.update, every constraint + predictions each tick; "
          "tick@10Hz-pred = predictions refreshed every 0.1 s (node default), veto checks every tick")
    print(f"{'N':>6} {'tick p50':>9} {'tick p99':>9} {'@10Hz p50':>10} {'@10Hz p99':>10} {'kd pairs':>9} "
          f"{'naive':>9} {'naive/kd':>9} {'violating':>9} {'warnings':>9}   (ms)")
    for n, p50, p99, q50, q99, kd, nv, nviol, nwarn in rows:
        print(f"{n:>6} {p50:>9.3f} {p99:>9.3f} {q50:>10.3f} {q99:>10.3f} {kd:>9.3f} {nv:>9.3f} {nv / kd:>9.1f} "
              f"{nviol:>9} {nwarn:>9}")
    print(f"same ticks in thread CPU time (not inflated by preemption; load average {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    print(f"{'N':>6} {'cpu p50':>9} {'cpu p99':>9} {'@10Hz p50':>10} {'@10Hz p99':>10}   (ms)")
    for n, a, b, c, d in cpu_rows:
        print(f"{n:>6} {a:>9.3f} {b:>9.3f} {c:>10.3f} {d:>10.3f}")
    big = [r for r in rows if r[0] >= 100]
    if len(big) >= 2:
        ns, p50s = np.log([r[0] for r in big]), np.log([r[1] for r in big])
        ks, nvs = np.log([r[5] for r in big]), np.log([r[6] for r in big])
        print(f"growth exponent (log-log fit, N >= 100): tick {np.polyfit(ns, p50s, 1)[0]:.2f}, "
              f"kd pairs {np.polyfit(ns, ks, 1)[0]:.2f}, naive {np.polyfit(ns, nvs, 1)[0]:.2f} "
              "(target: near N log N, i.e. ~1.0-1.2; naive ~2)")
    at = [r for r in rows if r[0] == 1000]
    if at:
        cpu = next(r for r in cpu_rows if r[0] == 1000)
        for label, p99 in (("wall, every tick", at[0][2]), ("wall, predictions at 10 Hz", at[0][4]),
                           ("CPU, every tick", cpu[2]), ("CPU, predictions at 10 Hz", cpu[4])):
            print(f"tick p99 at N=1000 ({label}): {p99:.3f} ms   target < 2 ms   {'PASS' if p99 < 2.0 else 'MISS'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
