"""The mission's token budget holds by construction and goes to the hazards first (issue 36)."""

from __future__ import annotations

import jsonschema
from debate_fakes import make_context
from test_debate_engine import SCHEMA

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.debate import agenda
from uav_debate_eval.debate.config import DebateConfig
from uav_debate_eval.debate.engine import run_debate
from uav_debate_eval.findings.model import VerifiedFinding

SEVERITIES = ["hazard"] * 6 + ["warning"] * 14 + ["data_quality"] * 8 + ["info"] * 12
KINDS = {"hazard": ["violation:max_speed", "violation:min_separation"], "warning": ["proximity", "sharp_turn"],
         "data_quality": ["data_quality:gap"], "info": ["low_score"]}


def _finding(n: int, severity: str, t0: float) -> VerifiedFinding:
    kind = KINDS[severity][n % len(KINDS[severity])]
    uav = f"uav{n % 7 + 1}"
    t = t0 + (n % 13) * 2.0
    return VerifiedFinding(kind, severity, f"{uav} {kind.replace('_', ' ')} at {t:g} s, value {n + 1} m.", t, t + 1.0,
                           [uav], [], [f"Recommend checking {uav} for {kind} at {t:g} s."], f"{kind}:{uav}:{t:g}")


def _flight_with_40_findings() -> list:
    contexts = []
    for s in range(3):
        ctx = make_context(f"MSEG[{s + 1}]", 30.0 * s, 30.0 * (s + 1), n_events=4, violation=True)
        ctx.findings = [_finding(n, sev, ctx.t_start) for n, sev in enumerate(SEVERITIES) if n % 3 == s]
        for i, f in enumerate(ctx.findings):
            f.id = f"F{i + 1}"
        contexts.append(ctx)
    assert sum(len(c.findings) for c in contexts) == 40
    return contexts


def test_forty_findings_stay_within_the_budget_with_every_hazard_debated():
    contexts = _flight_with_40_findings()
    res = run_debate(contexts, Mission(), DebateConfig())
    report = res.to_report()
    jsonschema.validate(report, SCHEMA["properties"]["debate"])
    tokens = report["tokens"]
    spent = tokens["prompt"] + tokens["completion"]
    assert tokens["budget"] == 4096 and tokens["spent"] == spent <= 4096 and tokens["left"] == 4096 - spent
    found = [f for s in report["segments"] for f in s["findings"]]
    hazards = [f for f in found if f["severity"] == "hazard"]
    assert len(hazards) == 6 and all(f["debated"] for f in hazards)
    # the budget could not pay for all 40: the rest is in the report, marked, with the reason
    left = [f for f in found if not f["debated"]]
    assert left and tokens["left_out"]["count"] == len(left) and all(f["not_debated"] for f in left)
    assert {f"{s['id']}/{f['id']}" for s in report["segments"] for f in s["findings"] if not f["debated"]} \
        == set(tokens["left_out"]["ids"])
    # priority: nothing of a lower tier was debated while a higher tier of the same segment was left out
    for seg, ctx in zip(report["segments"], contexts, strict=True):
        tiers = agenda.tiers([c.findings for c in contexts])[contexts.index(ctx)]
        debated = [tiers[f["id"]] for f in seg["findings"] if f["debated"] and "debated_in" not in f]
        skipped = [tiers[f["id"]] for f in seg["findings"] if not f["debated"]]
        assert not debated or not skipped or max(debated) <= min(skipped) or min(skipped) >= 2


def test_a_larger_budget_debates_more_and_still_holds():
    contexts = _flight_with_40_findings()
    small, large = (run_debate(contexts, Mission(), DebateConfig(token_budget=b)).to_report()["tokens"]
                    for b in (4096, 12000))
    assert small["spent"] <= 4096 and large["spent"] <= 12000
    assert large["left_out"]["count"] < small["left_out"]["count"]


def test_grouped_findings_cost_one_line_and_a_choice_covers_the_group():
    fs = [_finding(n, "hazard", 0.0) for n in (0, 14, 28)]  # one kind, one vehicle: a group
    for i, f in enumerate(fs):
        f.id = f"F{i + 1}"
    groups = agenda.group(fs)
    assert groups == {"F1": ["F1", "F2", "F3"]}
    chosen = agenda.expand([{"id": "F2", "stance": "endorse", "reason": "safety_critical"}], groups)
    assert [c["id"] for c in chosen] == ["F1", "F2", "F3"] and all(c["stance"] == "endorse" for c in chosen)
