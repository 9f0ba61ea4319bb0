"""The online rule monitor: each operator's stream gives, step by step, the robustness the offline evaluator (checked
against rtamt) gives, decided with a delay equal to the formula's horizon; failures name the vehicles."""

import numpy as np
import pytest
from test_rules_rtamt import random_formula

from uav_debate_eval.core.mission import Geofence
from uav_debate_eval.rules.evaluator import Evaluator
from uav_debate_eval.rules.monitor import RuleMonitor
from uav_debate_eval.rules.streams import Node, delay_steps, past_reach, undecidable
from uav_debate_eval.stl.spec import make_rule
from uav_debate_eval.stl.syntax import parse_formula


def online(formula, trace: dict[str, np.ndarray]) -> tuple[np.ndarray, int]:
    """(values of the steps decided, the delay in steps) of the streaming tree fed one step at a time."""
    T, K = trace["x"].shape
    root = Node(formula, 1.0, delay_steps(formula, 1.0) + past_reach(formula, 1.0) + 2, K)  # the live ring size
    atoms = root.atoms()
    decided = []
    for i in range(T):
        step = {k: v[i:i + 1] for k, v in trace.items()}
        ev = Evaluator(lambda name, step=step: (step[name], None), (1, K), 1.0)
        before = root.out.done
        root.advance({id(a): ev.rob(a.f)[0] for a in atoms})
        decided += [root.out.get(j, j, 0.0)[0].copy() for j in range(before, root.out.done)]
    return np.array(decided).reshape(-1, K), root.delay


def test_streams_equal_the_offline_robustness_at_every_decided_step():
    rng = np.random.default_rng(7)
    tried = 0
    while tried < 200:
        formula = random_formula(rng, int(rng.integers(1, 4)))
        if undecidable(formula):
            continue
        tried += 1
        T, K = int(rng.integers(2, 30)), 3
        trace = {n: np.round(rng.normal(0, 2, size=(T, K)), 3) for n in ("x", "y", "z")}
        offline = Evaluator(lambda name, trace=trace: (trace[name], None), (T, K), 1.0).rob(formula)
        values, delay = online(formula, trace)
        assert delay == delay_steps(formula, 1.0)
        # a step is decided at most `delay` steps after it (sooner when a window reaches only before the start)
        assert max(0, T - delay) <= len(values) <= T
        np.testing.assert_allclose(values, offline[:len(values)], rtol=0, atol=1e-12)


@pytest.mark.parametrize("stl,delay", [("x >= 0", 0), ("historically[0, 3] x >= 0", 0), ("x >= 0 since y >= 0", 0),
                                       ("eventually[1, 4] x >= 0", 4), ("x >= 0 until[0, 2] y >= 0", 2),
                                       ("always[0, 2] (once[0, 5] x >= 0)", 2)])
def test_delay_equals_the_horizon(stl, delay):
    assert Node(parse_formula(stl), 1.0, 10, 1).delay == delay


def flight_step(k: int, dip: bool):
    pos = np.array([[0.0, 0.0, 2.0], [5.0, 0.0, 0.3 if dip else 2.0]])
    return ["u1", "u2"], pos, np.zeros((2, 3)), np.ones(2, bool)


def test_monitor_decides_failures_with_the_stated_delay():
    rules = [make_rule("alt", "hard", "each_vehicle", "always (z >= 1.0)"),
             make_rule("recover", "soft", "each_vehicle", "always ((z < 1.0) -> eventually[0, 0.2] (z >= 1.0))"),
             make_rule("later", "soft", "each_vehicle", "eventually (z >= 5)")]
    mon = RuleMonitor(rules, period_s=0.05, geofence=Geofence((-10, -10, 0), (10, 10, 10)))
    seen = {}
    for k in range(40):
        t = 0.05 * k
        for f in mon.update(t, *flight_step(k, 10 <= k < 20)):
            seen.setdefault(f.rule.id, []).append((round(t, 3), round(f.t, 3), f.uavs, f.value))
    alt, recover = seen["alt"], seen["recover"]
    assert alt[0][:3] == (0.5, 0.5, ["u2"]) and alt[0][3] == pytest.approx(-0.7)  # past-only: decided at once
    assert len(alt) == 10
    # z stayed low for 0.5 s: each step of the dip whose 0.2 s future is still low fails, decided 0.2 s later
    assert recover[0][:3] == (0.7, 0.5, ["u2"]) and len(recover) == 6
    status = {row["rule"]: row for row in mon.status()}
    assert status["recover"]["delay_s"] == pytest.approx(0.2) and status["alt"]["delay_s"] == 0.0
    assert status["later"]["live"] is False and "offline" in status["later"]["why"]
    assert "later" not in seen


