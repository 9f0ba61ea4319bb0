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
