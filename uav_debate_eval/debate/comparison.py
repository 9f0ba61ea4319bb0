"""The paper's Table II: every evaluator over a scenario suite with injected hazards, four columns.

- coverage: share of the keyword taxonomy's 12 evaluation topics that the method's output mentions (mean over
  scenarios);
- evidence quality: share of responses whose evidence has at least one verified data reference (a resolved
  DSL id or metric whose quoted numbers match) and a number with a unit;
- balance: normalised entropy (0..1) of keyword hits over the three categories flight control /
  coordination / safety (1 = equal attention), mean over scenarios;
- safety identification: injected hazards (simulator truth, route corners excluded) named in a response of
  a segment overlapping the hazard, by its constraint, event or a synonym / total hazards;
- chosen identification (the model's own contribution): injected hazards covered by a hazard or warning
  finding that an agent *endorsed* in a segment overlapping the hazard (finding kind or sentence naming the
  constraint, event or a synonym, its time overlapping the hazard) / total hazards. The tool's deterministic
  text does not count here: only the panel's choices do.
Paper's figures for the debate: 95 %, 87 %, 0.92, 7/7.
"""

from __future__ import annotations

import math
import re
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from uav_debate_eval.debate.baselines import evaluate_baseline
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.engine import DebateResult, SegmentContext, run_debate
from uav_debate_eval.debate.evidence import has_data_ref
from uav_debate_eval.debate.suite import ALL_METHODS, DEFAULT_SUITE

PAPER = {"coverage": 0.95, "evidence_quality": 0.87, "balance": 0.92, "hazards": "7/7"}

TAXONOMY: dict[str, tuple[str, ...]] = {
    "tracking accuracy": ("tracking", "track", "deviation", "waypoint", "path error", "rmse"),
    "smoothness": ("jerk", "smooth", "acceleration", "oscillat"),
    "heading and turns": ("heading", "turn", "course"),
    "altitude": ("altitude", "vertical", "climb", "descent"),
    "speed": ("speed", "velocity"),
    "formation": ("formation", "shape"),
    "spacing and cohesion": ("spacing", "cohesion", "neighbour", "group"),
    "communication": ("link", "communication", "stale", "dropout", "telemetry"),
    "separation": ("separation", "collision", "proximity", "near miss", "clearance"),
    "geofence": ("geofence", "fence", "boundary"),
    "margins": ("margin", "limit", "envelope", "violation"),
    "efficiency": ("efficiency", "energy", "battery", "duration", "distance"),
}
CATEGORY_WORDS: dict[str, tuple[str, ...]] = {
    "flight_control": ("flight_control", "flight-control", "tracking", "jerk", "smooth", "heading", "turn",
                       "altitude", "trajectory", "precision"),
    "coordination": ("coordination", "formation", "spacing", "cohesion", "swarm", "group", "link", "synchron"),
    "safety": ("safety", "separation", "collision", "geofence", "violation", "margin", "risk", "proximity",
               "stale", "hazard"),
}
HAZARD_WORDS: dict[str, tuple[str, ...]] = {
    "min_separation": ("min_separation", "separation", "proximity", "collision", "near miss"),
    "max_vertical_speed": ("max_vertical_speed", "vertical speed", "altitude_rate", "altitude rate", "descent"),
    "geofence": ("geofence", "fence"),
    "stale_data": ("stale_data", "stale", "dropout", "telemetry"),
    "max_speed": ("max_speed", "overspeed", "speed limit"),
    "sharp_turn": ("sharp_turn", "sharp turn", "turn"),
    "link_loss": ("link_loss", "link loss", "link"),
    "altitude_rate": ("altitude_rate", "altitude rate", "vertical"),
    "proximity": ("proximity", "separation"),
}


def _low(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower())


def _hits(text: str, words: tuple[str, ...]) -> int:
    return sum(text.count(w) for w in words)


def output_text(result: DebateResult) -> str:
    parts = [r.response.text() for rd in result.rounds for r in rd.responses]
    return _low(" ".join(parts + list(result.verdict.recommendations)))


def coverage(text: str) -> float:
    return sum(_hits(text, ws) > 0 for ws in TAXONOMY.values()) / len(TAXONOMY)


def balance(text: str) -> float:
    counts = [_hits(text, ws) for ws in CATEGORY_WORDS.values()]
    total = sum(counts)
    if total == 0:
        return 0.0
    return -sum(c / total * math.log(c / total) for c in counts if c) / math.log(len(counts))


def evidence_quality(result: DebateResult) -> tuple[int, int]:
    """(responses with a verified data reference, responses)."""
    rs = [r for rd in result.rounds for r in rd.responses if not r.reused]  # a kept answer counts once
    good = sum(r.valid_evidence > 0 and has_data_ref(" ".join(r.response.evidence)) for r in rs)
    return good, len(rs)


