"""The offline rule check: each operator on hand-worked traces, each quantifier on built flights, the pair pruning
against the full pair set, and data-quality exclusions (not evaluable, never violated)."""

import numpy as np
import pytest

from uav_debate_eval.core.mission import Constraints, Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.rules import check as check_module
from uav_debate_eval.rules.check import check_rules
from uav_debate_eval.rules.evaluator import Evaluator
from uav_debate_eval.safety.checker import check_trajectory
from uav_debate_eval.stl.spec import make_rule
from uav_debate_eval.stl.syntax import parse_formula

X = np.array([3.0, 1.0, -2.0, 4.0, 0.5, -1.0])
Y = np.array([0.0, 2.0, 1.0, -1.0, 3.0, 0.0])


def rob(text: str, x=X, y=Y, dt: float = 1.0) -> list[float]:
    sig = {"x": x[:, None], "y": y[:, None]}
    return Evaluator(lambda n: (sig[n], None), (len(x), 1), dt).rob(parse_formula(text))[:, 0].tolist()


inf = float("inf")


@pytest.mark.parametrize("text,expected", [
    ("x >= 1", [2, 0, -3, 3, -0.5, -2]),
    ("x < 1", [-2, 0, 3, -3, 0.5, 2]),
    ("2 * abs(x) - y > 1", [5, -1, 2, 8, -3, 1]),
    ("not x >= 1", [-2, 0, 3, -3, 0.5, 2]),
    ("x >= 0 and y >= 0", [0, 1, -2, -1, 0.5, -1]),
    ("x >= 0 or y >= 0", [3, 2, 1, 4, 3, 0]),
    ("x >= 0 -> y >= 1", [-1, 1, 2, -2, 2, 1]),
    ("always[1, 2] x >= 0", [-2, -2, 0.5, -1, -1, inf]),
    ("eventually[0, 2] x >= 0", [3, 4, 4, 4, 0.5, -1]),
    ("historically[0, 1] x >= 0", [3, 1, -2, -2, 0.5, -1]),
    ("once[1, 3] x >= 0", [-inf, 3, 3, 3, 4, 4]),
    ("always x >= -1.5", [-0.5, -0.5, -0.5, 0.5, 0.5, 0.5]),
    ("eventually x >= 0", [4, 4, 4, 4, 0.5, -1]),
    ("historically x >= 0", [3, 1, -2, -2, -2, -2]),
    ("once x >= 0", [3, 3, 3, 4, 4, 4]),
    # p until[1,2] q at i: max over d in {1,2} of min(q(i+d), p over i..i+d-1)
    ("x >= 0 until[1, 2] y >= 0", [2, 1, -2, 3, 0, -inf]),
    ("x >= 0 until y >= 0", [2, 2, 1, 3, 3, 0]),
    # p since[0,1] q at i: max(q(i), min(q(i-1), p(i)))
    ("x >= 0 since[0, 1] y >= 0", [0, 2, 1, 1, 3, 0]),
    ("x >= 0 since y >= 0", [0, 2, 1, 1, 3, 0]),
])
def test_each_operator_hand_worked(text, expected):
    assert rob(text) == pytest.approx(expected)


def test_bounds_are_seconds_on_the_grid():
    x = np.arange(10.0)
    # dt 0.5 s: [1, 2] s is steps 2..4; [0.3, 0.7] s holds step 1 only
    assert rob("always[1, 2] x >= 0", x, x, 0.5)[:3] == [2, 3, 4]
    assert rob("eventually[0.3, 0.7] x >= 0", x, x, 0.5)[:3] == [1, 2, 3]


def flight(pos_of, n: int, steps: int = 101, dt: float = 0.1, est_valid=None) -> SwarmTrajectory:
    """n vehicles; pos_of(t (steps,), k) -> (steps, 3)."""
    t = np.arange(steps) * dt
    ts, ids, pos, valid = [], [], [], []
    for k in range(n):
        ts.append(t)
        ids += [f"u{k}"] * steps
        pos.append(pos_of(t, k))
        valid.append(np.ones(steps, bool) if est_valid is None else est_valid(t, k))
    return SwarmTrajectory.from_columns(np.concatenate(ts), ids, np.concatenate(pos), est_valid=np.concatenate(valid))


def mission(*rules, **constraints) -> Mission:
    return Mission(constraints=Constraints(**constraints), rules=[make_rule(*r) for r in rules])