def test_pairs_and_swarm_online():
    rules = [make_rule("apart", "hard", "each_pair", "always (separation >= 1.0)"),
             make_rule("spread", "soft", "swarm", "always (spread <= 3.0)")]
    mon = RuleMonitor(rules, period_s=0.1)
    ids = ["a", "b", "c"]
    pos = np.array([[0.0, 0, 2], [0.5, 0, 2], [10.0, 0, 2]])
    fails = mon.update(0.0, ids, pos, np.zeros((3, 3)), np.ones(3, bool))
    by = {f.rule.id: f for f in fails}
    assert by["apart"].uavs == ["a", "b"] and by["apart"].value == pytest.approx(-0.5) and by["apart"].count == 1
    assert by["spread"].uavs == [] and by["spread"].value < 0
    # c goes stale: its signals are unknown, nothing fails on them
    fails = mon.update(0.1, ids, np.array([[0.0, 0, 2], [5.0, 0, 2], [10.0, 0, 2]]), np.zeros((3, 3)),
                       np.array([True, True, False]))
    assert fails == []


def test_live_veto_on_a_rule_in_a_built_in_scenario():
    """The swap scenario's hard rule (close vehicles a layer apart) breaks in its near miss: the live monitor raises
    the veto with the reason rule:layered_crossing inside the fault, and the status names it."""
    from uav_debate_eval.safety.monitor import SafetyMonitor
    from uav_debate_eval.safety.status import ERROR, status_rows
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("swap", seed=1, faults=["near_miss"])
    truth = next(f for f in sim.truth if f.kind == "near_miss")
    mon = SafetyMonitor(sim.mission, rule_period_s=0.05)
    latest: dict = {}
    hit = None
    for t, batch in sim.ticks():
        for u, pos, vel, _link in batch:
            latest[u] = (t, *pos, *vel)
        state = mon.update(t, latest)
        rule = [a for a in state.active if a["constraint"] == "rule:layered_crossing"]
        if rule and hit is None:
            hit = (t, rule[0], state)
    assert hit is not None, "the hard rule never vetoed live"
    t, evidence, state = hit
    assert state.veto and set(evidence["uavs"]) & set(truth.uavs) and evidence["delay_s"] == 0.0
    # the rule (closer than 2 m on one layer) breaks during the approach, before the separation limit does, and
    # live agrees with the offline check of the same flight to a grid step
    from uav_debate_eval.safety.checker import check_trajectory

    offline = next(r for r in check_trajectory(sim.traj, sim.mission).rules if r.rule.id == "layered_crossing")
    assert offline.satisfied is False and abs(t - offline.intervals[0][0]) <= 0.05 + 1e-6
    assert t <= truth.t_start
    row = next(r for r in status_rows(state, {"min_separation": sim.mission.constraints.min_separation_m}, {})
               if r.name == "safety/rule:layered_crossing")
    assert row.level == ERROR and "hard rule failed" in row.message and "decided at each sample" in row.message


def test_vehicles_discovered_one_by_one():
    """A live verifier discovers vehicles pose by pose: a pair rule waits for the second one, and the streams restart
    with the new columns (the bug: one vehicle gave pair rules no columns to judge)."""
    mon = RuleMonitor([make_rule("apart", "hard", "each_pair", "always (separation >= 1.0)"),
                       make_rule("alt", "hard", "each_vehicle", "always (z >= 1.0)")], period_s=0.1)
    assert mon.update(0.0, ["a"], np.array([[0.0, 0, 2]]), np.zeros((1, 3)), np.ones(1, bool)) == []
    fails = mon.update(0.1, ["a", "b"], np.array([[0.0, 0, 2], [0.5, 0, 2]]), np.zeros((2, 3)), np.ones(2, bool))
    assert [f.rule.id for f in fails] == ["apart"] and mon.restarts == 1


