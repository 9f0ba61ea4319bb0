"""The report dict (schema report.schema.json, version 2) from an Evaluation, and the final verdict rule.

The verdict is the safety verifier's for `risky`: a debate never turns a violation into anything else
(CONTRACT.md §3). The dict holds plain JSON values only (NaN -> null, numpy -> Python).
"""

from __future__ import annotations

import math
from dataclasses import asdict, is_dataclass
from typing import Any

import numpy as np

from uav_debate_eval import REPORT_SCHEMA_VERSION, __version__
from uav_debate_eval.debate.coherence import coherence

LABELS = ("safe", "borderline", "risky", "inconclusive")


def jsonable(obj: Any) -> Any:
    """Plain JSON: numpy scalars/arrays to Python, non-finite floats to None, tuples to lists."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(float(obj)) else None
    if is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(obj.to_dict() if hasattr(obj, "to_dict") else asdict(obj))
    if obj is None or isinstance(obj, str):
        return obj
    return str(obj)


def final_verdict(safety: Any, debate: Any) -> dict:
    """The engine's verdict, with the verifier's `risky` enforced once more (it is final by contract)."""
    safety_label = safety.label
    verdict = getattr(debate, "verdict", None)
    engine_label = getattr(verdict, "label", None)
    # risky rests on a violation and inconclusive on data the verifier could not check: no panel changes either
    label = safety_label if safety_label in ("risky", "inconclusive") or engine_label not in LABELS else engine_label
    summary = getattr(verdict, "summary", "") or ""
    overridden = bool(getattr(verdict, "overridden", False))
    if engine_label in LABELS and engine_label != label:
        overridden = True
        summary = (f"Safety veto: {len(safety.violations)} hard-constraint violation(s); the panel's "
                   f"'{engine_label}' was overridden. " + summary).strip()
    return {
        "label": label,
        "vetoed": bool(safety.vetoed or safety.violations),
        "summary": summary or f"{label}: {len(safety.violations)} violation(s).",
        "recommendations": list(getattr(verdict, "recommendations", []) or []),
        "overridden": overridden,
        "safety_label": safety_label,
        "panel_label": getattr(verdict, "panel_label", None),
        "low_confidence": bool(getattr(verdict, "low_confidence", False)),
        "veto_intervals": [[float(a), float(b)] for a, b in safety.veto_intervals],
    }


def build_report(evaluation: Any, inputs: list[str] | None = None, fallback: str | None = None) -> dict:
    """Assemble the report dict; beyond the schema: tool, inputs, ingest, safety, metrics, segments, notes."""
    ev = evaluation
    traj, mission, safety, metrics, dsl, debate = ev.traj, ev.mission, ev.safety, ev.metrics, ev.dsl, ev.debate
    c = mission.constraints
    debate_dict = jsonable(debate.to_report()) if debate is not None else _empty_debate()
    if fallback:
        debate_dict["fallback"] = fallback
    dsl_dict = jsonable(dsl.to_dict())
    for key in ("text", "tokens", "raw_tokens"):
        dsl_dict.setdefault(key, getattr(dsl, key))
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "tool": {"name": "uav_debate_eval", "version": __version__},
        "inputs": list(inputs or []),
        "mission": {
            "name": mission.name,
            "type": mission.type,
            "description": mission.description,
            "source": mission.source,
            "uavs": list(traj.uav_ids),
            "duration_s": max(0.0, float(traj.duration)),
            "t0": float(traj.t0),
            "t_start": float(traj.t_start),
            "t_end": float(traj.t_end),
            "samples": traj.n_samples,
            "sample_period_s": float(traj.sample_period),
            "constraints": {
                "min_separation_m": c.min_separation_m,
                "max_speed_mps": c.max_speed_mps,
                "max_vertical_speed_mps": c.max_vertical_speed_mps,
                "geofence": None if c.geofence is None else {"min": list(c.geofence.min), "max": list(c.geofence.max),
                                                             "polygon": c.geofence.polygon},
                "stale_timeout_s": c.stale_timeout_s,
            },
            "constraints_checked": c.checked,
            **({"limit_sources": dict(mission.limit_sources)} if mission.limit_sources else {}),
        },
        "scores": {k: metrics.scores.get(k) for k in ("flight_control", "coordination", "safety", "overall")},
        "verdict": final_verdict(safety, debate),
        "events": [e.to_dict() for e in getattr(dsl, "events", [])],
        "violations": [v.to_dict() for v in safety.violations],
        "findings": [f.to_dict() for f in getattr(ev, "findings", None) or []],
        "data_quality": data_quality_of(safety),
        **({"rules": [r.to_dict() for r in safety.rules]} if getattr(safety, "rules", None) else {}),
        "safety": safety.to_dict(),
        "metrics": metrics.to_dict(),
        "segments": [{"id": s.id, "t_start": float(s.t_start), "t_end": float(s.t_end), "label": s.label,
                      "findings": [f.to_dict() for f in _segment_findings(ev, s.id)]} for s in ev.segments],
        "dsl": dsl_dict,
        "debate": debate_dict,
        "ingest": traj.ingest.to_dict(),
        "notes": list(ev.notes),
    }
    findings = getattr(ev, "findings", None)
    if findings:
        report["verdict"].update(_verdict_words(report, debate, findings))
    report = jsonable(report)
    report["debate"]["coherence"] = coherence(report)
    return report


def _verdict_words(report: dict, debate: Any, findings: list) -> dict:
    """Verdict summary and recommendations composed from the verified findings and the panel's choices; the
    judge's text is added only where it passed the quality gate (the engine gates it)."""
    from uav_debate_eval.findings.panel import recommendations
    from uav_debate_eval.findings.words import verdict_sentence

    summary = verdict_sentence({**report, "findings": [f.to_dict() for f in findings]})
    verdict = report["verdict"]
    if verdict.get("overridden") and verdict.get("panel_label"):
        why = "by the safety veto" if verdict.get("vetoed") else f"as the safety verifier found it {verdict['label']}"
        summary += f" The panel's '{verdict['panel_label']}' was overridden {why}."
    flight_id = {f.key: f.id for f in findings}
    for seg in getattr(debate, "segments", []) or []:
        judge = getattr(seg, "judge", None)
        # the flight's ids of the segment's findings (a segment numbers its own F1..)
        ids = {f.id: flight_id[f.key] for f in getattr(seg, "findings", []) or [] if f.key in flight_id}
        summary += _label_differs(seg, ids)
        if judge is not None and judge.by == "llm" and judge.findings:  # it chose: name its choice, not repeat it
            rests = [ids[i] for i in judge.findings if i in ids]
            summary += (f" Judge on {seg.segment_id}: {judge.label}"
                        + (f", resting on {', '.join(rests)}." if rests else ".")
                        + (f" {judge.note}" if judge.note else ""))
        elif judge is not None and judge.by == "llm" and judge.summary:
            summary += f" Judge on {seg.segment_id}: {judge.summary}"
    judged = [r for seg in getattr(debate, "segments", []) or [] for r in
              (seg.judge.recommendations if getattr(seg, "judge", None) is not None and seg.judge.by == "llm" else [])]
    return {"summary": summary, "recommendations": list(dict.fromkeys([*recommendations(findings), *judged]))[:6]}