def test_each_vehicle_minimum_worst_and_intervals():
    # u1 dips below 1 m between 4 and 6 s; u0 stays at 2 m
    def pos(t, k):
        z = np.where((k == 1) & (t >= 4.0 - 1e-9) & (t <= 6.0 + 1e-9), 0.5, 2.0)
        return np.column_stack([np.full_like(t, 3.0 * k), np.zeros_like(t), z])

    [res] = check_rules(flight(pos, 2), mission(("alt", "hard", "each_vehicle", "always[1, 8] (z >= 1)")))
    assert res.satisfied is False and res.robustness == pytest.approx(-0.5)
    assert res.worst == ["u1"] and res.intervals == [(pytest.approx(4.0), pytest.approx(6.0))]
    [res] = check_rules(flight(pos, 2), mission(("alt", "hard", "each_vehicle", "always[6.5, 10] (z >= 1)")))
    assert res.satisfied is True and res.robustness == pytest.approx(1.0) and res.intervals == []


def test_each_pair_and_swarm_signals():
    # u0 and u1 approach each other along x at 1 m/s each, from 10 m apart; u2 far away
    def pos(t, k):
        x = {0: 1.0 * t, 1: 10.0 - 1.0 * t, 2: 100.0 + 0 * t}[k]
        return np.column_stack([x, np.zeros_like(t), np.full_like(t, 2.0)])

    m = mission(("gap", "soft", "each_pair", "always (separation >= 0.5)"),
                ("closing", "soft", "each_pair", "always (closing_speed <= 1.5)"),
                ("alt", "soft", "each_pair", "always (a.z - b.z <= 0.1)"),
                ("spread", "soft", "swarm", "always[0, 1] (spread <= 100)"),
                ("count", "soft", "swarm", "always (n_vehicles >= 3)"))
    gap, closing, alt, spread, count = check_rules(flight(pos, 3), m)
    assert gap.robustness == pytest.approx(-0.5)  # they meet at t = 5 s
    assert gap.worst == ["u0", "u1"]
    assert closing.robustness == pytest.approx(-0.5) and closing.worst == ["u0", "u1"]
    assert alt.satisfied is True and alt.robustness == pytest.approx(0.1)
    centroid_x0 = (0.0 + 10.0 + 100.0) / 3  # spread at t = 0: u2's distance from the centroid
    assert spread.robustness == pytest.approx(100.0 - (100.0 - centroid_x0), abs=1e-6)
    assert count.robustness == pytest.approx(0.0) and count.satisfied is True


@pytest.mark.parametrize("by_tree", [False, True])
def test_pair_pruning_equals_the_full_pair_set(monkeypatch, by_tree):
    from uav_debate_eval.rules import near_pairs

    if by_tree:  # the pairs listed radius by radius through k-d trees (a large swarm's way), here on 40 vehicles
        monkeypatch.setattr(near_pairs, "TREE_MIN_VEHICLES", 2)
    rng = np.random.default_rng(3)
    n = 40
    start = rng.uniform(-30, 30, size=(n, 3))
    heading = rng.normal(size=(n, 3))

    def pos(t, k):
        return start[k] + np.outer(t, heading[k]) + 0.3 * np.sin(np.outer(t, [1.0, 0.7, 1.3]) + k)

    traj = flight(pos, n, steps=201)
    rules = [("guarded", "soft", "each_pair", "always ((separation < 3.0) -> (abs(a.vz - b.vz) <= 0.5))"),
             ("apart", "hard", "each_pair", "always[2, 15] (separation >= 1.0 or closing_speed <= 0)"),
             ("eventually", "soft", "each_pair", "eventually[0, 5] (separation > 2)"),
             ("strict", "soft", "each_pair", "always ((separation < 2.0) -> (a.z >= 0)) and always (separation > 0.1)")]
    m = mission(*rules)
    pruned = check_rules(traj, m)
    monkeypatch.setattr(check_module, "_stop", lambda formula, body, stripped, closest, order, start, found: len(order))
    full = check_rules(traj, m)
    for p, f in zip(pruned, full, strict=True):
        assert f.evaluated == f.columns == n * (n - 1) // 2
        assert p.robustness == pytest.approx(f.robustness, abs=1e-12) and p.satisfied == f.satisfied
        assert p.worst == f.worst and p.intervals == f.intervals
        assert sorted(map(str, p.failures)) == sorted(map(str, f.failures))
    assert pruned[0].evaluated < pruned[0].columns // 4  # the guarded rule reads only the pairs that came close
    assert pruned[1].evaluated < pruned[1].columns // 4