def test_rule_status_rows_are_veto_evidence():
    """The live veto's evidence (live.veto_history) names a rule's status row as the constraint rule:<id>."""
    from uav_debate_eval.core.mission import Constraints, Mission
    from uav_debate_eval.live.veto_history import status_evidence
    from uav_debate_eval.safety.monitor import SafetyMonitor
    from uav_debate_eval.safety.status import status_rows

    mon = SafetyMonitor(Mission(constraints=Constraints(min_separation_m=0.1),
                                rules=[make_rule("floor", "hard", "each_vehicle", "always (z >= 1.0)")]))
    state = mon.update(0.0, {"a": (0.0, 0, 0, 0.5, 0, 0, 0), "b": (0.0, 5, 0, 2.0, 0, 0, 0)})
    row = next(r for r in status_rows(state, {"min_separation": 0.1}, {}) if r.name == "safety/rule:floor")
    from types import SimpleNamespace

    ev = status_evidence(SimpleNamespace(name=row.name, level=row.level, message=row.message,  # as from the topic
                                         values=[SimpleNamespace(key=k, value=v) for k, v in row.values.items()]))
    assert state.veto and ev.constraint == "rule:floor" and ev.uavs == ["a"]
    assert ev.number("value") == pytest.approx(-0.5) and ev.number("limit") == 0.0


@pytest.mark.parametrize("stl", ["always ((separation < 3.0) -> (abs(a.vz) <= 1.0 and abs(b.vz) <= 1.0))",
                                 "always (separation >= 1.0)",
                                 "always (not (separation < 2.0) or a.z - b.z >= 0)"])
def test_live_pair_pruning_equals_every_pair(monkeypatch, stl):
    from uav_debate_eval.rules import live_pairs, monitor

    rng = np.random.default_rng(11)
    n, ticks = 80, 25
    start = rng.uniform(-12, 12, size=(n, 3))
    vel = rng.normal(scale=1.0, size=(ticks, n, 3))
    pos = start + np.cumsum(vel * 0.1, axis=0)
    fresh = np.ones((ticks, n), bool)
    fresh[5:12, 3] = False  # a vehicle without a fresh pose for a while
    fresh[15:18, ::2] = False  # half of them a tick late at once (per-vehicle topics on a loaded machine)
    ids = [f"u{k}" for k in range(n)]

    def run() -> tuple[list, list]:
        mon = RuleMonitor([make_rule("r", "hard", "each_pair", stl)], period_s=0.1)
        failures, rows = [], []
        for k in range(ticks):
            failures += [(f.t, f.uavs, f.value, f.count) for f in mon.update(k * 0.1, ids, pos[k], vel[k], fresh[k])]
            st = mon.states[0]
            rows.append((st.robustness, st.failing is not None, st.evaluated))
        return failures, rows

    pruned_failures, pruned = run()
    monkeypatch.setattr(monitor, "LIVE_PRUNE_MIN_VEHICLES", 10**9)
    full_failures, full = run()
    assert pruned_failures == full_failures and (pruned_failures or "separation >= 1.0" not in stl)
    for (rp, fp, _), (rf, ff, ef) in zip(pruned, full, strict=True):
        assert fp == ff and (rp == rf or abs(rp - rf) < 1e-12)
        assert ef == n * (n - 1) // 2
    assert max(ep for _, _, ep in pruned) < n * (n - 1) // 4  # far fewer pairs read per tick
    # a late vehicle's pairs are unknown to a rule on the pairs' geometry: not read (they were ~n/2 each)
    assert max(ep for _, _, ep in pruned[15:18]) < n * (n - 1) // 16
    assert live_pairs.atemporal(parse_formula(stl).arg)


@pytest.mark.parametrize("stl", ["always ((separation < 1.0) -> eventually[0, 0.1] (separation >= 1.0))",
                                 "always (historically[0, 0.1] (z >= 1.0))",
                                 "always ((t < 0.3) or (separation >= 0.5))"])
