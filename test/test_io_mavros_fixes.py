"""MAVROS local frames placed by global fixes: the live verifier (LiveFixes, pose by pose) and the live flight report
(tape_offsets, on its tape) put a vehicle where the bag reader does (io.rosbag.mavros.place_by_fix: one rule)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.mavros_fixes import LiveFixes, tape_offsets

LAT0, LON0, ALT0 = 47.397742, 8.545594, 488.0
#: uav2's local frame starts 6 m east and 2 m north of uav1's (each at its own EKF origin)
ORIGIN2 = np.array([6.0, 2.0, 0.0])


def _geo(east: float, north: float, up: float) -> list[float]:
    """A fix east/north/up metres from (LAT0, LON0, ALT0) (the tangent plane, to a few mm over metres)."""
    return [LAT0 + north / 111_132.954, LON0 + east / (111_319.49 * math.cos(math.radians(LAT0))), ALT0 + up]


def test_live_and_taped_placement_agree_and_restore_the_world():
    t = np.arange(0.0, 10.0, 0.1)
    world1 = np.column_stack([t, 0 * t, np.minimum(t, 3.0)])
    world2 = world1 + ORIGIN2
    local1, local2 = world1, world2 - ORIGIN2  # both start at their own origin
    fixes = {"uav1": [100.0 + 1.0, *_geo(*world1[10])], "uav2": [100.0 + 1.0, *_geo(*world2[10])]}
    traj = SwarmTrajectory.from_columns(np.concatenate([t, t]) + 100.0, ["uav1"] * len(t) + ["uav2"] * len(t),
                                        np.vstack([local1, local2]))
    offsets = tape_offsets(traj, fixes, "uav1")
    assert traj.tracks["uav2"].pos + offsets["uav2"] == pytest.approx(world2, abs=0.02)
    assert offsets["uav1"] == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)  # the anchor's frame is the world frame
    assert tape_offsets(traj, {"uav1": fixes["uav1"]}, "uav1") == {}  # one fix places nothing

    said: list[str] = []
    live = LiveFixes(lambda u: f"/{u}/mavros/local_position/pose", said.append)
    out = {}
    fix_t = 0.45  # between two poses, as a fix is stamped: the live side interpolates there, as the bag reader
    geo = {u: _geo(*[np.interp(fix_t, t, w[:, c]) for c in range(3)]) for u, w in (("uav1", world1),
                                                                                  ("uav2", world2))}
    for k in range(len(t)):
        if k == 5:  # uav2's fix arrives before its pose at or after the fix's stamp: it waits for it
            live.fix("uav2", 100.0 + fix_t, *geo["uav2"])
        for u, local in (("uav1", local1), ("uav2", local2)):
            out.setdefault(u, []).append(live.pose(u, 100.0 + t[k], tuple(local[k])))
        if k == 5:
            live.fix("uav1", 100.0 + fix_t, *geo["uav1"])
    assert live.anchor == "uav1" and len(said) == 2
    assert np.array(out["uav2"][:6]) == pytest.approx(local2[:6])  # not placed yet: as received
    assert np.array(out["uav2"][6:]) == pytest.approx(world2[6:], abs=0.02)
    assert np.array(out["uav1"]) == pytest.approx(world1)
    taped = tape_offsets(traj, {u: [100.0 + fix_t, *g] for u, g in geo.items()}, "uav1")
    for u in ("uav1", "uav2"):  # the veto's placement is the flight report's (and the bag reader's)
        assert live.offsets[u] == pytest.approx(taped[u], abs=1e-9)


def test_a_fix_that_does_not_place():
    live = LiveFixes(lambda u: u)
    live.pose("a", 0.0, (1.0, 2.0, 3.0))
    live.fix("a", 0.0, 0.0, 0.0, 0.0)  # a receiver without a fix reports 0/0
    live.fix("a", 0.0, float("nan"), LON0, ALT0)
    assert live.fixes == {} and live.pose("a", 0.1, (1.0, 2.0, 3.0)) == (1.0, 2.0, 3.0)
    live.fix("a", 0.0, *_geo(0.0, 0.0, 0.0))
    assert live.offsets == {}  # one vehicle: nothing to place it against


def test_a_frame_placed_mid_flight_is_no_step_for_the_verifier():
    """The fixes come after the first poses (a verifier started before the GPS had a fix): the placed frame moves
    uav2 by its 10-m offset between two poses, which the monitor read as 200 m/s (a max_speed veto, a position
    jump). The monitor restarts the vehicle's motion at its first placed pose: no veto, the separation placed."""
    from uav_debate_eval.core.mission_file import parse_mission
    from uav_debate_eval.live.verifier import LiveVerifier
    from uav_debate_eval.safety.monitor import SafetyMonitor

    mission = parse_mission("constraints: {min_separation_m: 2.0, max_speed_mps: 8.0}")
    monitor = SafetyMonitor(mission)
    clock = [100.0]
    verifier = LiveVerifier(mission, monitor, 0.05, lambda: clock[0], lambda state: None, lambda text: None)
    live = LiveFixes(lambda u: u, moved=monitor.restart)
    broken = set()
    for k in range(100):
        clock[0] = t = 100.0 + 0.05 * k
        if k == 30:
            live.fix("uav1", t, *_geo(0.0, 0.0, 1.0))
            live.fix("uav2", t, *_geo(10.0, 0.0, 1.0))
        for u in ("uav1", "uav2"):  # both hover 1 m over their own origins, 10 m apart in the world
            verifier.on_pose(u, t, live.pose(u, t, (0.0, 0.0, 1.0)), None)
        broken |= {(row["constraint"], k < 30) for row in verifier.check().active}
    assert broken == {("min_separation", True)}  # one frame until placed (0 m apart), then 10 m and no step
    assert not monitor.veto  # down once the hold time passed
    assert live.offsets["uav2"] == pytest.approx([10.0, 0.0, 0.0], abs=0.02)


