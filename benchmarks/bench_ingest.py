"""Ingest throughput and streaming-buffer memory for a 100-vehicle, 10-minute, 50 Hz flight (3M samples).

- SwarmTrajectory.from_columns on synthetic arrays (in order, and shuffled: the messy-input path);
- quality.assess, the data-quality pass every evaluation runs before the verifier (same target);
- io.csv_io.read_csv of the same flight written as a contract CSV (t, uav_id, x, y, z, vx, vy, vz);
- core.streaming.StreamingSwarm: every sample appended one by one as a live node would (timed
  without tracing), then the buffer bytes vs the capacity-derived bound (vehicles x capacity x 7
  float64) and the peak traced memory (tracemalloc) while filling the rings twice over.

Targets, as multiples of the flight's real-time rate (100 x 50 = 5,000 samples/s): from_columns
>= 60x (300,000 samples/s: the 10-minute flight in <= 10 s), read_csv >= 6x (30,000 samples/s:
<= 100 s), streaming append >= 10x (50,000 samples/s); buffer bytes == the capacity bound and
unchanged as the flight grows; peak traced memory while filling <= 1.5 x the bound.

    python benchmarks/bench_ingest.py [--vehicles 100] [--minutes 10] [--rate 50] [--capacity 3000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from uav_debate_eval.core.mission import Constraints, Mission
from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.csv_io import read_csv
from uav_debate_eval.quality.assessment import assess

#: Targets as multiples of the flight's real-time sample rate (vehicles x rate):
#: batch ingest 60x (a 10-minute flight in <= 10 s), CSV reading 6x (<= 100 s),
#: live appends 10x (headroom for a node keeping up with every vehicle at full rate).
FROM_COLUMNS_X_REALTIME = 60
READ_CSV_X_REALTIME = 6
STREAM_X_REALTIME = 10
TARGET_PEAK_FACTOR = 1.5


def synthetic(n: int, minutes: float, rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Long-format samples: vehicle k circles at its own radius and altitude (time-major order)."""
    t = np.arange(int(minutes * 60 * rate) + 1) / rate
    k = np.arange(n)
    radius = 20.0 + 3.0 * k
    w = 2.0 / radius
    phase = w[None] * t[:, None]
    pos = np.stack([radius * np.cos(phase), radius * np.sin(phase), np.broadcast_to(5.0 + 0.1 * k, phase.shape)], -1)
    vel = np.stack([-2.0 * np.sin(phase), 2.0 * np.cos(phase), np.zeros_like(phase)], -1)
    ids = np.array([f"uav{i + 1}" for i in k])
    return np.repeat(t, n), np.tile(ids, len(t)), pos.reshape(-1, 3), vel.reshape(-1, 3)


def write_csv_fast(path: Path, t, ids, pos, vel, n: int) -> None:
    """The contract CSV written per vehicle with numpy (the benchmark measures reading, not writing)."""
    with path.open("w", encoding="utf-8") as fh:
        fh.write("t,uav_id,x,y,z,vx,vy,vz\n")
        for i in range(n):
            sel = slice(i, None, n)
            block = np.column_stack([t[sel], pos[sel], vel[sel]])
            np.savetxt(fh, block, fmt="%.6f," + ids[i] + ",%.6f,%.6f,%.6f,%.6f,%.6f,%.6f")


