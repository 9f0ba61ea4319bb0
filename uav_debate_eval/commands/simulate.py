"""`uav-debate-eval simulate`: fly a built-in scenario (optionally with faults) and write data, mission, truth."""

from __future__ import annotations

import argparse
import time

from uav_debate_eval.core.errors import InputError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "simulate", help="simulate a scenario: trajectory CSV / bags, mission.yaml, truth.json",
        description="Fly a seeded built-in scenario with optional injected faults and write the trajectory "
                    "(CSV and/or ROS bags), the mission it was flown under and the ground truth of its faults.")
    p.add_argument("scenario", nargs="?", help="scenario name (see --list)")
    p.add_argument("--list", action="store_true", help="list the scenarios and fault kinds, then exit")
    p.add_argument("--out", help="output directory")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--uavs", type=int, help="number of vehicles (default: the scenario's)")
    p.add_argument("--duration", type=float, help="flight length in s (default: 60, longer when faults need it)")
    p.add_argument("--rate", type=float, help="sample rate in Hz (default 20)")
    p.add_argument("--fault", action="append", default=[], metavar="KIND[@T]",
                   help="inject a fault, optionally starting at T s (repeatable)")
    p.add_argument("--format", default="csv,mcap",
                   help="comma-separated outputs among csv, mcap, db3, bag, bin (ArduPilot DataFlash logs, "
                   "one per vehicle, in OUT/ardupilot/; default csv,mcap)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from uav_debate_eval.sim.faults import FAULT_KINDS
    from uav_debate_eval.sim.scenarios import SCENARIOS, simulate

    if args.list:
        for s in SCENARIOS.values():
            vehicles = str(s.min_uavs) if s.min_uavs == s.max_uavs else f"{s.min_uavs}-{s.max_uavs}"
            c = s.constraints
            print(f"{s.name:13s} {s.description}\n{'':13s} vehicles {vehicles} (default {s.default_uavs}), "
                  f"min_sep {c['min_separation_m']} m, max_speed {c['max_speed_mps']} m/s, "
                  f"max_vz {c['max_vertical_speed_mps']} m/s, stale {c['stale_timeout_s']} s")
        print("faults:", ", ".join(f"{k} ({c or '-'} / {e or '-'})" for k, (c, e) in FAULT_KINDS.items()))
        return 0
    if not args.scenario:
        raise InputError("give a SCENARIO (or --list to see them)")
    if not args.out:
        raise InputError("--out DIR is required")
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    if not formats:
        raise InputError("--format needs at least one of csv, mcap, db3, bag, bin")
    started = time.perf_counter()
    result = simulate(args.scenario, seed=args.seed, n_uavs=args.uavs, duration_s=args.duration,
                      rate_hz=args.rate, faults=args.fault)
    paths = result.write(args.out, formats)
    traj = result.traj
    print(f"{result.name}: {len(traj.uav_ids)} vehicle(s), {result.duration_s:g} s at {result.rate_hz:g} Hz, "
          f"{traj.n_samples} samples, faults: {', '.join(result.faults) or 'none'} "
          f"({time.perf_counter() - started:.1f} s)")
    for path in paths:
        print(f"wrote {path}")
    return 0
