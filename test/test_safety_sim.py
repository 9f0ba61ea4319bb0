"""Recall and no-false-veto on the simulator: every injected hard-constraint fault is vetoed with the right
constraint and vehicles inside the truth interval (offline checker and live monitor); clean flights never are."""

import pytest

from uav_debate_eval.safety.checker import check_trajectory
from uav_debate_eval.safety.monitor import SafetyMonitor
from uav_debate_eval.sim.faults import FAULT_KINDS
from uav_debate_eval.sim.scenarios import simulate

pytestmark = pytest.mark.slow

CONSTRAINT_FAULTS = sorted(k for k, (constraint, _) in FAULT_KINDS.items() if constraint)
OTHER_FAULTS = sorted(k for k, (constraint, _) in FAULT_KINDS.items() if not constraint)
CLEAN = ["formation", "surveillance", "tracking", "grid"]


def replay(sim) -> tuple[SafetyMonitor, list]:
    """Feed the monitor tick by tick as a live node would (a silent vehicle keeps its last sample)."""
    mon = SafetyMonitor(sim.mission)
    latest: dict = {}
    states = []
    for t, batch in sim.ticks():
        for u, pos, vel, _link in batch:
            latest[u] = (t, *pos, *vel)
        states.append((t, mon.update(t, latest)))
    return mon, states


def overlaps(a0, a1, b0, b1, slack=0.0):
    return a0 <= b1 + slack and b0 <= a1 + slack


@pytest.mark.parametrize("scenario", ["formation", "grid"])
@pytest.mark.parametrize("kind", CONSTRAINT_FAULTS)
def test_every_constraint_fault_is_vetoed_with_the_right_constraint_and_vehicles(kind, scenario):
    sim = simulate(scenario, seed=1, faults=[kind])
    truth = next(f for f in sim.truth if f.kind == kind)
    assert truth.expect_constraint == FAULT_KINDS[kind][0]
    result = check_trajectory(sim.traj, sim.mission)
    hits = [v for v in result.violations if v.constraint == truth.expect_constraint
            and set(v.uavs) & set(truth.uavs) and overlaps(v.t_start, v.t_end, truth.t_start, truth.t_end)]
    assert hits, (truth, result.violations)
    assert result.vetoed and result.label == "risky"
    assert any(overlaps(a, b, truth.t_start, truth.t_end) for a, b in result.veto_intervals)
    if kind == "near_miss":
        assert hits[0].uavs == sorted(truth.uavs)

    mon, states = replay(sim)
    raised = [h for h in mon.history if h["event"] == "raised"]
    assert raised, "live monitor never vetoed"
    live = [(h["t"], ev) for h in raised for ev in h["evidence"]]
    match = [(t, ev) for t, ev in live if ev["constraint"] == truth.expect_constraint
             and set(ev["uavs"]) & set(truth.uavs)]
    assert match, live
    # the live veto is up during the truth interval (stale data: from the end of the silence budget)
    t_rise = match[0][0]
    assert truth.t_start - 1e-6 <= t_rise <= truth.t_end + 1e-6, (t_rise, truth)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("scenario", CLEAN)
def test_clean_scenarios_never_veto(scenario, seed):
    sim = simulate(scenario, seed=seed)
    result = check_trajectory(sim.traj, sim.mission)
    assert result.violations == [] and not result.vetoed and result.label != "risky"
    mon, states = replay(sim)
    assert not any(s.veto for _, s in states) and not mon.history


@pytest.mark.parametrize("kind", OTHER_FAULTS)
def test_faults_that_break_no_hard_constraint_do_not_veto(kind):
    sim = simulate("formation", seed=2, faults=[kind])
    assert all(f.expect_constraint is None for f in sim.truth)
    result = check_trajectory(sim.traj, sim.mission)
    assert result.violations == [] and not result.vetoed