def rate_line(label: str, samples: int, seconds: float, target: float) -> bool:
    rate = samples / seconds
    ok = rate >= target
    print(f"{label:<40}{samples:>10} samples {seconds:>8.2f} s {rate:>12,.0f} samples/s   "
          f"target >= {target:,.0f}  {'ok' if ok else 'MISSED'}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vehicles", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--capacity", type=int, default=3000, help="ring capacity per vehicle (3000 = 60 s at 50 Hz)")
    args = ap.parse_args()
    n = args.vehicles
    t, ids, pos, vel = synthetic(n, args.minutes, args.rate)
    total = len(t)
    realtime = n * args.rate
    target_from_columns = FROM_COLUMNS_X_REALTIME * realtime
    target_read_csv = READ_CSV_X_REALTIME * realtime
    target_stream = STREAM_X_REALTIME * realtime
    print(f"flight: {n} vehicles x {args.minutes:g} min x {args.rate:g} Hz = {total:,} samples "
          f"(real time: {realtime:,.0f} samples/s)")
    ok = True

    t0 = time.perf_counter()
    traj = SwarmTrajectory.from_columns(t, ids, pos, vel=vel)
    ok &= rate_line("from_columns (time-ordered)", total, time.perf_counter() - t0, target_from_columns)
    assert traj.n_samples == total

    t0 = time.perf_counter()
    assessed = assess(traj, Mission(constraints=Constraints(max_speed_mps=12.0, min_separation_m=0.5)))
    ok &= rate_line("quality.assess (data quality)", total, time.perf_counter() - t0, target_from_columns)
    assert assessed.traj.n_samples == total and not assessed.findings  # a clean flight: nothing to report
    del assessed

    perm = np.random.default_rng(0).permutation(total)
    t0 = time.perf_counter()
    SwarmTrajectory.from_columns(t[perm], ids[perm], pos[perm], vel=vel[perm])
    ok &= rate_line("from_columns (shuffled rows)", total, time.perf_counter() - t0, target_from_columns)
    del perm

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "flight.csv"
        write_csv_fast(path, t, ids, pos, vel, n)
        size_mb = path.stat().st_size / 1e6
        t0 = time.perf_counter()
        back = read_csv(path)
        ok &= rate_line(f"read_csv ({size_mb:.0f} MB)", total, time.perf_counter() - t0, target_read_csv)
        assert back.n_samples == total
        del back

    tl, il, pl, vl = t.tolist(), ids.tolist(), pos.tolist(), vel.tolist()
    swarm = StreamingSwarm(capacity=args.capacity)
    t0 = time.perf_counter()
    for i in range(total):
        swarm.add(il[i], tl[i], pl[i], vl[i])
    ok &= rate_line("StreamingSwarm.add (whole flight)", total, time.perf_counter() - t0, target_stream)

    # memory: the rings are full after `capacity` samples per vehicle; feed twice that under tracemalloc
    bound = n * args.capacity * 7 * 8
    fed = min(total, 2 * n * args.capacity)
    probe = StreamingSwarm(capacity=args.capacity)
    tracemalloc.start()
    for i in range(fed // 2):
        probe.add(il[i], tl[i], pl[i], vl[i])
    at_half = probe.nbytes
    for i in range(fed // 2, fed):
        probe.add(il[i], tl[i], pl[i], vl[i])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    same = at_half == probe.nbytes == swarm.nbytes == bound
    print(f"{'streaming buffers (nbytes)':<40}{swarm.nbytes / 1e6:>10.2f} MB   bound {n} x {args.capacity} x 7 x 8 B = "
          f"{bound / 1e6:.2f} MB, the same after {fed // 2:,}, {fed:,} and {total:,} samples   "
          f"target == bound, constant  {'ok' if same else 'MISSED'}")
    peak_ok = peak <= TARGET_PEAK_FACTOR * bound
    print(f"{'streaming peak traced memory':<40}{peak / 1e6:>10.2f} MB   ({peak / bound:.2f} x bound while "
          f"feeding {fed:,} samples; the whole flight is {total * 7 * 8 / 1e6:.0f} MB as float64)   "
          f"target <= {TARGET_PEAK_FACTOR} x bound  {'ok' if peak_ok else 'MISSED'}")
    ok &= same and peak_ok
    window = swarm.window()
    print(f"{'window() of the buffers':<40}{window.n_samples:>10} samples (= {n} x {args.capacity})")
    print(f"targets met: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
