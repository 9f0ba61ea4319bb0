"""Event detection on flights with known answers: one event per manoeuvre, at the right time and vehicle."""

import numpy as np
import pytest

from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.core.mission import Constraints, Mission, Thresholds
from uav_debate_eval.core.records import Event
from uav_debate_eval.dsl.events import SWARM_TURN_S, detect_events, merge_swarm_turns
from uav_debate_eval.dsl.segmentation import segment_vehicle
from uav_debate_eval.metrics.kinematics import smooth_kinematics

DT = 0.05
T = np.arange(0.0, 40.0 + 1e-9, DT)


def _traj(paths: dict, link_ok: dict | None = None) -> SwarmTrajectory:
    ids = np.concatenate([[u] * len(T) for u in paths])
    link = None
    if link_ok:
        link = np.concatenate([link_ok.get(u, np.ones(len(T))) for u in paths])
    return SwarmTrajectory.from_columns(np.tile(T, len(paths)), ids, np.vstack(list(paths.values())), link_ok=link)


def _east(y=0.0, z=5.0, v=2.0):
    return np.column_stack([v * T, 0 * T + y, 0 * T + z])


def _corner(t_turn=20.0, y=0.0):
    before = t_turn >= T
    return np.column_stack([np.where(before, 2 * T, 2 * t_turn), np.where(before, y, y + 2 * (T - t_turn)), 0 * T + 5])


def _climb(y=-10.0):
    z = 5.0 + 4.0 * np.clip(T - 10.0, 0.0, 5.0)  # 4 m/s from 10 s to 15 s
    return np.column_stack([2 * T, 0 * T + y, z])


def _of(events, kind):
    return [e for e in events if e.type == kind]


def test_a_90_degree_corner_is_exactly_one_sharp_turn_at_the_corner():
    traj = _traj({"uav1": _corner(), "uav2": _east(y=-10.0), "uav3": _east(y=10.0)})
    turns = _of(detect_events(traj, Mission()), "sharp_turn")
    assert len(turns) == 1
    e = turns[0]
    assert e.uavs == ["uav1"]
    assert e.t == pytest.approx(20.0, abs=DT)
    assert e.value == pytest.approx(90.0, abs=1.0)
    assert e.unit == "deg"
    assert e.extra["direction"] == "left"


def test_turn_below_the_threshold_is_not_an_event_and_threshold_is_configurable():
    before = T <= 20.0
    ang = np.radians(25.0)
    path = np.column_stack([np.where(before, 2 * T, 40 + 2 * np.cos(ang) * (T - 20)),
                            np.where(before, 0 * T, 2 * np.sin(ang) * (T - 20)), 0 * T + 5])
    traj = _traj({"uav1": path})
    assert _of(detect_events(traj, Mission()), "sharp_turn") == []
    low = Mission(thresholds=Thresholds(sharp_turn_deg=20.0))
    assert len(_of(detect_events(traj, low), "sharp_turn")) == 1


def test_swarm_turning_together_is_one_event_listing_every_vehicle():
    traj = _traj({"uav1": _corner(), "uav2": _corner(y=-5.0), "uav3": _corner(20.5, y=5.0)})
    turns = _of(detect_events(traj, Mission()), "sharp_turn")
    assert len(turns) == 1
    assert turns[0].uavs == ["uav1", "uav2", "uav3"]
    assert turns[0].t == pytest.approx(20.0, abs=DT)


def test_climb_at_4_mps_is_an_altitude_rate_event_over_the_climb():
    traj = _traj({"uav1": _climb()})
    events = detect_events(traj, Mission())
    rates = _of(events, "altitude_rate")
    assert len(rates) == 1
    e = rates[0]
    assert e.uavs == ["uav1"]
    assert e.t == pytest.approx(10.0, abs=0.25)
    assert e.t_end == pytest.approx(15.0, abs=0.25)
    assert e.value == pytest.approx(4.0, abs=0.01)
    assert e.extra["direction"] == "climb"
    assert _of(events, "sharp_turn") == []


