"""The shared flight pass: each segment's context (DSL and metrics) is exactly the one built from scratch, and
cached results are only reused while their inputs are the same objects."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from uav_debate_eval.dsl.builder import build_dsl
from uav_debate_eval.dsl.events import detect_events
from uav_debate_eval.dsl.segmentation import segment_vehicle
from uav_debate_eval.metrics import swarm
from uav_debate_eval.metrics.compute import compute_metrics
from uav_debate_eval.metrics.kinematics import smooth_kinematics
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.safety.checker import check_trajectory
from uav_debate_eval.sim.scenarios import simulate


def _contexts(monkeypatch, traj, mission, **kw):
    """evaluate() and the segment contexts it handed to the debate."""
    import uav_debate_eval.debate.engine as engine

    seen = []
    run = engine.run_debate

    def record(contexts, *args, **kwargs):
        seen.append(contexts)
        return run(contexts, *args, **kwargs)

    monkeypatch.setattr(engine, "run_debate", record)
    ev = evaluate(traj, mission, **kw)
    return ev, seen[0]


def assert_close(got, want, where=""):
    """Equal structure and text; numbers equal to 1e-9 (the shared pass sums in another order: last bits differ)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for k in want:
            assert_close(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), where
    else:
        assert got == want, where


def _from_scratch(pristine, mission, seg, budget):
    """A segment's context the way it was built before the shared pass: new objects, nothing cached."""
    traj = copy.deepcopy(pristine)
    safety = check_trajectory(traj, mission)
    events = detect_events(traj, mission, safety)
    metrics = compute_metrics(traj.window(seg.t_start, seg.t_end), mission, safety)
    dsl = build_dsl(traj, mission, metrics, safety, budget_tokens=budget, t_range=(seg.t_start, seg.t_end),
                    events=events)
    return dsl, metrics


@pytest.mark.parametrize("mode", ["phase", "window"])
def test_segment_contexts_equal_the_ones_built_from_scratch(monkeypatch, mode):
    sim = simulate("formation", seed=3, duration_s=60, faults=["near_miss", "sharp_turn"])
    pristine = copy.deepcopy(sim.traj)
    ev, contexts = _contexts(monkeypatch, sim.traj, sim.mission, segment_mode=mode, window_s=20.0)
    assert ev.n_violations >= 1 and len(contexts) == len(ev.segments) >= 2
    budget = contexts[0].dsl.budget_tokens
    for ctx, seg in zip(contexts, ev.segments, strict=True):
        dsl, metrics = _from_scratch(pristine, sim.mission, seg, budget)
        assert ctx.dsl.text == dsl.text
        assert (ctx.dsl.tokens, ctx.dsl.raw_tokens) == (dsl.tokens, dsl.raw_tokens)
        assert ctx.dsl.to_dict() == dsl.to_dict()  # ids, printed values, events, dropped ids
        assert_close(ctx.metrics.to_dict(), metrics.to_dict())


def test_flight_dsl_equals_the_one_built_from_scratch(monkeypatch):
    sim = simulate("swap", seed=2, duration_s=40, faults=["altitude_drop"])
    pristine, other = copy.deepcopy(sim.traj), copy.deepcopy(sim.traj)
    ev, _ = _contexts(monkeypatch, sim.traj, sim.mission)
    safety = check_trajectory(pristine, sim.mission)
    assert ev.dsl.to_dict() == build_dsl(pristine, sim.mission, compute_metrics(pristine, sim.mission, safety),
                                         safety).to_dict()
    assert_close(ev.metrics.to_dict(), compute_metrics(other, sim.mission).to_dict())


def test_snapshots_are_cached_per_trajectory_until_its_tracks_change():
    sim = simulate("formation", seed=1, duration_s=20)
    traj = sim.traj
    snap = swarm.snapshots(traj)
    assert swarm.snapshots(traj) is snap
    assert swarm.formation_error(snap, sim.mission) is swarm.formation_error(snap, sim.mission)
    other = copy.deepcopy(sim.mission)
    assert swarm.formation_error(snap, other) is not swarm.formation_error(snap, sim.mission)
    first = next(iter(traj.tracks))
    traj.tracks = {u: tr for u, tr in traj.tracks.items() if u != first}
    fresh = swarm.snapshots(traj)
    assert fresh is not snap and fresh.uav_ids == list(traj.tracks)


def test_cached_segmentation_is_not_shared_mutably():
    k = smooth_kinematics(simulate("tracking", seed=0, duration_s=30).traj.tracks["uav1"])
    segs = segment_vehicle(k)
    segs.clear()
    assert segment_vehicle(k)


def test_pair_norms_equal_the_direct_form_bit_for_bit():
    rng = np.random.default_rng(4)
    p, o = rng.normal(0, 50, (300, 7, 3)), rng.normal(0, 5, (300, 7, 3))
    partners = swarm._partners(o[0])
    direct = np.linalg.norm((p[:, :, None] - p[:, partners]) - (o[:, :, None] - o[:, partners]), axis=-1)
    np.testing.assert_array_equal(swarm._partner_norms(p, partners, o), direct)
    np.testing.assert_array_equal(swarm._partner_norms(p, partners),
                                  np.linalg.norm(p[:, :, None] - p[:, partners], axis=-1))
