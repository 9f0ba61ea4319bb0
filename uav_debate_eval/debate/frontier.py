"""The cost-accuracy frontier: the debate under each router and topology setting over the scenario suite.

Per setting: labels (final labels equal to the truth's, and panel labels equal to it), hazard identification
(injected hazards covered by a finding an agent endorsed, and named in a response), evidence quality, invalid
citations, rounds and tokens per mission (sent: prompt + completion; and processed: minus the per-round shared
prefix a KV / prompt cache reuses). Truth label of a flight: `risky` when a hazard expects a hard-constraint
violation, `borderline` when it expects only an event, else `safe`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from uav_debate_eval.debate.comparison import (
    build_contexts,
    evidence_quality,
    hazards,
    hazards_chosen,
    hazards_named,
    parse_suite_entry,
)
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.engine import run_debate
from uav_debate_eval.debate.suite import DEFAULT_SUITE

#: (router, topology, lean prompts) of the table; the first is closest to the debate before issue 13 (full prompts,
#: every agent in every round of the complexity router's layer).
SETTINGS = (("complexity", "full", False), ("complexity", "full", True), ("complexity", "sparse", True),
            ("complexity", "learned", True), ("sparse", "full", True), ("sparse", "sparse", True),
            ("sparse", "learned", True))


def parse_setting(text: str) -> tuple[str, str, bool]:
    """"router/topology" or "router/topology/full" (the prompts before issue 13) -> a SETTINGS entry."""
    from uav_debate_eval.debate.config import ROUTERS
    from uav_debate_eval.debate.topology import TOPOLOGIES

    parts = text.split("/")
    if len(parts) not in (2, 3) or parts[0] not in ROUTERS or parts[1] not in TOPOLOGIES or parts[2:] not in (
            [], ["full"], ["lean"]):
        raise ValueError(f"--settings: expected ROUTER/TOPOLOGY[/full] with a router of {', '.join(ROUTERS)} and a "
                         f"topology of {', '.join(TOPOLOGIES)}, got {text!r}")
    return parts[0], parts[1], parts[2:] != ["full"]


def truth_label(truth: list[Any]) -> str:
    found = hazards(truth)
    return "risky" if any(f.expect_constraint for f in found) else "borderline" if found else "safe"


def frontier(suite: tuple[str, ...] | list[str] = DEFAULT_SUITE, config: DebateConfig | None = None,
             settings: tuple[tuple[str, str, bool], ...] = SETTINGS, seed: int = 0, backend: Any = None) -> list[dict]:
    """One row per setting: the suite's figures added up (means per mission where it says so)."""
    from uav_debate_eval.sim.scenarios import simulate

    config = config or DebateConfig()
    if config.llm is not None:  # a disk-cache hit counts 0 tokens: the frontier measures what a mission costs
        config = replace(config, llm=replace(config.llm, use_cache=False))
    flights = []
    for entry in suite:
        name, faults = parse_suite_entry(entry)
        sim = simulate(name, seed=seed, faults=list(faults))
        flights.append((entry, sim, build_contexts(sim.traj, sim.mission)[0]))
    rows = []
    for router, topology, lean in settings:
        cfg = replace(config, router=router, topology=topology, lean_prompts=lean)
        row: dict[str, Any] = {
               "router": router, "topology": topology, "lean": lean, "flights": len(flights), "labels": 0,
               "panel_labels": 0, "chosen": 0, "named": 0, "hazards": 0, "evidence": [0, 0], "invalid": 0,
               "rounds": 0, "tokens": 0, "processed": 0, "per_flight": {}}
        for entry, sim, contexts in flights:
            res = run_debate(contexts, sim.mission, cfg, backend=backend)
            want = truth_label(sim.truth)
            tok = res.tokens()
            sent = tok["prompt"] + tok["completion"]
            row["labels"] += res.verdict.label == want
            row["panel_labels"] += res.verdict.panel_label == want
            row["chosen"] += hazards_chosen(res, sim.truth)[0]
            named, total = hazards_named(res, sim.truth)
            row["named"] += named
            row["hazards"] += total
            row["evidence"] = [a + b for a, b in zip(row["evidence"], evidence_quality(res), strict=True)]
            row["invalid"] += sum(res.invalid_citations().values())
            row["rounds"] += len(res.rounds)
            row["tokens"] += sent
            row["processed"] += sent - res.token_parts().get("cache_reusable", 0)
            row["per_flight"][entry] = {"label": res.verdict.label, "truth": want, "tokens": sent,
                                        "layers": [s.route.layer for s in res.segments],
                                        "rounds": [len(s.rounds) for s in res.segments]}
        n = max(len(flights), 1)
        row["evidence_quality"] = row["evidence"][0] / row["evidence"][1] if row["evidence"][1] else 0.0
        row["tokens_per_mission"] = row["tokens"] / n
        row["processed_per_mission"] = row["processed"] / n
        rows.append(row)
    return rows


def format_frontier(rows: list[dict]) -> str:
    head = (f"{'router':<11} {'topology':<9} {'prompts':<8} {'labels':>7} {'panel':>7} {'chosen id':>9} "
            f"{'named id':>9} {'evidence':>9} {'invalid':>8} {'rounds':>7} {'tokens/mission':>15} {'processed':>10}")
    lines = [head, "-" * len(head)]
    for r in rows:
        n, h = r["flights"], r["hazards"]
        prompts = "lean" if r["lean"] else "full"
        lines.append(f"{r['router']:<11} {r['topology']:<9} {prompts:<8} {r['labels']:>4}/{n:<2} "
                     f"{r['panel_labels']:>4}/{n:<2} {r['chosen']:>6}/{h:<2} {r['named']:>6}/{h:<2} "
                     f"{r['evidence_quality']:>8.0%} {r['invalid']:>8} {r['rounds']:>7} "
                     f"{r['tokens_per_mission']:>15.0f} {r['processed_per_mission']:>10.0f}")
    return "\n".join(lines)