def test_proximity_event_names_the_pair_and_the_closest_distance():
    hover = np.tile([0.0, 0.0, 5.0], (len(T), 1))
    passing = np.column_stack([T - 20.0, 0 * T + 0.8, 0 * T + 5.0])
    mission = Mission(constraints=Constraints(min_separation_m=0.5))  # warning at 1.0 m
    prox = _of(detect_events(_traj({"uav1": hover, "uav2": passing}), mission), "proximity")
    assert len(prox) == 1
    e = prox[0]
    assert e.uavs == ["uav1", "uav2"]
    assert e.value == pytest.approx(0.8, abs=1e-6)
    assert e.t == pytest.approx(19.45, abs=DT + 1e-6)
    assert e.t_end == pytest.approx(20.55, abs=DT + 1e-6)
    assert e.extra["t_min"] == pytest.approx(20.0, abs=1e-6)


def test_link_loss_gap_and_violation_events():
    link = np.ones(len(T))
    link[(T >= 5.0) & (T < 8.0)] = 0.0
    traj = SwarmTrajectory.from_columns(
        np.concatenate([T, T[(T < 25) | (T > 28)]]),
        np.array(["uav1"] * len(T) + ["uav2"] * int(((T < 25) | (T > 28)).sum())),
        np.vstack([_east(), _east(y=5.0)[(T < 25) | (T > 28)]]),
        link_ok=np.concatenate([link, np.ones(int(((T < 25) | (T > 28)).sum()))]),
    )
    mission = Mission(constraints=Constraints(max_speed_mps=1.5, stale_timeout_s=1.0))
    events = detect_events(traj, mission)
    (loss,) = _of(events, "link_loss")
    assert loss.uavs == ["uav1"] and loss.t == 5.0 and loss.t_end == 8.0 and loss.value == 3.0
    (gap,) = _of(events, "data_gap")
    assert gap.uavs == ["uav2"] and gap.t == pytest.approx(24.95) and gap.t_end == pytest.approx(28.05)
    assert {e.type for e in events} >= {"violation:max_speed", "violation:stale_data"}


def test_ids_are_ordered_by_time_and_stable():
    traj = _traj({"uav1": _corner(), "uav2": _climb(), "uav3": _east(y=10.0)})
    a = detect_events(traj, Mission())
    b = detect_events(traj, Mission())
    assert [e.to_dict() for e in a] == [e.to_dict() for e in b]
    assert [e.id for e in a] == [f"EVENT[{k}]" for k in range(1, len(a) + 1)]
    assert [e.t for e in a] == sorted(e.t for e in a)
    assert [e.type for e in a] == ["altitude_rate", "sharp_turn"]


def test_segmentation_labels_straight_turn_climb_and_hover():
    hover_then_go = np.column_stack([np.where(T < 10, 0.0, 2 * (T - 10)), 0 * T, 0 * T + 5])
    kinds = [s.kind for s in segment_vehicle(smooth_kinematics(_traj({"u": hover_then_go}).tracks["u"]))]
    assert kinds == ["hover", "straight"]
    segs = segment_vehicle(smooth_kinematics(_traj({"u": _climb()}).tracks["u"]))
    assert [s.kind for s in segs] == ["straight", "climb", "straight"]
    climb = segs[1]
    assert climb.t_start == pytest.approx(10.0, abs=1.0) and climb.t_end == pytest.approx(15.0, abs=1.0)
    assert climb.dz == pytest.approx(20.0, abs=2.0)
    segs = segment_vehicle(smooth_kinematics(_traj({"u": _corner()}).tracks["u"]))
    assert [s.kind for s in segs] == ["straight", "turn", "straight"]
    assert segs[1].turn_deg == pytest.approx(90.0, abs=2.0)
    # segments tile the flight without gaps or overlaps
    assert segs[0].t_start == 0.0 and segs[-1].t_end == pytest.approx(40.0)
    assert all(a.t_end == b.t_start for a, b in zip(segs, segs[1:], strict=False))


