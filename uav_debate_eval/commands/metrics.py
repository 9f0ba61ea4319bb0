"""`uav-debate-eval metrics INPUT`: the flight-control, coordination and safety scores with their details."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from uav_debate_eval.commands import add_read_options, read_options

if TYPE_CHECKING:  # the data model loads with the command, not with --help
    from uav_debate_eval.runner.job import LoadedFlight


def load_flight(args: argparse.Namespace) -> LoadedFlight:
    """The flight as `evaluate` reads it (runner.job.read_flight): same mission, same vehicles."""
    from uav_debate_eval.runner.job import read_flight

    return read_flight([Path(p) for p in args.inputs], read_options(args))


def format_metrics(result) -> str:
    """Plain-text table: category scores, then every metric with value, unit and formula."""
    def f(x, nd=3):
        return "n/a" if x is None else f"{x:.{nd}f}"

    s = result.scores
    lines = [f"overall={f(s['overall'])} flight_control={f(s['flight_control'])} "
             f"coordination={f(s['coordination'])} safety={f(s['safety'])}"]
    for cat, metrics in result.details.items():
        lines.append(f"{cat}: {f(s.get(cat))}" + ("" if metrics else " (not applicable: single vehicle)"))
        for name, d in metrics.items():
            value = "n/a" if d["value"] is None else f"{d['value']:.4g} {d['unit']}"
            lines.append(f"  {name:<22} score={f(d['score'])} value={value:<18} {d['formula']}")
    return "\n".join(lines)


def register(subparsers) -> None:
    p = subparsers.add_parser("metrics", help="print the metric scores of a flight")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="CSV, rosbag2 dir/.mcap/.db3, .bag, .ulg, .bin or .tlog files")
    add_read_options(p)
    p.add_argument("--json", action="store_true", help="print JSON (vehicles, scores and details) instead of text")
    p.set_defaults(func=run)


def run(args) -> int:
    from uav_debate_eval.metrics.compute import compute_metrics

    flight = load_flight(args)
    result = compute_metrics(flight.traj, flight.mission)
    vehicles = flight.traj.uav_ids
    if args.json:
        print(json.dumps({"vehicles": vehicles, **result.to_dict()}, indent=2))
    else:
        print(format_metrics(result) + f"\nvehicles: {', '.join(vehicles)}")
    return 0
