"""Hand-made stand-ins for DslDocument / MetricsResult / SafetyResult and a scripted LLM backend (no tests here)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field

from uav_debate_eval.core.records import Event, Violation
from uav_debate_eval.debate.engine import SegmentContext
from uav_debate_eval.debate.llm.base import ChatRequest, ChatResult


@dataclass
class Item:
    id: str
    kind: str
    t_start: float | None
    t_end: float | None
    uavs: list[str]
    values: dict
    text: str


@dataclass
class Doc:
    text: str
    tokens: int
    index: dict[str, Item]
    events: list[Event] = field(default_factory=list)

    def resolve(self, id: str) -> Item:
        return self.index[id]


@dataclass
class Metrics:
    scores: dict
    details: dict


@dataclass
class Safety:
    violations: list[Violation] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    margins: dict = field(default_factory=dict)
    label: str = "safe"

    @property
    def vetoed(self) -> bool:
        return bool(self.violations)


def make_doc(t0: float = 0.0, t1: float = 30.0, n_events: int = 0, violation: bool = False) -> Doc:
    items = [Item("SEG[1]", "segment", t0, t1, ["uav1", "uav2", "uav3"],
                  {"speed_mean_mps": 1.52, "speed_max_mps": 2.1, "heading_deg": 90.0}, "SEG[1] cruise"),
             Item("SEG[2]", "formation", t0, t1, ["uav1", "uav2", "uav3"],
                  {"spacing_mean_m": 2.04, "spacing_min_m": 1.61}, "SEG[2] formation spacing")]
    events = []
    for k in range(1, n_events + 1):
        t = t0 + k
        items.append(Item(f"EVENT[{k}]", "sharp_turn", t, t + 0.5, ["uav2"], {"value": 35.0 + k, "unit": "deg"},
                          f"EVENT[{k}] sharp_turn uav2 {35.0 + k} deg"))
        events.append(Event(f"EVENT[{k}]", "sharp_turn", t, ["uav2"], t + 0.5, 35.0 + k, "deg"))
    if violation:
        items.append(Item("RISK[1]", "violation", t0 + 5, t0 + 6, ["uav1", "uav2"],
                          {"worst_value": 0.31, "limit": 0.5}, "RISK[1] min_separation 0.31 m < 0.5 m"))
    text = "\n".join(it.text for it in items)
    return Doc(text, len(text.split()), {it.id: it for it in items}, events)


def make_metrics(fc: float = 0.97, co: float = 0.96, sa: float = 0.98) -> Metrics:
    details = {
        "flight_control": {"tracking_rmse": {"score": fc, "value": 0.12, "unit": "m", "formula": "rmse"},
                           "jerk_rms": {"score": 0.99, "value": 0.8, "unit": "m/s^3", "formula": "rms"}},
        "coordination": {"formation_error": {"score": co, "value": 0.2, "unit": "m", "formula": "mean"},
                         "spacing_cv": {"score": 0.97, "value": 0.05, "unit": "", "formula": "cv"}},
        "safety": {"separation_margin": {"score": sa, "value": 1.61, "unit": "m", "formula": "min"}},
    }
    overall = round(0.35 * fc + 0.40 * co + 0.25 * sa, 4)
    return Metrics({"flight_control": fc, "coordination": co, "safety": sa, "overall": overall}, details)


def make_safety(violation: bool = False, borderline: bool = False, t0: float = 0.0) -> Safety:
    if violation:
        v = Violation("min_separation", t0 + 5, t0 + 6, ["uav1", "uav2"], 0.31, 0.5)
        return Safety([v], [], {"min_separation": {"worst_value": 0.31, "limit": 0.5, "ratio": 1.38}}, "risky")
    if borderline:
        return Safety([], [], {"max_speed": {"worst_value": 2.85, "limit": 3.0, "ratio": 0.95}}, "borderline")
    return Safety([], [], {"max_speed": {"worst_value": 2.1, "limit": 3.0, "ratio": 0.7}}, "safe")


def make_context(seg: str = "MSEG[1]", t0: float = 0.0, t1: float = 30.0, n_events: int = 0,
                 violation: bool = False, borderline: bool = False, fc: float = 0.97) -> SegmentContext:
    return SegmentContext(seg, t0, t1, make_doc(t0, t1, n_events, violation), make_metrics(fc=fc),
                          make_safety(violation, borderline, t0))


def answer(label: str = "safe", confidence: float = 0.8, claim: str = "The swarm flew a precise cruise segment.",
           evidence: list | None = None, summary: str = "Tracking is precise. Recommend keeping the gains.") -> dict:
    return {"claim": claim, "evidence": evidence if evidence is not None else [
        {"id": "SEG[1]", "note": "speed_mean_mps=1.52 m/s"}, {"id": "SEG[2]", "note": "spacing_min_m=1.61 m"},
        {"id": "flight_control.tracking_rmse", "note": "0.12 m"}],
        "counter": "Averages may hide a worst case.", "summary": summary, "confidence": confidence, "label": label}


def judge_answer(request: ChatRequest) -> dict:
    """A well-formed judge synthesis: the first label it may choose, citing the first valid id."""
    props = request.json_schema["properties"]
    return {"label": props["label"]["enum"][0], "summary": "The panel agrees the segment was flown as planned.",
            "recommendations": ["Recommend keeping the current gains."], "evidence": request.valid_ids[:1]}


class ScriptedBackend:
    """LLMBackend double: `script(request) -> dict | Exception` decides each agent's answer, `judge` the judge's;
    agent requests are kept in `requests`, judge requests in `judge_requests`."""

    name = "fake"
    model = "fake-1"

    def __init__(self, script: Callable[[ChatRequest], dict | Exception], delay_s: float = 0.0,
                 judge: Callable[[ChatRequest], dict | Exception] = judge_answer):
        self.script, self.delay_s, self.judge = script, delay_s, judge
        self.requests: list[ChatRequest] = []
        self.judge_requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResult:
        is_judge = request.agent == "judge"
        (self.judge_requests if is_judge else self.requests).append(request)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        out = (self.judge if is_judge else self.script)(request)
        if isinstance(out, Exception):
            raise out
        return ChatResult(json.dumps(out), out, prompt_tokens=100, completion_tokens=20, model=self.model)

    async def aclose(self) -> None:
        return None
