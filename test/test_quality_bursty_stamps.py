"""Stamps in bursts: a motion-capture client that stamps poses on delivery (VRPN's ROS client) gives two poses tens
of microseconds apart on a 10-ms period. A real Crazyflie flying under 1.6 m/s read as 394 m/s (the step between
the poses of a burst over the few microseconds between their stamps), with 288 'position jumps'; its kinematics now
come from the last pose of each burst, over a baseline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from uav_debate_eval.core import SwarmTrajectory
from uav_debate_eval.core.mission_file import load_mission, parse_mission
from uav_debate_eval.io.loader import load_inputs
from uav_debate_eval.quality.assessment import assess
from uav_debate_eval.quality.updates import distinct_updates
from uav_debate_eval.safety.checker import check_trajectory

REAL = Path(__file__).parent / "fixtures" / "real" / "mocap_vrpn"


def test_a_real_mocap_flight_stamped_on_delivery_flies_at_its_own_speed():
    traj = load_inputs([REAL / "crazyflie_vrpn_sine.bag"])
    mission = load_mission(REAL / "mission.yaml")
    stamps = np.diff(traj.tracks["Drone1"].t)
    assert (stamps < 1e-3).mean() > 0.15  # the recording as it is: bursts
    quality = assess(traj, mission)
    result = check_trajectory(quality.traj, mission, quality=quality)
    assert not result.violations and result.label != "risky"
    assert result.margins["max_speed"]["worst_value"] < 1.6  # a slow sine, not hundreds of m/s
    assert not [f for f in quality.findings if f.kind == "position_jump"]
    (burst,) = [f for f in quality.findings if f.kind == "timing_jitter"]
    assert "stamps come in bursts: 17%" in burst.detail and "stamped on delivery" in burst.detail


def _stream(burst_every: int) -> SwarmTrajectory:
    """10 s at 100 Hz, 2 m/s east; every `burst_every`-th pose stamped 20 µs after the one before it (0: none)."""
    t = np.arange(0.0, 10.0, 0.01)
    x = 2.0 * t
    if burst_every:
        t = t.copy()
        t[burst_every::burst_every] = t[burst_every - 1::burst_every][:len(t[burst_every::burst_every])] + 2e-5
    return SwarmTrajectory.from_columns(t, ["v"] * len(t), np.column_stack([x, 0 * x, 0 * x + 1.0]))


def test_bursts_are_found_and_thinned_and_a_clean_stream_is_left_alone():
    clean = _stream(0).tracks["v"]
    assert not distinct_updates(clean).bursty and len(distinct_updates(clean).index) == len(clean)
    bursty = _stream(5).tracks["v"]
    upd = distinct_updates(bursty)
    assert upd.bursty and upd.burst_fraction == pytest.approx(0.2, abs=0.01)
    assert len(upd.index) == pytest.approx(0.8 * len(bursty), abs=2)  # the earlier pose of each burst left out
    mission = parse_mission("constraints: {max_speed_mps: 3}")
    quality = assess(_stream(5), mission)
    result = check_trajectory(quality.traj, mission, quality=quality)
    assert not result.violations
    assert result.margins["max_speed"]["worst_value"] == pytest.approx(2.0, abs=0.25)


def _late_pose_stream() -> tuple[np.ndarray, np.ndarray]:
    """3 s at 100 Hz descending at 0.9 m/s; the pose measured at 1.51 s is delivered (and stamped) 9 ms late, 1 ms
    before the next: the real Vicon bag's pattern (a 10-mm step over 1.3 ms read as 7.4 m/s)."""
    t_true = np.arange(0.0, 3.0, 0.01)
    stamps = t_true.copy()
    stamps[151] += 0.009
    pos = np.column_stack([0 * t_true, 0 * t_true, 3.0 - 0.9 * t_true])
    return stamps, pos


