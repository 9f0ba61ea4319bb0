"""A drone show read from its drones' own logs: one ArduPilot DataFlash `.bin` per vehicle (issue 35's show scale).

The simulator's `grid` flight (N vehicles x D s at 10 Hz, a near miss injected) written as one log per vehicle,
as SITL or the show's drones write them (EKF XKF1/XKF4 at 10 Hz, GPS at 5 Hz, each vehicle booted at its own
time), twice: each vehicle on its own system id, and every vehicle on SYSID_THISMAV 1 (SITL's default, drones
left on it). For each: `evaluate` of all the logs (one flight: their spans overlap) end to end, its wall time,
CPU and peak memory (PSS of the process tree), the report's read time, and whether both readings give the same
report (verdict, violations, data quality, findings, events, metrics). Planning reads every log's span on every
core (runner.spans), each log is parsed once (io.kept_reads), and the logs of one system id are told apart by a
k-d tree of their GPS fixes. Before (d8259ae, these logs, two cores): 11.4 s for one system id (every pair of logs
compared), 4.4 s for distinct ids (the logs parsed twice, on one core). Target: the issue's memory target (1.5 GB).

    python benchmarks/bench_show_logs.py [--data DIR] [--vehicles 500] [--duration 120]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import TARGET_RSS_GB, mark, run_cli  # noqa: E402

SAME = ("verdict", "violations", "data_quality", "findings", "events", "metrics")


def show_logs(data: Path, n: int, duration: float, one_id: bool) -> list[Path]:
    """The per-vehicle logs of the grid flight (cached in `data`)."""
    folder = data / f"show_logs_{n}x{duration:g}s" / ("sysid1" if one_id else "own_ids")
    from uav_debate_eval.core.vehicle_codes import natural_key

    logs = sorted(folder.glob("*.bin"), key=lambda p: natural_key(p.stem))  # the mission's uavs name them in order
    if len(logs) == n and (folder / "mission.yaml").is_file():
        return logs
    from uav_debate_eval.core.mission_file import mission_to_yaml
    from uav_debate_eval.sim.dataflash import SIM_EPOCH_UTC, write_dataflash_logs
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=0, n_uavs=n, duration_s=duration, rate_hz=10.0, faults=["near_miss"])
    write_dataflash_logs(sim.traj, folder, SIM_EPOCH_UTC, sysid=1 if one_id else None)
    (folder / "mission.yaml").write_text(mission_to_yaml(sim.mission))
    return sorted(folder.glob("*.bin"), key=lambda p: natural_key(p.stem))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "uav_bench_scale"))
    ap.add_argument("--vehicles", type=int, default=500)
    ap.add_argument("--duration", type=float, default=120.0)
    args = ap.parse_args()
    ok = True
    reports = {}
    print(f"{args.vehicles} vehicles x {args.duration:g} s, one DataFlash log each:")
    with tempfile.TemporaryDirectory() as tmp_name:
        for one_id in (False, True):
            logs = show_logs(Path(args.data), args.vehicles, args.duration, one_id)
            out = Path(tmp_name) / ("sysid1" if one_id else "own_ids")
            cli = ["evaluate", *map(str, logs), "--out", str(out), "--quiet", "--llm", "rules"]
            _, wall, _, cpu = run_cli(cli)
            _, _, peak, _ = run_cli(cli, sample_memory=True)
            report = json.loads((out / "report.json").read_text(encoding="utf-8"))
            reports[one_id] = report
            fits = peak / 1e9 <= TARGET_RSS_GB
            ok &= fits
            size = sum(p.stat().st_size for p in logs) / 1e6
            print(f"  {'one system id' if one_id else 'own system ids'}: {len(logs)} logs, {size:.0f} MB: wall "
                  f"{wall:.2f} s ({args.duration / wall:.1f}x real time), CPU {cpu:.2f} s, read "
                  f"{report['timing']['read']:.2f} s, peak {peak / 1e9:.2f} GB (target <= {TARGET_RSS_GB} GB) "
                  f"{mark(fits)}; {len(report['mission']['uavs'])} vehicles, {len(report['violations'])} "
                  f"violation(s)")
    same = [k for k in SAME if reports[False].get(k) == reports[True].get(k)]
    print(f"  one system id and own ids give the same report in {len(same)}/{len(SAME)} sections "
          f"{mark(len(same) == len(SAME))}")
    return 0 if ok and len(same) == len(SAME) else 1


if __name__ == "__main__":
    sys.exit(main())