def test_checks_between_pose_arrays_reuse_the_snapshots_comparisons(monkeypatch, stl):
    """The verifier checks at 50 Hz a stream of 10 Hz: the steps between two arrays see the same snapshot, whose
    comparison values are computed once (a rule that reads the time `t` computes them every step). The failures
    and robustness equal those of every step computed."""
    from uav_debate_eval.rules import monitor

    rng = np.random.default_rng(5)
    n, arrays = 40, 12
    base = rng.uniform(-4, 4, size=(n, 3)) + [0, 0, 2.0]
    pos = [base + rng.normal(scale=0.05, size=(n, 3)) for _ in range(arrays)]  # close pairs stay close
    vel = np.zeros((n, 3))
    fresh = np.ones(n, bool)
    ids = [f"u{k}" for k in range(n)]
    over = "each_vehicle" if "z" in stl else "each_pair"

    def run() -> tuple[list, list, int]:
        rob = Evaluator.rob
        calls = []

        def counting(self, f, positive=True):
            calls.append(1)
            return rob(self, f, positive)

        monkeypatch.setattr(Evaluator, "rob", counting)
        mon = RuleMonitor([make_rule("r", "hard", over, stl)], period_s=0.02)
        failures, rows = [], []
        for k in range(arrays * 5):  # five checks per array
            p = pos[k // 5]
            failures += [(f.t, f.uavs, f.value, f.count) for f in mon.update(k * 0.02, ids, p, vel, fresh)]
            rows.append(mon.states[0].robustness)
        monkeypatch.setattr(Evaluator, "rob", rob)
        return failures, rows, len(calls)

    reused = run()
    monkeypatch.setattr(monitor, "LIVE_PRUNE_MIN_VEHICLES", 10**9)  # every pair: the streams (not pruned)
    every = run()
    original = monitor.RuleMonitor._advance

    def no_reuse(self, grid, same=False):
        return original(self, grid, False)

    monkeypatch.setattr(monitor.RuleMonitor, "_advance", no_reuse)
    computed = run()
    assert reused[:2] == computed[:2] == every[:2]
    assert any(r is not None and r < 0 for r in computed[1]) or computed[0]  # something to compare
    if "t <" in stl:
        assert every[2] == computed[2]  # the time changes every step: nothing reused
    else:
        assert every[2] * 4 < computed[2]  # one evaluation per array, not per check


@pytest.mark.parametrize("stl", ["always ((separation < 1.0) -> eventually[0, 0.5] (separation >= 1.0))",
                                 "always (historically[0, 0.3] (separation >= 0.8))",
                                 "always ((separation < 2.0) -> eventually[0, 0.2] (abs(a.vz - b.vz) <= 1.0))",
                                 "always ((separation >= 0.7) since[0, 0.4] (separation >= 1.5))"])
@pytest.mark.parametrize("checks", [1, 5])
def test_temporal_pair_rules_stream_only_the_pairs_that_can_matter(monkeypatch, stl, checks):
    """A pair rule with a temporal operator runs its streams on the pairs that came within a radius (live_tracked):
    pairs taken on as they come close (replayed over the kept steps), the radius grown while another pair could
    lower the minimum, pairs dropped once far for long; vehicles wander, one is late for a while, half of them for
    three ticks, one jumps next to another, an outage leaves two distant vehicles known (the robustness is then
    theirs: found among the vehicles whose values can be known). The failures and the robustness of every decided
    step equal those of the streams of every pair, with checks between pose arrays too."""
    from uav_debate_eval.rules import monitor

    rng = np.random.default_rng(11)
    n, ticks = 80, 60
    pos = rng.uniform(-12, 12, size=(n, 3)) + np.cumsum(rng.normal(scale=0.15, size=(ticks, n, 3)), axis=0)
    pos[30:33, 0] = pos[30:33, 1] + [0.3, 0.0, 0.0]  # from across the swarm to 0.3 m of another in one tick
    vel = rng.normal(scale=0.8, size=(ticks, n, 3))
    fresh = np.ones((ticks, n), bool)
    fresh[5:12, 3] = False
    fresh[15:18, ::2] = False
    fresh[40:47] = False  # an outage: two vehicles far apart stay known, every tracked pair's value is unknown
    fresh[40:47, [10, 70]] = True
    ids = [f"u{k}" for k in range(n)]

    def run() -> tuple[list, list, object]:
        mon = RuleMonitor([make_rule("r", "hard", "each_pair", stl)], period_s=0.1 / checks)
        failures, rows = [], []
        for k in range(ticks * checks):
            a = k // checks
            failures += [(f.t, f.uavs, f.value, f.count)
                         for f in mon.update(k * 0.1 / checks, ids, pos[a], vel[a], fresh[a])]
            st = mon.states[0]
            rows.append((st.robustness, st.failing is not None, st.evaluated))
        return failures, rows, mon.states[0].tracked

    tracked_failures, tracked, pairs = run()
    monkeypatch.setattr(monitor, "LIVE_PRUNE_MIN_VEHICLES", 10**9)
    every_failures, every, none = run()
    assert none is None and pairs is not None
    assert tracked_failures == every_failures and tracked_failures
    for (rt, ft, _), (re, fe, ee) in zip(tracked, every, strict=True):
        assert ft == fe and (rt == re or abs(rt - re) < 1e-12)
        assert ee == n * (n - 1) // 2
    read = [e for _, _, e in tracked]
    assert max(read) < n * (n - 1) // 8  # far fewer pairs streamed
    assert any(b < a for a, b in zip(read, read[1:], strict=False))  # pairs far for long were dropped
    outage = [r for r, _, _ in tracked[47 * checks:50 * checks]]
    assert any(r is not None for r in outage)  # some outage step decided from the two known vehicles alone


def test_the_tracked_radius_follows_the_swarm_out_and_back(monkeypatch):
    """A grid 0.9 m apart (the rule fails) opens up to 3 m: no pair within the first radius, so R grows until the
    floor beyond it holds the lowest value; the grid closes up again and R halves back. The same robustness as
    every pair."""
    from uav_debate_eval.rules import monitor

    stl = "always ((separation < 1.0) -> eventually[0, 0.3] (separation >= 1.0))"
    side, ticks = 8, 40
    base = np.array([[k % side, k // side, 5.0] for k in range(side * side)], dtype=float)
    spacing = np.where((np.arange(ticks) >= 10) & (np.arange(ticks) < 25), 3.0, 0.9)
    ids = [f"u{k}" for k in range(side * side)]

    def run() -> tuple[list, list]:
        mon = RuleMonitor([make_rule("r", "hard", "each_pair", stl)], period_s=0.1)
        rows = []
        for k in range(ticks):
            mon.update(k * 0.1, ids, base * [spacing[k], spacing[k], 1.0], np.zeros((side * side, 3)),
                       np.ones(side * side, bool))
            st = mon.states[0]
            rows.append((st.robustness, st.tracked.radius if st.tracked is not None else None))
        return rows

    tracked = run()
    monkeypatch.setattr(monitor, "LIVE_PRUNE_MIN_VEHICLES", 10**9)
    every = run()
    assert [r for r, _ in tracked] == [r for r, _ in every] and tracked[-1][0] == pytest.approx(-0.1)
    radii = [r for _, r in tracked]
    assert radii[0] == 1.0 and radii[22] == 4.0 and radii[-1] == 2.0  # out to the 3 m grid, back to 0.9 m
    assert min(r for r, _ in tracked[:10] if r is not None) < 0 < tracked[22][0]


def test_the_tracked_radius_starts_from_the_closest_pair():
    """At the first step R is where the floor reaches the highest value the closest pair can have (its pairs are
    taken on then, with nothing to replay): a grid 3 m apart starts at R = 4 m with every pair within 1.5 R."""
    from scipy.spatial.distance import pdist

    side = 8
    pos = np.array([[3.0 * (k % side), 3.0 * (k // side), 5.0] for k in range(side * side)])
    mon = RuleMonitor([make_rule("r", "hard", "each_pair",
                                 "always ((separation < 1.0) -> eventually[0, 0.3] (separation >= 1.0))")], 0.1)
    mon.update(0.0, [f"u{k}" for k in range(side * side)], pos, np.zeros_like(pos), np.ones(side * side, bool))
    tracked = mon.states[0].tracked
    assert tracked.radius == 4.0 and len(tracked.keys) == int((pdist(pos) <= 6.0).sum())


@pytest.mark.parametrize("stl", ["always (historically (separation >= 1.0))",
                                 "always ((separation >= 1.0) -> eventually[0, 0.2] (abs(a.z) >= 0.0))"])
def test_pair_rules_the_tracked_pairs_cannot_decide_read_every_pair(stl):
    """A past operator without bounds keeps the whole flight, and a floor that levels off with the separation
    cannot rule out the far pairs as the minimum: these rules stream every pair."""
    rng = np.random.default_rng(2)
    n = 60
    mon = RuleMonitor([make_rule("r", "hard", "each_pair", stl)], period_s=0.1)
    pos = rng.uniform(-10, 10, size=(n, 3))
    mon.update(0.0, [f"u{k}" for k in range(n)], pos, np.zeros((n, 3)), np.ones(n, bool))
    assert mon.states[0].tracked is None and mon.states[0].evaluated == n * (n - 1) // 2


def _random_pair_body(rng, depth: int) -> str:
    """A random pair formula over the separation, the closing speed and the vehicles' own signals."""
    if depth == 0 or rng.random() < 0.25:
        atom = str(rng.choice(["separation {op} {c}", "a.z - b.z {op} {d}", "closing_speed {op} {d}",
                               "abs(a.vz) {op} {e}", "separation {op} {c}"]))
        return "(" + atom.format(op=rng.choice(["<", "<=", ">", ">="]), c=round(rng.uniform(0.5, 3), 1),
                                 d=round(rng.uniform(-1, 1), 1), e=round(rng.uniform(0, 2), 1)) + ")"
    lo = float(rng.choice([0.0, 0.0, 0.1, 0.2]))
    window = f"[{lo}, {round(lo + float(rng.choice([0.0, 0.1, 0.2, 0.4])), 1)}]"
    roll = rng.integers(0, 5)
    if roll == 0:
        return f"(not {_random_pair_body(rng, depth - 1)})"
    if roll == 1:
        return f"({_random_pair_body(rng, depth - 1)} {rng.choice(['and', 'or', '->'])} " \
               f"{_random_pair_body(rng, depth - 1)})"
    if roll in (2, 3):
        op = rng.choice(["always", "eventually", "historically", "once"])
        return f"({op}{window} {_random_pair_body(rng, depth - 1)})"
    return f"({_random_pair_body(rng, depth - 1)} {rng.choice(['until', 'since'])}{window} " \
           f"{_random_pair_body(rng, depth - 1)})"


def test_tracked_pair_rules_equal_every_pair_on_random_formulas(monkeypatch):
    """Random pair rules with bounded temporal operators (until[0, 0] and since[0, 0] with a lagging left operand
    among them), on wandering vehicles with late poses and an outage: tracked, the same failures and robustness at
    every step as the streams of every pair."""
    from uav_debate_eval.rules import live_tracked, monitor
    from uav_debate_eval.rules.bounds import first_radius
    from uav_debate_eval.rules.live_pairs import atemporal

    rng = np.random.default_rng(12)
    n, ticks = 60, 30
    ids = [f"u{k}" for k in range(n)]
    checked = failing = 0
    lagging = ["always ((not (always[0.1, 0.5] (a.z - b.z >= -0.4))) since[0.0, 0.0] (separation > 2.6))",
               "always ((not (eventually[0.0, 0.4] (separation > 1.0))) until[0.0, 0.0] ((closing_speed >= 0.9) -> "
               "(not (separation < 1.8))))"]
    while checked < 14:
        stl = lagging.pop() if lagging else "always " + _random_pair_body(rng, 3)
        body = parse_formula(stl).arg
        if atemporal(body) or not live_tracked.trackable(body, first_radius(body)):
            continue
        pos = rng.uniform(-8, 8, size=(n, 3)) + np.cumsum(rng.normal(scale=0.2, size=(ticks, n, 3)), axis=0)
        vel = rng.normal(scale=0.8, size=(ticks, n, 3))
        fresh = rng.random((ticks, n)) > 0.05
        fresh[10:15] = False
        fresh[10:15, rng.choice(n, 3)] = True
        runs = []
        for prune_from in (50, 10**9):
            monkeypatch.setattr(monitor, "LIVE_PRUNE_MIN_VEHICLES", prune_from)
            mon = RuleMonitor([make_rule("r", "hard", "each_pair", stl)], period_s=0.1)
            failures, rows = [], []
            for k in range(ticks):
                failures += [(f.t, f.uavs, f.value, f.count)
                             for f in mon.update(k * 0.1, ids, pos[k], vel[k], fresh[k])]
                rows.append(mon.states[0].robustness)
            runs.append((failures, rows, mon.states[0].tracked))
        (ft, rt, tracked), (fe, re, _) = runs
        assert tracked is not None and ft == fe, stl
        assert all(a == b or abs(a - b) < 1e-9 for a, b in zip(rt, re, strict=True) if a is not None), stl
        assert [a is None for a in rt] == [b is None for b in re], stl
        checked += 1
        failing += bool(fe)
    assert failing >= 3