def test_pairs_within_a_radius_are_the_full_lists_prefix(monkeypatch):
    from uav_debate_eval.rules import near_pairs

    rng = np.random.default_rng(5)
    pos = np.cumsum(rng.normal(scale=0.3, size=(50, 60, 3)), axis=0) + rng.uniform(-40, 40, size=(1, 60, 3))
    readable = np.ones(60, bool)
    readable[[7, 31]] = False
    full = near_pairs.PairQueue(pos, readable).within(inf)
    monkeypatch.setattr(near_pairs, "TREE_MIN_VEHICLES", 2)
    queue = near_pairs.PairQueue(pos, readable)
    assert queue.by_tree
    for radius in (0.5, 4.0, 16.0, inf):
        got = queue.within(radius)
        n = int((full[2] < radius).sum())
        assert 2 * 59 - 1 <= n <= len(full[0])  # the unreadable vehicles' pairs always, then the near ones
        for a, b in zip(got, full, strict=True):
            assert np.array_equal(a, b[:n])


def test_data_quality_exclusion_is_not_evaluable_never_violated():
    # u1 drops to 0.2 m while its estimator flags the position invalid (3-5 s) and again, really, at 8 s
    def pos(t, k):
        bad = (k == 1) & (((t >= 3 - 1e-9) & (t <= 5 + 1e-9)) | ((t >= 8 - 1e-9) & (t <= 8.5 + 1e-9)))
        return np.column_stack([np.full_like(t, 3.0 * k), np.zeros_like(t), np.where(bad, 0.2, 2.0)])

    def valid(t, k):
        return ~((k == 1) & (t >= 3 - 1e-9) & (t <= 5 + 1e-9))

    traj = flight(pos, 2, est_valid=valid)
    m = mission(("alt", "hard", "each_vehicle", "always[1, 7] (z >= 1)"),
                ("alt_all", "hard", "each_vehicle", "always (z >= 1)"),
                geofence=None, min_separation_m=0.5)
    res = check_trajectory(traj, m)
    alt, alt_all = res.rules
    assert alt.satisfied is None and alt.robustness is None and alt.intervals == []
    assert alt.unknown and alt.unknown[0][0] == ["u1"] and alt.unknown[0][1] == pytest.approx(3.0)
    assert alt_all.satisfied is False and alt_all.intervals == [(pytest.approx(8.0), pytest.approx(8.5))]
    rule_violations = [v for v in res.violations if v.constraint.startswith("rule:")]
    assert [(v.constraint, v.uavs, v.t_start) for v in rule_violations] == [("rule:alt_all", ["u1"], 8.0)]
    assert res.label == "risky"
    ne = [n for n in res.data_quality.not_evaluable if n.constraint == "rule:alt"]
    assert ne and ne[0].uavs == ["u1"] and ne[0].t_start == pytest.approx(3.0)
    # the hard rule alone, undecided by the data: no violation, and the verdict says it could not be checked
    only = check_trajectory(traj, mission(("alt", "hard", "each_vehicle", "always[1, 7] (z >= 1)"),
                                          min_separation_m=0.5))
    assert only.violations == [] and only.label == "inconclusive"
    soft = check_trajectory(traj, mission(("alt", "soft", "each_vehicle", "always[1, 7] (z >= 1)"),
                                          min_separation_m=0.5))
    assert soft.label != "inconclusive"


def test_a_window_whose_streams_end_a_sample_apart_is_evaluable_but_a_silence_is_not():
    """A live segment's window: u0's last pose (t=10.0) arrived before the others' did; the grid's last step is
    within one period of their last samples and reads their edge value. A vehicle silent for 2 s stays unknown."""
    t = np.round(np.arange(0.0, 10.0 + 1e-9, 0.1), 9)
    m = mission(("alt", "soft", "each_vehicle", "always (z >= 1)"), geofence=None, min_separation_m=0.5)

    def traj(last: dict[int, float]) -> SwarmTrajectory:
        keep = [t[t <= last.get(k, 10.0) + 1e-9] for k in range(3)]
        return SwarmTrajectory.from_columns(np.concatenate(keep), [f"u{k}" for k, tk in enumerate(keep) for _ in tk],
                                            np.concatenate([np.column_stack([tk * 0 + 3.0 * k, tk * 0, tk * 0 + 5.0])
                                                            for k, tk in enumerate(keep)]))

    res = check_trajectory(traj({1: 9.9, 2: 9.9}), m)
    assert res.rules[0].satisfied is True and res.rules[0].robustness == pytest.approx(4.0)
    assert not [n for n in res.data_quality.not_evaluable if n.constraint == "rule:alt"]
    silent = check_trajectory(traj({1: 8.0}), m).rules[0]
    assert silent.satisfied is None and silent.unknown[0][0] == ["u1"]
