"""Does the panel add anything? Its choices against the simulator's ground truth, per finding, and what it costs.

python benchmarks/bench_panel.py [--backend rules|local] [--scenarios ...] [--no-artefact]

Per method (the debate and the single-agent baseline, on the chosen backend), over the built-in suite plus one
recorded flight with an injected artefact (a one-frame motion-capture swap, sim.recording):
- Table II chosen identification (comparison.hazards_chosen: endorsed by some agent in some round);
- hazards endorsed: injected hazards (route turns excluded) covered by a hazard or warning finding the final round
  endorsed (more endorsements than disputes) / injected hazards;
- true events not disputed: hazard and warning findings overlapping an injected fault (time +-1 s, vehicles) that the
  final round did not dispute / such findings;
- injected artefacts disputed: hazard and warning findings of vehicles overlapping an injected artefact (time +-0.5 s,
  vehicles) that the final round disputed as sensor_artefact / such findings;
- coherence (debate.coherence summed over the flights; target 0 each) and inadmissible choices;
- tokens per mission (no disk cache), before (measured at b1753cc, before issue 23) -> now, with the targets: mean
  <= 4,200 with `rules`, no flight over 12,000.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from uav_debate_eval.debate.baselines import evaluate_baseline
from uav_debate_eval.debate.coherence import KEYS
from uav_debate_eval.debate.comparison import (
    DEFAULT_SUITE,
    build_contexts,
    hazards,
    hazards_chosen,
    names_fault,
    parse_suite_entry,
)
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate

TOKEN_MEAN_TARGET = 4200
TOKEN_MAX_TARGET = 12000
#: Tokens per mission before issue 23 (commit b1753cc, bench_debate / the same runs without the disk cache).
BEFORE = {
    "rules": {"formation": 997, "surveillance": 903, "tracking": 1033, "swap": 943, "formation:near_miss": 15967,
              "formation:altitude_drop": 14717, "surveillance:geofence_exit": 8792,
              "formation:telemetry_dropout": 8601, "tracking:overspeed": 8532, "surveillance:sharp_turn": 3355,
              "formation:link_loss": 3238},
    "local": {"formation": 1023, "surveillance": 838, "tracking": 1006, "swap": 887, "formation:near_miss": 15574,
              "formation:altitude_drop": 18684, "surveillance:geofence_exit": 8406,
              "formation:telemetry_dropout": 7918, "tracking:overspeed": 7897, "surveillance:sharp_turn": 4119,
              "formation:link_loss": 3281},
}
ARTEFACT = "formation:mocap_swap"


def _decisions(result: Any) -> list[tuple[Any, str, set[str]]]:
    """(segment finding, endorsed | disputed | split | none, dispute reasons) from each segment's final round."""
    out = []
    for seg in result.segments:
        final = seg.rounds[-1].responses if seg.rounds else []
        for f in seg.findings:
            stances = [c for r in final for c in r.response.choices if c["id"] == f.id]
            e = sum(c["stance"] == "endorse" for c in stances)
            d = len(stances) - e
            decision = "endorsed" if e > d else "disputed" if d > e else "split" if e else "none"
            out.append((f, decision, {c["reason"] for c in stances if c["stance"] == "dispute"}))
    return out


def _overlaps(f: Any, t0: float, t1: float, uavs: list[str], slack: float) -> bool:
    return f.t_start <= t1 + slack and f.t_end >= t0 - slack and (not f.uavs or bool(set(f.uavs) & set(uavs)))


def agreement(result: Any, truth: list, artefacts: list[tuple[float, float, list[str]]]) -> dict[str, list[int]]:
    """[agreeing, total] for the three per-finding measures (see the module docstring)."""
    decided = _decisions(result)
    faults = [t for t in truth if t.kind != "route_turn"]
    events = [(f, d) for f, d, _ in decided if f.severity in ("hazard", "warning")
              and any(_overlaps(f, t.t_start, t.t_end, t.uavs, 1.0) for t in faults)]
    caused = [(f, d, why) for f, d, why in decided if f.severity in ("hazard", "warning") and f.uavs
              and any(_overlaps(f, t0, t1, u, 0.5) for t0, t1, u in artefacts)]
    found = hazards(truth)
    endorsed = sum(any(d == "endorsed" and names_fault(f, t) for f, d, _ in decided) for t in found)
    return {"table_ii_chosen": list(hazards_chosen(result, truth)), "hazards_endorsed": [endorsed, len(found)],
            "events_not_disputed": [sum(d != "disputed" for _, d in events), len(events)],
            "artefacts_disputed": [sum(d == "disputed" and "sensor_artefact" in why for _, d, why in caused),
                                   len(caused)]}