def hazards(truth: list[Any]) -> list[Any]:
    return [f for f in truth if f.kind != "route_turn" and (f.expect_constraint or f.expect_event)]


def _hazard_words(f: Any) -> tuple[str, ...]:
    """The words that name a truth fault: its constraint, event and kind, with their usual synonyms."""
    return tuple(w for key in (f.expect_constraint, f.expect_event, f.kind) if key
                 for w in HAZARD_WORDS.get(key, (key, key.replace("_", " "))))


def _segments_over(result: DebateResult, f: Any) -> list[Any]:
    """The debated segments that overlap fault f in time."""
    return [seg for seg in result.segments if seg.t_start <= f.t_end and seg.t_end >= f.t_start]


def hazards_named(result: DebateResult, truth: list[Any]) -> tuple[int, int]:
    found = hazards(truth)
    named = 0
    for f in found:
        words = _hazard_words(f)
        texts = [_low(r.response.text()) for seg in _segments_over(result, f) for rd in seg.rounds
                 for r in rd.responses]
        named += any(_hits(t, words) for t in texts)
    return named, len(found)


def names_fault(finding: Any, fault: Any) -> bool:
    """A hazard or warning finding about truth fault `fault`: its time overlaps the fault's (+-1 s) and its kind or
    sentence names the fault's constraint, event or a synonym."""
    return (finding.severity in ("hazard", "warning") and finding.t_start <= fault.t_end + 1.0
            and finding.t_end >= fault.t_start - 1.0
            and bool(_hits(_low(f"{finding.kind} {finding.sentence}"), _hazard_words(fault))))


def hazards_chosen(result: DebateResult, truth: list[Any]) -> tuple[int, int]:
    """(hazards covered by a hazard/warning finding some agent endorsed, hazards)."""
    found = hazards(truth)
    named = 0
    for f in found:
        named += any(c["stance"] == "endorse" and c["id"] in by_id and names_fault(by_id[c["id"]], f)
                     for seg in _segments_over(result, f)
                     for by_id in [{x.id: x for x in getattr(seg, "findings", []) or []}]
                     for rd in seg.rounds for r in rd.responses for c in r.response.choices)
    return named, len(found)


def run_stats(result: DebateResult, truth: list[Any]) -> dict:
    """One method's Table II figures on one flight, in a form that adds up across flights (and processes)."""
    text = output_text(result)
    t = result.tokens()
    return {"coverage": coverage(text), "balance": balance(text), "evidence": list(evidence_quality(result)),
            "named": list(hazards_named(result, truth)), "chosen": list(hazards_chosen(result, truth)),
            "struck": int(result.to_report()["struck"]["count"]), "tokens": t["prompt"] + t["completion"],
            "rounds": len(result.rounds), "seconds": result.elapsed_s}


@dataclass
class Row:
    method: str
    coverage: list[float] = field(default_factory=list)
    evidence: list[int] = field(default_factory=lambda: [0, 0])
    balance: list[float] = field(default_factory=list)
    named: list[int] = field(default_factory=lambda: [0, 0])
    chosen: list[int] = field(default_factory=lambda: [0, 0])
    struck: int = 0
    tokens: int = 0
    rounds: int = 0
    seconds: float = 0.0

    def add(self, stats: dict) -> None:
        """Add one flight's `run_stats`."""
        self.coverage.append(stats["coverage"])
        self.balance.append(stats["balance"])
        self.evidence = [a + b for a, b in zip(self.evidence, stats["evidence"], strict=True)]
        self.named = [a + b for a, b in zip(self.named, stats["named"], strict=True)]
        self.chosen = [a + b for a, b in zip(self.chosen, stats.get("chosen", [0, 0]), strict=True)]
        self.struck += stats.get("struck", 0)
        self.tokens += stats["tokens"]
        self.rounds += stats["rounds"]
        self.seconds += stats["seconds"]

    def to_dict(self) -> dict:
        mean = (lambda xs: sum(xs) / len(xs) if xs else 0.0)  # noqa: E731
        return {"method": self.method, "coverage": mean(self.coverage),
                "evidence_quality": self.evidence[0] / self.evidence[1] if self.evidence[1] else 0.0,
                "balance": mean(self.balance), "hazards_named": self.named[0], "hazards_total": self.named[1],
                "hazards_chosen": self.chosen[0], "struck": self.struck,
                "tokens": self.tokens, "rounds": self.rounds, "seconds": round(self.seconds, 3)}


