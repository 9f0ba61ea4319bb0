"""`uav-debate-eval dsl INPUT`: print the trajectory DSL of a flight and its size against the raw arrays."""

from __future__ import annotations

import json

from uav_debate_eval.commands import add_read_options
from uav_debate_eval.commands.metrics import load_flight
from uav_debate_eval.core.errors import InputError
from uav_debate_eval.dsl import DEFAULT_BUDGET_TOKENS


def register(subparsers) -> None:
    p = subparsers.add_parser("dsl", help="print the trajectory DSL of a flight and its token counts")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="CSV, rosbag2 dir/.mcap/.db3, .bag, .ulg, .bin or .tlog files")
    add_read_options(p)
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET_TOKENS, metavar="N",
                   help=f"token budget of the DSL (default {DEFAULT_BUDGET_TOKENS})")
    p.add_argument("--json", action="store_true", help="print the DSL document (text, index, events) as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from uav_debate_eval.dsl.builder import build_dsl

    if args.budget <= 0:
        raise InputError(f"--budget must be a positive number of tokens, got {args.budget}")
    flight = load_flight(args)
    doc = build_dsl(flight.traj, flight.mission, budget_tokens=args.budget)
    if args.json:
        print(json.dumps(doc.to_dict(), indent=2))
        return 0
    print(doc.text, end="")
    print(f"# tokens={doc.tokens} raw_tokens={doc.raw_tokens} reduction={100 * doc.reduction:.1f}% "
          f"budget={doc.budget_tokens} events={len(doc.events)}")
    return 0