def _artefact_flight(tmp: Path) -> tuple[Any, Any, list]:
    """A formation flight recorded by motion capture with uav2 and uav3 swapped in one frame at 12 s."""
    from uav_debate_eval.io.loader import load_inputs
    from uav_debate_eval.sim.recording import write_mocap_bags

    sim = simulate("formation", seed=1, n_uavs=4, duration_s=40, rate_hz=80)
    traj = load_inputs(write_mocap_bags(sim.traj, tmp / "swap", swap=("uav2", "uav3", 12.0)))
    return traj, sim, [(12.0, 12.0, ["uav2", "uav3"])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="rules", choices=("rules", "local", "openai"))
    ap.add_argument("--model")
    ap.add_argument("--scenarios", nargs="+", default=list(DEFAULT_SUITE))
    ap.add_argument("--no-artefact", action="store_true", help="skip the recorded flight with a mocap swap")
    args = ap.parse_args()
    cfg = DebateConfig(backend=args.backend, model=args.model)
    if args.backend != "rules":
        from uav_debate_eval.debate.llm.factory import LLMConfig

        cfg = replace(cfg, llm=LLMConfig(backend=args.backend, model=args.model, use_cache=False))
    methods = ("debate", "single_agent")
    rows = {m: {"table_ii_chosen": [0, 0], "hazards_endorsed": [0, 0], "events_not_disputed": [0, 0],
                "artefacts_disputed": [0, 0]} for m in methods}
    incoherent = dict.fromkeys(KEYS, 0)
    inadmissible = {"answers": 0, "repaired": 0, "dropped": 0}
    tokens: dict[str, int] = {}
    flights = [(e, None) for e in args.scenarios] + ([] if args.no_artefact else [(ARTEFACT, "swap")])
    with tempfile.TemporaryDirectory() as tmp:
        for entry, artefact in flights:
            if artefact:
                traj, sim, spans = _artefact_flight(Path(tmp))
            else:
                name, faults = parse_suite_entry(entry)
                sim = simulate(name, seed=0, faults=faults)
                traj, spans = sim.traj, []
            ev = evaluate(traj, sim.mission, cfg)
            for k, n in ev.report["debate"]["coherence"].items():
                incoherent[k] += n
            for k, n in (ev.report["debate"].get("inadmissible") or {}).items():
                inadmissible[k] += n
            t = ev.debate.tokens()
            if not artefact:
                tokens[entry] = t["prompt"] + t["completion"]
            # the single agent on the same (assessed) flight the pipeline checked
            single = evaluate_baseline("single_agent", build_contexts(ev.traj, sim.mission)[0], sim.mission, cfg)
            for method, result in (("debate", ev.debate), ("single_agent", single)):
                for k, (a, n) in agreement(result, sim.truth, spans).items():
                    rows[method][k] = [rows[method][k][0] + a, rows[method][k][1] + n]
            print(f"{entry:<28} label={ev.report['verdict']['label']:<9} tokens={tokens.get(entry, '-')!s:>6} "
                  f"coherence={ev.report['debate']['coherence']} hazards={len(hazards(sim.truth))}", flush=True)
    print(f"\nbackend {args.backend}: the panel's choices against the simulator's truth, per finding")
    print(f"{'method':<14} {'Table II chosen':>16} {'hazards endorsed':>17} {'true events not disputed':>25} "
          f"{'artefacts disputed':>19}")
    for m, r in rows.items():
        cells = [f"{a}/{n}" if n else "n/a" for a, n in r.values()]
        print(f"{m:<14} {cells[0]:>16} {cells[1]:>17} {cells[2]:>25} {cells[3]:>19}")
    print("targets: Table II chosen >= 6/7; hazards endorsed and true events not disputed: all; artefacts disputed: "
          "all (n/a when the quality pass set the artefact apart before any check)")
    print(f"coherence over the flights: {incoherent}  (target: all 0)")
    print(f"inadmissible choices: {inadmissible}")
    before = BEFORE.get(args.backend, {})
    print(f"\ntokens per mission ({args.backend}, no disk cache): before -> now")
    for entry, n in tokens.items():
        print(f"  {entry:<28} {before.get(entry, '-')!s:>6} -> {n:>6}")
    mean = statistics.mean(tokens.values())
    old = [before[e] for e in tokens if e in before]
    print(f"  mean {statistics.mean(old) if old else float('nan'):.0f} -> {mean:.0f} (target <= {TOKEN_MEAN_TARGET} "
          f"with rules: {'met' if mean <= TOKEN_MEAN_TARGET else 'NOT met'}); max {max(old, default=0)} -> "
          f"{max(tokens.values())} (target <= {TOKEN_MAX_TARGET}: "
          f"{'met' if max(tokens.values()) <= TOKEN_MAX_TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