def build_contexts(traj: Any, mission: Any) -> tuple[list[SegmentContext], Any]:
    """Per mission segment: its DSL, its own metrics and the flight's safety result (the pipeline's
    segment_work.segment_context, at the DSL's default budget)."""
    from uav_debate_eval.dsl import DEFAULT_BUDGET_TOKENS
    from uav_debate_eval.dsl.events import detect_events
    from uav_debate_eval.dsl.segments import mission_segments
    from uav_debate_eval.metrics.compute import compute_metrics
    from uav_debate_eval.runner.segment_work import segment_context
    from uav_debate_eval.safety.checker import check_trajectory

    safety = check_trajectory(traj, mission)
    metrics = compute_metrics(traj, mission, safety)
    events = detect_events(traj, mission, safety)
    return [segment_context(traj, mission, seg, safety, metrics, events, DEFAULT_BUDGET_TOKENS)
            for seg in mission_segments(traj, mission, safety=safety)], safety


def parse_suite_entry(entry: str) -> tuple[str, list[str]]:
    name, _, faults = entry.partition(":")
    return name, [f for f in faults.split(",") if f]


def run_method(method: str, contexts: list[SegmentContext], mission: Any, config: DebateConfig,
               backend: Any = None) -> DebateResult:
    if method == "debate":
        return run_debate(contexts, mission, config, backend=backend)
    return evaluate_baseline(method, contexts, mission, config, backend=backend)


def run_entry(entry: str, config: DebateConfig, methods: tuple[str, ...], seed: int = 0,
              backend: Any = None) -> dict:
    """Every method on one suite entry: labels, routing, tokens and `run_stats` per method."""
    from uav_debate_eval.sim.scenarios import simulate

    name, faults = parse_suite_entry(entry)
    t0 = time.perf_counter()
    sim = simulate(name, seed=seed, faults=faults)
    contexts, _ = build_contexts(sim.traj, sim.mission)
    info: dict[str, Any] = {"scenario": entry, "segments": len(contexts), "hazards": len(hazards(sim.truth)),
                            "prep_s": time.perf_counter() - t0}
    for m in methods:
        result = run_method(m, contexts, sim.mission, config, backend)
        stats = run_stats(result, sim.truth)
        info[m] = {"label": result.verdict.label, "named": stats["named"][0], "chosen": stats["chosen"][0],
                   "layers": [s.route.layer for s in result.segments],
                   "rounds": [len(s.rounds) for s in result.segments], "tokens": result.tokens(),
                   "invalid_citations": result.invalid_citations(), "stats": stats}
    return info


def compare(suite: tuple[str, ...] | list[str] = DEFAULT_SUITE, config: DebateConfig | None = None,
            methods: tuple[str, ...] = ALL_METHODS, seed: int = 0, backend: Any = None,
            progress: Any = None, jobs: int = 1) -> tuple[list[dict], dict]:
    """Run every method on every suite entry ("scenario" or "scenario:fault,fault"); (table rows, per-run info).

    `jobs` > 1 runs entries in that many worker processes (each loads its own model; `backend` must be None).
    The table is the same either way: rows add up per-flight stats in suite order.
    """
    config = config or DebateConfig()
    if jobs > 1 and backend is not None:
        raise ValueError("compare: a backend object cannot be shared with worker processes; pass jobs=1")
    runs: list[dict] = []
    if jobs <= 1 or len(suite) <= 1:
        for entry in suite:
            runs.append(run_entry(entry, config, methods, seed, backend))
            if progress is not None:
                progress(entry, runs[-1])
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, len(suite))) as pool:
            futures = {pool.submit(run_entry, e, config, methods, seed): e for e in suite}
            done = {}
            for fut in as_completed(futures):
                done[futures[fut]] = fut.result()
                if progress is not None:
                    progress(futures[fut], done[futures[fut]])
        runs = [done[e] for e in suite]
    rows = {m: Row(m) for m in methods}
    for info in runs:
        for m in methods:
            rows[m].add(info[m]["stats"])
    return [rows[m].to_dict() for m in methods], {"runs": runs}


def format_table(rows: list[dict]) -> str:
    head = (f"{'method':<14} {'coverage':>9} {'evidence':>9} {'balance':>8} {'safety id':>10} {'chosen id':>10} "
            f"{'struck':>7} {'tokens':>9} {'rounds':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['method']:<14} {r['coverage']:>8.0%} {r['evidence_quality']:>8.0%} {r['balance']:>8.2f} "
                     f"{r['hazards_named']:>4}/{r['hazards_total']:<5} "
                     f"{r['hazards_chosen']:>4}/{r['hazards_total']:<5} {r['struck']:>7} {r['tokens']:>9} "
                     f"{r['rounds']:>7}")
    lines.append(f"{'paper debate':<14} {PAPER['coverage']:>8.0%} {PAPER['evidence_quality']:>8.0%} "
                 f"{PAPER['balance']:>8.2f} {PAPER['hazards']:>10}")
    return "\n".join(lines)