def test_a_vehicle_whose_topic_sorts_first_anchors_once_it_is_placed():
    """b and c are placed first (in b's frame); a's fix comes last and its topic sorts first: every frame moves to
    a's, the bag reader's anchor, so the veto's geofence frame is the report's; b and c are told of the move (their
    next pose is no step) and none of it is a speed."""
    moved: list[str] = []
    live = LiveFixes(lambda u: f"/{u}/mavros/local_position/pose", moved=moved.append)
    origins = {"a": np.zeros(3), "b": np.array([4.0, 0.0, 0.0]), "c": np.array([8.0, 0.0, 0.0])}
    for k in range(30):
        t = 100.0 + 0.1 * k
        for u in "cba" if k < 20 else "abc":
            if k == 5 and u != "a" or k == 20 and u == "a":
                live.fix(u, t - 0.05, *_geo(*origins[u]))
            out = live.pose(u, t, (0.0, 0.0, 0.0))
            if k >= 21:  # all placed in a's frame: where they are in the world
                assert out == pytest.approx(tuple(origins[u]), abs=0.02), (k, u)
    assert live.anchor == "a" and sorted(moved) == ["b", "c", "c"]  # c when placed in b's frame; b, c to a's
    assert live.offsets["a"] == pytest.approx([0.0, 0.0, 0.0])


def test_measured_velocity_goes_on_the_taped_poses_as_on_a_bags():
    """The live flight report puts a vehicle's velocity_local on its taped poses (interpolated at each pose's stamp,
    the stream taken in stamp order, held past its ends), as the bag reader does; a vehicle without one keeps its
    velocity derived."""
    from uav_debate_eval.core.stamps import tape_seconds
    from uav_debate_eval.io.live_tape import put_measured_velocity, tape_trajectory

    ns = 1_795_462_900_123_456_789 + np.arange(0, 3_000_000_000, 100_000_000)  # 10 Hz for 3 s, unix stamps
    t = (ns // 1_000_000_000) + (ns % 1_000_000_000) * 1e-9  # as the pose input reads a stamp
    data = np.full((2 * len(t), 8), np.nan)
    data[:, 0] = np.repeat([0, 1], len(t))
    data[:, 1] = np.tile(t, 2)
    data[:, 2:5] = np.tile(np.column_stack([t - t[0], 0 * t, 0 * t]), (2, 1))
    ids = np.asarray(["uav1", "uav2"], dtype=object)[data[:, 0].astype(int)]
    m_ns = ns[::3][::-1] + 40_000_000  # every third pose, 40 ms later, received out of order
    m_t = (m_ns // 1_000_000_000) + (m_ns % 1_000_000_000) * 1e-9
    rows = np.column_stack([m_t, 2.0 * (m_t - t[0]), np.ones(len(m_t)), np.zeros(len(m_t))])
    assert put_measured_velocity((data, ids), {"uav1": rows, "uav3": rows}) == ["uav1"]
    order = np.argsort(tape_seconds(m_ns))
    want = np.interp(tape_seconds(ns), tape_seconds(m_ns)[order], rows[order, 1])
    np.testing.assert_array_equal(data[: len(t), 5], want)  # the bag reader's numbers, to the bit
    assert want[:2] == pytest.approx([0.08, 0.2], abs=1e-5)  # held before the first measurement, then between two
    assert want[-2:] == pytest.approx([5.48, 5.48], abs=1e-5)  # held after the last
    np.testing.assert_array_equal(data[: len(t), 6], 1.0)
    assert np.isnan(data[len(t):, 5:8]).all()
    traj = tape_trajectory((data, ids))
    assert not traj.tracks["uav1"].vel_derived and traj.tracks["uav2"].vel_derived
