"""`uav-debate-eval compare`: every evaluator (debate and baselines) over the simulator's scenario suite,
printed as the paper's Table II (coverage, evidence quality, balance, safety identification)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from uav_debate_eval.core.errors import InputError


def register(subparsers) -> None:
    from uav_debate_eval.debate.suite import ALL_METHODS, DEFAULT_SUITE

    p = subparsers.add_parser("compare", help="run the debate and the baselines over the scenario suite (Table II)")
    p.add_argument("--backend", default="rules", choices=("rules", "local", "openai"),
                   help="backend of the debate and single-agent methods (default: rules, offline)")
    p.add_argument("--model", help="model name (openai) or GGUF path (local)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint (openai backend)")
    p.add_argument("--config", help="debate config YAML (DebateConfig keys, optionally under `debate:`)")
    p.add_argument("--scenarios", nargs="+", default=list(DEFAULT_SUITE), metavar="NAME[:FAULT,...]",
                   help="suite entries, e.g. formation formation:near_miss (default: the built-in suite)")
    p.add_argument("--methods", nargs="+", default=list(ALL_METHODS), choices=ALL_METHODS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="flights evaluated at once in worker processes (each loads its own model; default 1)")
    p.add_argument("--json", metavar="FILE", help="also write the table and per-run details as JSON")
    p.add_argument("--frontier", action="store_true",
                   help="instead of Table II: the debate's cost-accuracy table for each router and topology setting "
                        "(labels, hazard identification, evidence quality, tokens per mission)")
    p.add_argument("--settings", nargs="+", metavar="ROUTER/TOPOLOGY[/full]",
                   help="frontier rows, e.g. sparse/learned complexity/full/full (/full: prompts before issue 13; "
                        "default: every router and topology)")
    p.set_defaults(func=run)


def run(args) -> int:
    from uav_debate_eval.debate.comparison import compare, format_table
    from uav_debate_eval.debate.config import DebateConfig

    config = DebateConfig.from_yaml(args.config) if args.config else DebateConfig()
    if args.backend != "rules" or args.model or args.base_url:
        from uav_debate_eval.debate.llm.factory import LLMConfig

        llm = config.llm if config.llm is not None else LLMConfig()
        llm = replace(llm, backend=args.backend, model=args.model or llm.model, base_url=args.base_url or llm.base_url)
        config = replace(config, backend=args.backend, model=args.model or config.model, llm=llm)

    def progress(entry: str, info: dict) -> None:
        labels = ", ".join(f"{m}={info[m]['label']}" for m in args.methods)
        print(f"{entry}: {info['segments']} segments, {info['hazards']} hazards; {labels}", file=sys.stderr)

    if args.frontier:
        return _frontier(args, config)
    try:
        if args.jobs < 1:
            raise ValueError(f"--jobs: must be >= 1, got {args.jobs}")
        rows, details = compare(args.scenarios, config, tuple(args.methods), seed=args.seed, progress=progress,
                                jobs=args.jobs)
    except ValueError as exc:  # unknown fault kind or method reach here as ValueError from the factories
        raise InputError(str(exc)) from None
    print(f"Table II on {len(args.scenarios)} flights, backend {args.backend}")
    print(format_table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, **details}, indent=2), encoding="utf-8")
    return 0


def _frontier(args, config) -> int:
    from uav_debate_eval.debate.frontier import SETTINGS, format_frontier, frontier, parse_setting

    try:
        settings = tuple(parse_setting(x) for x in args.settings) if args.settings else SETTINGS
        rows = frontier(args.scenarios, config, settings, seed=args.seed)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    print(f"Cost-accuracy frontier on {len(args.scenarios)} flights, backend {args.backend}"
          + (" (tokens estimated)" if args.backend == "rules" else ""))
    print(format_frontier(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({"frontier": rows}, indent=2), encoding="utf-8")
    return 0
