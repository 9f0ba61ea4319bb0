"""Topology control (dual threshold, pruned agents, visibility, the shipped policy) and the sparse router."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from debate_fakes import ScriptedBackend, answer, make_context

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.debate.engine import DebateConfig, run_debate
from uav_debate_eval.debate.topology import POLICY_FILE, Controller, Policy, dual_threshold, obs_size

T = (0.25, 0.55)
ROOT = Path(__file__).parents[1]


def _cfg(**kw) -> DebateConfig:
    """Every agent, several rounds: the complexity router on a hand-made vetoed segment (L3 with T)."""
    return DebateConfig(router="complexity", router_thresholds=T, score_gap_eps=0.0, early_stop_similarity=1.1,
                        token_budget=10**6, **kw)  # the topology, not the mission's budget


def test_dual_threshold_activation_and_visibility():
    w = np.array([[0.9, 0.2, 0.4],   # agent 0: mean incoming 0.3 < self 0.9 -> sits out
                  [0.8, 0.1, 0.3],   # agent 1: mean incoming 0.55 >= 0.1 -> active, sees agent 0 only
                  [0.5, 0.75, 0.625]])  # agent 2: mean incoming 0.625 == self 0.625 -> active, sees 0 and 1
    plan = dual_threshold(w, theta_v=0.4)
    assert plan.active == [False, True, True]
    assert plan.visible == [[], [0], [0, 1]]
    assert dual_threshold(w, theta_v=0.5).visible[2] == [1]  # strictly above theta_v
    assert dual_threshold(np.ones((1, 1)), 0.5).active == [True]


def test_full_and_sparse_topologies():
    full = Controller("full", 3).plan(np.zeros(obs_size(3)))
    assert full.active == [True] * 3 and full.visible == [[1, 2], [0, 2], [0, 1]]
    ring = Controller("sparse", 3).plan(np.zeros(obs_size(3)))
    assert ring.active == [True] * 3 and ring.visible == [[2], [0], [1]]
    assert Controller("sparse", 3).plan(None).visible == full.visible  # the first round: everyone, everything
    with pytest.raises(InputError, match="debate.topology"):
        DebateConfig(topology="ring")


def test_pruned_agent_keeps_its_previous_answer_and_spends_nothing():
    ctx = make_context(n_events=8, violation=True)
    base = run_debate([ctx], Mission(), _cfg())
    # agent 3 (index 2) sits out every round after the first: a high self-weight, low incoming weights
    w = np.full((3, 3), 0.8)
    w[2] = [0.1, 0.1, 0.9]
    res = run_debate([ctx], Mission(), _cfg(topology="learned"), decide=lambda obs: w)
    seg, ref = res.segments[0], base.segments[0]
    assert len(seg.rounds) == len(ref.rounds) >= 3
    first = seg.rounds[0].responses[2]
    for rd in seg.rounds[1:]:
        kept = [x for x in rd.responses if x.agent == "agent3"]
        assert len(kept) == 1 and kept[0].reused and kept[0].response is first.response
        assert rd.plan.active == [True, True, False]
    calls = [t for t in res.transcript if t["kind"] == "agent" and t["agent"] == "agent3"]
    assert [t["segment_round"] for t in calls] == [0]
    assert sum(res.tokens().values()) < sum(base.tokens().values())
    assert res.to_report()["rounds"][1]["responses"][2]["reused"] is True


def test_an_agent_sees_only_neighbours_above_theta_v():
    w = np.array([[0.2, 0.9, 0.1], [0.9, 0.2, 0.9], [0.9, 0.2, 0.2]])  # low self-weights: everyone active
    backend = ScriptedBackend(lambda req: answer(label="risky"))
    run_debate([make_context(n_events=8, violation=True)], Mission(), _cfg(topology="learned", judge="vote"),
               backend=backend, decide=lambda obs: w)
    second = {r.agent: r.messages[1]["content"] for r in backend.requests if r.round == 1}
    roles = ("flight_control", "coordination", "safety")

    def seen(text: str) -> set[str]:
        block = text.split("PREVIOUS ROUND:\n", 1)[1].split("\n\n", 1)[0]
        return {role for role in roles if f"- {role} (" in block}

    # round 0 roles: agent1 flight_control, agent2 coordination, agent3 safety; each also sees its own answer
    assert seen(second["agent1"]) == {"flight_control", "coordination"}
    assert seen(second["agent2"]) == set(roles)
    assert seen(second["agent3"]) == {"flight_control", "safety"}


def test_veto_overrides_every_topology_and_router():
    ctx = make_context(n_events=8, violation=True)
    prune_all = np.eye(3)  # nobody listens to anybody: everyone sits out after the first round
    for cfg in (_cfg(topology="learned"), DebateConfig(topology="learned"), DebateConfig(topology="sparse"),
                DebateConfig(router="sparse", agree_confidence=0.0)):
        backend = ScriptedBackend(lambda req: answer(label="safe", confidence=0.95))
        res = run_debate([ctx], Mission(), cfg, backend=backend, decide=lambda obs: prune_all)
        v = res.verdict
        assert (v.label, v.panel_label, v.overridden, v.vetoed) == ("risky", "safe", True, True)
    assert res.segments[0].route.layer <= 2 and res.segments[0].route.reason == "veto"


def test_all_pruned_ends_the_segment():
    res = run_debate([make_context(n_events=8, violation=True)], Mission(), _cfg(topology="learned"),
                     decide=lambda obs: np.eye(3))
    seg = res.segments[0]
    assert (len(seg.rounds), seg.stop_reason) == (1, "all_pruned")


def test_shipped_policy_loads_and_runs_without_the_training_extra():
    code = (
        "import sys\n"
        "for m in ('torch', 'stable_baselines3', 'gymnasium'):\n"
        "    sys.modules[m] = None  # importing any of them now fails\n"
        "sys.path.insert(0, 'test')\n"
        "from debate_fakes import make_context\n"
        "from uav_debate_eval.core.mission import Mission\n"
        "from uav_debate_eval.debate.engine import DebateConfig, run_debate\n"
        "cfg = DebateConfig(router='complexity', router_thresholds=(0.25, 0.55), topology='learned')\n"
        "res = run_debate([make_context(n_events=8, violation=True)], Mission(), cfg)\n"
        "plans = [r.plan.to_dict() for r in res.rounds if r.plan]\n"
        "print(len(res.rounds), res.verdict.label, len(plans))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rounds, label, plans = out.stdout.split()
    assert label == "risky" and int(rounds) >= 1 and int(plans) == int(rounds) - 1
    policy = Policy.load(POLICY_FILE)
    assert policy.n_agents == 3 and 0.0 < policy.theta_v < 1.0
    w = policy.weights(np.full(obs_size(3), 0.5, np.float32))
    assert w.shape == (3, 3) and ((w >= 0.0) & (w <= 1.0)).all()


def test_learned_topology_needs_a_panel_of_the_policy_size(tmp_path):
    personas = [{"id": "extra", "name": "Extra Expert", "category": "safety", "bias": "zero_trust",
                 "description": "An extra safety expert.", "keywords": ["safety"]}]
    with pytest.raises(InputError, match="trained for 3 agents"):
        run_debate([make_context(n_events=8, violation=True)], Mission(), _cfg(topology="learned", personas=personas))


def test_numpy_policy_matches_the_trained_actor(tmp_path):
    gym = pytest.importorskip("gymnasium")
    sb3 = pytest.importorskip("stable_baselines3")
    from uav_debate_eval.debate.topology_train import export

    model = sb3.PPO("MlpPolicy", gym.make("Pendulum-v1"), seed=3, policy_kwargs={"net_arch": {"pi": [8, 8]}})
    export(model, tmp_path / "p.npz", 1, 0.5)
    policy = Policy.load(tmp_path / "p.npz")
    for obs in np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32):
        action, _ = model.predict(obs, deterministic=True)  # the actor's mean, clipped to Pendulum's [-2, 2]
        expected = (np.clip(action[0], -1.0, 1.0) + 1.0) / 2.0  # the topology's action space is [-1, 1]
        assert policy.weights(obs)[0, 0] == pytest.approx(float(expected), abs=1e-5)


def test_sparse_router_settles_quiet_segments_with_one_agent_and_the_rules_verdict():
    res = run_debate([make_context()], Mission(), DebateConfig(router="sparse"))
    seg = res.segments[0]
    assert (seg.route.layer, seg.route.agents, seg.route.reason) == (1, 1, "settled")
    assert [len(rd.responses) for rd in seg.rounds] == [1]
    assert (seg.panel_label, seg.decided_by) == ("safe", "rules_verdict")
    calls = [t for t in res.transcript if t["kind"] == "agent"]
    assert len(calls) == 1 and set(calls[0]["prompt_parts"]) >= {"role", "header", "findings", "aspects", "previous"}
    three = run_debate([make_context()], Mission(), DebateConfig(router="sparse", settled_agents=3)).segments[0]
    assert [len(rd.responses) for rd in three.rounds] == [3] and three.decided_by == "rules_verdict"


def test_sparse_router_stops_on_agreement_and_deepens_only_when_contested():
    ctx = make_context(n_events=8, violation=True)
    agree = run_debate([ctx], Mission(), DebateConfig(router="sparse", router_thresholds=T))
    seg = agree.segments[0]
    assert seg.route.layer == 2 and (len(seg.rounds), seg.stop_reason) == (1, "agreement")
    split = make_context(n_events=6, borderline=True, fc=0.9)
    labels = iter(["safe", "risky", "borderline"] * 10)
    backend = ScriptedBackend(lambda req: answer(label=next(labels)))
    cfg = DebateConfig(router="sparse", router_thresholds=T, score_gap_eps=0.0, early_stop_similarity=1.1,
                       judge="vote")
    res = run_debate([split], Mission(), cfg, backend=backend)
    seg = res.segments[0]
    assert (seg.route.layer, seg.route.reason) == (3, "contested")
    assert len(seg.rounds) == cfg.max_rounds[3]


def test_token_parts_in_the_transcript_and_report():
    res = run_debate([make_context(n_events=8, violation=True)], Mission(), _cfg())
    calls = [t for t in res.transcript if t["kind"] == "agent"]
    assert all(t["prompt_parts"]["header"] > 0 and t["prompt_parts"]["role"] > 0 for t in calls)
    assert all(t["prompt_parts"]["previous"] == 0 for t in calls if t["segment_round"] == 0)
    assert all(t["prompt_parts"]["previous"] > 0 for t in calls if t["segment_round"] > 0)
    by_part = res.to_report()["tokens"]["by_part"]
    assert by_part["findings"] == sum(t["prompt_parts"]["findings"] for t in calls) > 0
    # the shared prefix is sent by every agent of a round: all but one copy per round is reusable from a cache
    assert len({t["messages"][0]["content"] for t in calls}) == 1  # one prefix for every agent and every round
    prefix = calls[0]["prompt_parts"]["shared"]
    assert prefix > 0 and by_part["cache_reusable"] == sum(
        (len([t for t in calls if t["round"] == r]) - 1) * prefix for r in {t["round"] for t in calls})
    json.dumps(res.to_report())


def test_frontier_keeps_labels_and_hazards_for_fewer_tokens():
    from uav_debate_eval.debate.frontier import format_frontier, frontier

    rows = frontier(["formation", "formation:near_miss"], settings=(("complexity", "full", False),
                                                                     ("sparse", "full", True)))
    before, after = rows
    assert [r["per_flight"][e]["label"] for r in rows for e in ("formation", "formation:near_miss")] == \
        ["safe", "risky"] * 2
    # within the mission's 4,096 tokens the full prompts of old may not reach the hazard; the lean ones do
    assert before["chosen"] <= after["chosen"] == after["hazards"] == 1 and after["invalid"] == 0
    assert max(f["tokens"] for r in rows for f in r["per_flight"].values()) <= 4096  # the budget holds for each
    assert after["tokens_per_mission"] < before["tokens_per_mission"]
    assert after["processed_per_mission"] < after["tokens_per_mission"]
    assert "sparse" in format_frontier(rows).splitlines()[3]