def test_noisy_straight_flight_has_no_events_and_no_fragments():
    rng = np.random.default_rng(7)
    noisy = _east() + rng.normal(0.0, 0.03, (len(T), 3))
    traj = _traj({"uav1": noisy})
    assert detect_events(traj, Mission()) == []
    assert [s.kind for s in segment_vehicle(smooth_kinematics(traj.tracks["uav1"]))] == ["straight"]


def test_a_speed_regime_change_splits_a_straight_segment():
    x = np.where(T < 20, 1.0 * T, 20.0 + 3.0 * (T - 20))
    segs = segment_vehicle(smooth_kinematics(_traj({"u": np.column_stack([x, 0 * T, 0 * T + 5])}).tracks["u"]))
    assert [s.kind for s in segs] == ["straight", "straight"]
    assert segs[0].t_end == pytest.approx(20.0, abs=0.5)
    assert segs[0].mean_speed == pytest.approx(1.0, abs=0.05) and segs[1].mean_speed == pytest.approx(3.0, abs=0.05)


def test_a_segment_shorter_than_a_turn_window_has_no_sharp_turn_and_no_error():
    """The end of a live flight can leave a segment of a few seconds (here 2.75 s at 20 Hz)."""
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=3, duration_s=60, faults=["near_miss@7.5"])
    short = sim.traj.window(11.0, 13.75)
    events = detect_events(short, sim.mission)
    assert not [e for e in events if e.type == "sharp_turn"]


@pytest.mark.parametrize("window", [None, (21.2, 27.9), (3.05, 41.33)])
def test_vehicles_segmented_together_equal_each_vehicle_alone(window):
    """segment_vehicles classifies a block of vehicles at once: the same segments and headings, bit for bit, as
    segment_vehicle on fresh kinematics, for a flight and windows with edges on and off the sample grid."""
    from uav_debate_eval.dsl.segmentation import segment_vehicles
    from uav_debate_eval.metrics.kinematics import smooth_tracks
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=2, n_uavs=70, duration_s=80.0, faults=["near_miss", "overspeed", "sharp_turn",
                                                                       "altitude_drop"])
    traj = sim.traj if window is None else sim.traj.window(*window)
    together = segment_vehicles(smooth_tracks(list(traj.tracks.values())))
    fresh = traj.window(traj.t_start, traj.t_end)  # new tracks: nothing cached
    alone = [segment_vehicle(smooth_kinematics(tr)) for tr in fresh.tracks.values()]
    assert together == alone
    kinds = {s.kind for segs in alone for s in segs}
    assert kinds >= ({"straight", "turn", "climb", "descent"} if window is None else {"straight"})
    for tr, other in zip(traj.tracks.values(), fresh.tracks.values(), strict=True):
        np.testing.assert_array_equal(smooth_kinematics(tr).heading(), smooth_kinematics(other).heading())


@pytest.mark.parametrize("window", [None, (3.05, 41.33)])
def test_sharp_turns_of_all_vehicles_at_once_equal_each_vehicle_alone(window):
    from uav_debate_eval.dsl.events import sharp_turns, sharp_turns_all
    from uav_debate_eval.metrics.kinematics import smooth_tracks
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=2, n_uavs=70, duration_s=80.0, faults=["sharp_turn", "near_miss"])
    traj = sim.traj if window is None else sim.traj.window(*window)
    kins = smooth_tracks(list(traj.tracks.values()))
    together = sharp_turns_all(kins, 30.0)
    alone = [sharp_turns(k, 30.0) for k in kins]
    assert together == alone
    assert window is not None or sum(len(e) for e in alone) >= 1