def test_an_isolated_pair_of_close_stamps_is_no_speed_offline_or_live():
    from safety_support import box_mission

    from uav_debate_eval.safety.monitor import SafetyMonitor

    stamps, pos = _late_pose_stream()
    traj = SwarmTrajectory.from_columns(stamps, ["v"] * len(stamps), pos)
    assert not distinct_updates(traj.tracks["v"]).bursty  # one burst in 300 intervals: not a bursty track
    assert np.abs(traj.tracks["v"].vel[:, 2]).max() > 7.0  # the pair's step over 1 ms, as read
    mission = box_mission()  # 2 m/s vertical
    quality = assess(traj, mission)
    result = check_trajectory(quality.traj, mission, quality=quality)
    assert not [v for v in result.violations if v.constraint == "max_vertical_speed"]
    assert result.margins["max_vertical_speed"]["worst_value"] == pytest.approx(0.9, abs=0.1)
    (pair,) = [f for f in quality.findings if f.kind == "timing_jitter"]
    assert pair.detail.startswith("v: 1 pair(s) of its stamps lie within 2.5 ms on a 10 ms period (first at 1.519 s)")
    monitor = SafetyMonitor(mission)
    worst = 0.0
    for t, p in zip(stamps, pos, strict=True):
        monitor.observe("v", (t, *p))
        state = monitor.update(t)
        assert not state.veto, state.active
        worst = max(worst, abs(float(monitor._vel[0, 2])))
    assert worst == pytest.approx(0.9, abs=0.1)


def test_a_dropout_mid_turn_is_no_motion_capture_glitch():
    """A real fixed-wing flight under motion capture (CogniPilot's cub, 100 Hz; its recorded poses around 2.75 s
    below, the stream before and after continued straight): samples dropped, then a 169-ms dropout as the plane
    turns. The median of 7 updates spans the dropout, and the smooth path strays 7 cm from it: read as a
    'position_jump' glitch, its samples left out of every check. The medians now take no update across a dropout; a
    one-frame glitch in the same stream is still one, just after the dropout too."""
    from uav_debate_eval.quality.jumps import excursions

    real = np.array([
        [2.5999, 0.1397, -11.1708, 2.5489], [2.6091, 0.0801, -11.1889, 2.5459], [2.6191, 0.0206, -11.2059, 2.5428],
        [2.6341, -0.0394, -11.2223, 2.5398], [2.6391, -0.1001, -11.2378, 2.5372], [2.6502, -0.1612, -11.2525, 2.5346],
        [2.6801, -0.3419, -11.2936, 2.5268], [2.699, -0.4694, -11.3186, 2.5278], [2.7503, -0.7772, -11.3583, 2.5152],
        [2.9189, -1.8681, -11.3229, 2.5412], [2.9489, -2.0563, -11.2873, 2.5504], [2.9597, -2.1187, -11.2733, 2.5541],
        [2.9697, -2.1808, -11.2588, 2.5575], [2.9797, -2.2427, -11.2431, 2.5618], [2.9895, -2.3044, -11.2266, 2.5658],
        [3.001, -2.3656, -11.2092, 2.5698]])
    before, after = np.arange(-200, 0) * 0.01, np.arange(1, 201) * 0.01
    v0 = (real[2, 1:] - real[0, 1:]) / (real[2, 0] - real[0, 0])
    v1 = (real[-1, 1:] - real[-3, 1:]) / (real[-1, 0] - real[-3, 0])
    t = np.concatenate([real[0, 0] + before, real[:, 0], real[-1, 0] + after])
    pos = np.vstack([real[0, 1:] + before[:, None] * v0, real[:, 1:], real[-1, 1:] + after[:, None] * v1])
    assert excursions(t, pos, 30.0) == []
    pos[100] += [0.0, 0.4, 0.0]  # a marker swap for one frame
    [glitch] = excursions(t, pos, 30.0)
    assert glitch.first == glitch.last == 100
    after = int(np.flatnonzero(t > 2.9)[0]) + 1  # the same swap on the second update after the dropout: found too
    pos[100] -= [0.0, 0.4, 0.0]
    pos[after] += [0.0, 0.4, 0.0]
    [glitch] = excursions(t, pos, 30.0)
    assert glitch.first == glitch.last == after
