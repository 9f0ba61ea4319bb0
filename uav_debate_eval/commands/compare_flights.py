"""`uav-debate-eval compare-flights A B [C ...] --out DIR`: which flight is better, and may B replace A (CONTRACT §4).

Each flight is evaluated by the offline job, as `evaluate` runs it (its report in DIR/<key>/); then a D3 debate on the
metric deltas and findings (MORE or SAMRE, optional jury, position-swap audit) decides, the safety verifier having
the last word. Writes DIR/comparison.json (validated), comparison.md, comparison.html, figures/ and
comparison_transcript.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from uav_debate_eval.commands import LLM_BACKENDS, add_llm_options
from uav_debate_eval.core.errors import InputError

EXIT_OK, EXIT_BAD_INPUT, EXIT_WORSE = 0, 2, 5

HELP = """\
Flights: each FLIGHT is an input as `evaluate` takes it (CSV, rosbag2 dir/.mcap/.db3, ROS 1 .bag, .ulg, .bin,
.tlog), or KEY=f1,f2 to name it and give several files. Several .ulg (or ArduPilot .bin/.tlog) files are one flight
(one log per vehicle); several
other files are repeated runs of one mission (deltas then carry effect sizes with bootstrap intervals).
Flights without KEY= are A, B, C, ... in order; each flight's own report goes to DIR/<key>/.
Mission: --mission FILE for every flight; otherwise each uses its nearest mission.yaml (beside its input, then above).
Debate: --protocol more (k advocates per flight, one round; default: as accurate and swap-consistent as samre on
the built-in pairs for ~30-45 % fewer tokens, benchmarks/bench_compare.py) or samre (one advocate per flight over
rounds, budgeted stopping); --jury adds 3 jurors. Prompts call the flights "Flight 1"/"Flight 2" in an order drawn from
--seed; the judge (and jury) rerun with the order swapped, and a changed winner makes the result a tie.
A flight with a hard-constraint violation never beats one without.
Exit status: 0; 5 with --fail-if-worse when B is worse than A; 2 bad input (one line on stderr).
"""


def register(subparsers) -> None:
    from uav_debate_eval.compare_flights.options import MODES, PROTOCOLS, ProtocolConfig

    d = ProtocolConfig()
    p = subparsers.add_parser("compare-flights", help="compare flights (A/B debate, swap audit, CI gate)",
                              description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("flights", nargs="+", metavar="FLIGHT", help="input, f1,f2 or KEY=f1,f2 (at least two flights)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--mission", help="mission YAML for every flight")
    add_llm_options(p, "comparison debate")
    p.add_argument("--flight-llm", default="rules", choices=LLM_BACKENDS,
                   help="panel backend of each flight's own report (default rules: the comparison debate is "
                        "where the LLM time goes)")
    p.add_argument("--fail-if-worse", action="store_true", help="exit 5 when B is worse than A (CI gate)")
    p.add_argument("--protocol", default=d.protocol, choices=PROTOCOLS, help=f"debate protocol (default {d.protocol})")
    p.add_argument("--jury", action="store_true", help="add a jury of 3 (majority; the judge breaks ties)")
    p.add_argument("--align", default="phase", choices=MODES, help="common axis of the figures (default phase)")
    p.add_argument("--seed", type=int, default=0, help="seed of the flights' order in the prompts")
    p.add_argument("--advocates", type=int, default=d.advocates, metavar="K", help="MORE: advocates per flight")
    p.add_argument("--max-rounds", type=int, default=d.max_rounds, metavar="N", help="SAMRE round budget")
    p.add_argument("--token-budget", type=int, default=d.token_budget, metavar="T", help="SAMRE token budget")
    p.add_argument("--prompt-style", default="auto", choices=("auto", "full", "compact"),
                   help="compact: shorter evidence for small models (auto: compact for the local backend)")
    p.add_argument("--no-cache", action="store_true", help="do not use the LLM response cache")
    p.add_argument("--quiet", action="store_true", help="no summary line")
    p.set_defaults(func=run)


def _check(args: argparse.Namespace) -> None:
    if not 1 <= args.advocates <= 3:
        raise InputError(f"--advocates: must be 1-3, got {args.advocates}")
    if args.max_rounds < 1:
        raise InputError(f"--max-rounds: must be >= 1, got {args.max_rounds}")
    if args.token_budget < 1:
        raise InputError(f"--token-budget: must be >= 1, got {args.token_budget}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: --out exists and is not a directory")
    if args.mission and not Path(args.mission).is_file():
        raise InputError(f"{args.mission}: mission file not found")


def _backend(args: argparse.Namespace) -> tuple[Any, str | None]:
    """(backend or None for rules, note when an LLM backend could not start and rules stood in)."""
    if args.llm == "rules":
        return None, None
    from uav_debate_eval.debate.llm.factory import LLMConfig, make_backend
    from uav_debate_eval.debate.llm.resilience import BackendUnavailable

    try:
        return make_backend(LLMConfig(backend=args.llm, model=args.model, base_url=args.base_url,
                                      use_cache=not args.no_cache)), None
    except BackendUnavailable as exc:
        return None, f"{args.llm} unavailable, the rules backend ran the debate instead: {exc}"


async def _debate_all(flights: list, cfg: Any, backend: Any) -> list[dict]:
    from uav_debate_eval.compare_flights.protocol import compare_pair

    try:
        return [await compare_pair(flights[i], flights[j], cfg, backend)
                for i in range(len(flights)) for j in range(i + 1, len(flights))]
    finally:
        if backend is not None:
            await backend.aclose()


def run(args: argparse.Namespace) -> int:
    from uav_debate_eval.compare_flights.flights import evaluate_flight_runs, parse_flight_args
    from uav_debate_eval.compare_flights.protocol import ProtocolConfig
    from uav_debate_eval.runner.job import JobOptions, ReadOptions

    _check(args)
    specs = parse_flight_args(args.flights)
    out = Path(args.out)
    llm = args.flight_llm != "rules"
    opts = JobOptions(read=ReadOptions(mission=args.mission), llm=args.flight_llm, no_cache=args.no_cache,
                      model=args.model if llm else None, base_url=args.base_url if llm else None)
    flights = [evaluate_flight_runs(key, paths, out, opts) for key, paths in specs]
    backend, fallback = _backend(args)
    cfg = ProtocolConfig(protocol=args.protocol, advocates=args.advocates, jury=args.jury, max_rounds=args.max_rounds,
                         token_budget=args.token_budget, seed=args.seed)
    local = backend is not None and backend.name == "local"
    if args.prompt_style == "compact" or (args.prompt_style == "auto" and local):
        cfg = replace(cfg, compact=True)
    pairs = asyncio.run(_debate_all(flights, cfg, backend))
    notes = [fallback] if fallback else []
    doc = write_comparison(flights, pairs, out, args.protocol, args.align,
                           backend.name if backend is not None else "rules",
                           getattr(backend, "model", None) if backend is not None else "rules", notes, args.seed)
    if not args.quiet:
        audit = doc["bias_audit"]
        print(f"winner {doc['winner']} ({args.protocol}, {doc['backend']['name']}); swap audit "
              f"{'consistent' if audit['consistent'] else 'inconsistent'}; comparison in {out / 'comparison.html'}")
    a, b = flights[0].key, flights[1].key
    if left_out := [why for f in flights for why in f.left_out]:  # bad input, as evaluate says it: the files stand
        for why in left_out:
            print(f"uav-debate-eval compare-flights: failed: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.fail_if_worse and pairs[0]["winner"] == a:
        print(f"uav-debate-eval compare-flights: {b} is worse than {a}", file=sys.stderr)
        return EXIT_WORSE
    return EXIT_OK


#: What write_comparison owns in its output directory (the flights' own report folders are left alone).
COMPARISON_OUTPUTS = ("comparison.json", "comparison.md", "comparison.html", "comparison_transcript.jsonl", "figures")


def write_comparison(flights: list, pairs: list[dict], out: Path, protocol: str, align_mode: str, backend: str,
                     model: str | None, notes: list[str], seed: int) -> dict:
    """Build, validate and write comparison.json/.md/.html, figures/ and the transcript, all at once (a failure
    leaves `out` as it was); returns the document."""
    from uav_debate_eval.compare_flights.align import align
    from uav_debate_eval.compare_flights.build import build_comparison, validate_comparison
    from uav_debate_eval.compare_flights.figures import render_comparison_figures
    from uav_debate_eval.compare_flights.render import render_html, render_markdown
    from uav_debate_eval.report.writer import staged, write_pngs

    alignment, axes = align([f.runs[0] for f in flights], align_mode)
    doc = build_comparison(flights, pairs, protocol, alignment.to_dict(), backend, model, notes, seed)
    validate_comparison(doc)
    pngs = render_comparison_figures(flights, axes, alignment.axis_label)
    with staged(out, COMPARISON_OUTPUTS) as tmp:
        write_pngs(tmp / "figures", pngs)
        (tmp / "comparison.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        (tmp / "comparison.md").write_text(render_markdown(doc, list(pngs)), encoding="utf-8")
        (tmp / "comparison.html").write_text(render_html(doc, pngs), encoding="utf-8")
        with (tmp / "comparison_transcript.jsonl").open("w", encoding="utf-8") as fh:
            for p in pairs:
                for row in p["transcript"]:
                    fh.write(json.dumps({"pair": p["flights"], **row}, default=str) + "\n")
    return doc
