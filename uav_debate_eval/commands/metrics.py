"""`uav-debate-eval metrics INPUT`: the flight-control, coordination and safety scores with their details."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from uav_debate_eval.core.errors import InputError

if TYPE_CHECKING:  # the data model loads with the command, not with --help
    from uav_debate_eval.core.mission import Mission
    from uav_debate_eval.core.trajectory import SwarmTrajectory

MISSION_HELP = "mission YAML (default: mission.yaml beside the input, else no constraints)"


def load_flight(inputs: list[str], mission_path: str | None,
                topics: list[str] | None = None) -> tuple[SwarmTrajectory, Mission]:
    """The trajectory (io.loader.load_inputs) and the mission: --mission, else mission.yaml beside the input."""
    from uav_debate_eval.core.mission import Mission, load_mission
    from uav_debate_eval.io.loader import load_inputs

    traj = load_inputs(inputs, topics=topics)
    if mission_path is not None:
        mission = load_mission(mission_path)
    else:
        first = Path(inputs[0])
        beside = (first if first.is_dir() else first.parent) / "mission.yaml"
        mission = load_mission(beside) if beside.is_file() else Mission(name=traj.name or "unnamed")
    if not traj.tracks:
        raise InputError(f"{inputs[0]}: no vehicle samples")
    return traj, mission


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
    p.add_argument("--mission", help=MISSION_HELP)
    p.add_argument("--json", action="store_true", help="print JSON (scores and details) instead of text")
    p.set_defaults(func=run)


def run(args) -> int:
    from uav_debate_eval.metrics.compute import compute_metrics

    traj, mission = load_flight(args.inputs, args.mission)
    result = compute_metrics(traj, mission)
    print(json.dumps(result.to_dict(), indent=2) if args.json else format_metrics(result))
    return 0