def _label_differs(seg: Any, ids: dict[str, str]) -> str:
    """One sentence when a segment's panel label differs from the verifier's, naming the fact that decides it."""
    adm = getattr(seg, "admissible", None)
    panel = getattr(seg, "panel_label", None)
    if adm is None or panel is None or panel == adm.verifier_label:
        return ""
    by_id = {f.id: f for f in getattr(seg, "findings", []) or []}
    fact = by_id.get(adm.deciding)
    why = (f"on {ids.get(fact.id, fact.id)}: {fact.sentence.rstrip('.')}" if fact is not None
           else "there: no hard limit was crossed or came within its margin")
    return f" On {seg.segment_id} the panel said {panel}; the verifier's {adm.verifier_label} stands {why}."


def _segment_findings(ev: Any, segment_id: str) -> list:
    """The findings the panel saw for one segment (its context's list)."""
    for seg in getattr(getattr(ev, "debate", None), "segments", []) or []:
        if getattr(seg, "segment_id", None) == segment_id:
            return list(getattr(seg, "findings", []) or [])
    return []


def data_quality_of(safety: Any) -> dict:
    """The report's `data_quality` block (CONTRACT.md §3b) from the verifier's result."""
    dq = getattr(safety, "data_quality", None)
    if dq is None:
        return {"status": "good", "findings": [], "not_evaluable": []}
    return dq.to_dict()


def _empty_debate() -> dict:
    return {"backend": "none", "model": None, "layer": 1, "rounds": [], "consensus": {"overall": 0.0},
            "tokens": {"prompt": 0, "completion": 0}, "recommendations": []}