def _merge_by_definition(turns, order):
    """merge_swarm_turns' clusters as its docstring defines them, every cluster rescanned per turn (the reference)."""
    rank = {u: i for i, u in enumerate(order)}
    clusters = []
    for e in sorted(turns, key=lambda e: (e.t, rank.get(e.uavs[0], 0))):
        home = next((c for c in clusters if c[0].extra["direction"] == e.extra["direction"]
                     and e.t - c[0].t <= SWARM_TURN_S and e.uavs[0] not in {x.uavs[0] for x in c}), None)
        if home is None:
            clusters.append([e])
        else:
            home.append(e)
    return sorted((round(float(np.median([x.t for x in c])), 3), c[0].extra["direction"],
                   sorted(x.uavs[0] for x in c)) for c in clusters)


@pytest.mark.parametrize("seed", range(6))
def test_swarm_corners_are_clustered_by_their_definition(seed):
    """Corners of many vehicles: both directions, a vehicle turning twice within SWARM_TURN_S, corners exactly
    SWARM_TURN_S apart and a cluster still open after a later one started, against the definition."""
    rng = np.random.default_rng(seed)
    names = [f"uav{i}" for i in range(300)]
    turns = []
    for corner in rng.uniform(0.0, 60.0, 12).round(1):
        for u in rng.choice(names, int(rng.integers(200, 300)), replace=False):
            t = float(corner + rng.choice([0.0, 0.5, SWARM_TURN_S, SWARM_TURN_S + 0.1, 3.0]))
            turns.append(Event("", "sharp_turn", t, [str(u)], t + 1.0, float(rng.uniform(31, 120)), "deg",
                               {"t_from": t - 1.0, "direction": str(rng.choice(["left", "right"]))}))
    merged = merge_swarm_turns(turns, names)
    got = sorted((e.t, e.extra["direction"], sorted(e.uavs)) for e in merged)
    assert got == _merge_by_definition(turns, names)
    assert sum(len(e.uavs) for e in merged) == len(turns)  # every turn in exactly one event
    assert any(len(e.uavs) > 40 for e in merged)


def _climb_at(t0: float, rate: float, y: float) -> np.ndarray:
    z = 5.0 + rate * np.clip(T - t0, 0.0, 5.0)  # `rate` m/s for 5 s from t0 (negative: a descent)
    return np.column_stack([2 * T, 0 * T + y, z + (30.0 if rate < 0 else 0.0)])


def test_vehicles_climbing_together_are_one_altitude_rate_event():
    """A show's climb is one event naming every vehicle, from the first start to the last end, with the highest
    peak of each vehicle's own event; a vehicle that climbs later, or descends meanwhile, has its own."""
    paths = {"uav1": _climb_at(10.0, 4.0, 0.0), "uav2": _climb_at(11.0, 4.5, 5.0), "uav3": _climb_at(10.5, 4.0, 10.0),
             "uav4": _climb_at(20.0, 4.0, 15.0), "uav5": _climb_at(10.0, -4.0, 20.0)}
    rates = _of(detect_events(_traj(paths), Mission()), "altitude_rate")
    assert sorted((tuple(e.uavs), e.extra["direction"]) for e in rates) == [
        (("uav1", "uav2", "uav3"), "climb"), (("uav4",), "climb"), (("uav5",), "descent")]
    alone = [_of(detect_events(_traj({u: paths[u]}), Mission()), "altitude_rate")[0] for u in ("uav1", "uav2", "uav3")]
    swarm = next(e for e in rates if len(e.uavs) == 3)
    assert swarm.t == min(e.t for e in alone) and swarm.t_end == max(e.t_end for e in alone)
    assert swarm.value == max(e.value for e in alone) == pytest.approx(4.5, abs=0.05)
    assert swarm.t == pytest.approx(10.0, abs=0.25) and swarm.t_end == pytest.approx(16.0, abs=0.25)
