"""PX4 ULog reader: a real log (test/fixtures/px4, BSD-3 pyulog test data) and the two-vehicle alignment math."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.loader import load_inputs
from uav_debate_eval.io.ulog import LogTrack, combine, geodetic_to_enu, ned_to_enu, read_ulogs

SMALL = Path(__file__).parent / "fixtures" / "px4" / "sample_log_small.ulg"
A_WGS84, E2 = 6378137.0, 6.69437999014e-3


def test_real_px4_log():
    traj = read_ulogs([SMALL])
    assert traj.uav_ids == ["sample_log_small"]
    tr = traj.tracks["sample_log_small"]
    assert len(tr) == 636
    assert traj.duration == pytest.approx(6.496152, abs=1e-5)
    # boot time 20.463 s moved to GPS UTC (2021-04-21)
    assert traj.t_start == 0.0 and traj.t0 == pytest.approx(1618986658.4635, abs=1e-3)  # flight time, clock kept
    assert tr.pos[0, 2] == pytest.approx(1.167656, abs=1e-6)  # z_enu = -z_ned
    assert tr.pos[:, 2].max() == pytest.approx(1.183107, abs=1e-6)
    assert tr.pos[:, :2].max() == 0.0
    assert not tr.vel_derived
    assert not tr.est_valid.any()  # the estimator never had a valid horizontal position
    assert "clocks aligned with GPS UTC time (t = UTC seconds)" in traj.ingest.notes
    assert any("636 of 636 samples flagged not valid" in n for n in traj.ingest.notes)


def test_ulog_via_loader_names_from_mission():
    traj = load_inputs([SMALL], names=["px4_a"])
    assert traj.uav_ids == ["px4_a"]


def test_ned_to_enu():
    assert ned_to_enu(np.array([[1.0, 2.0, 3.0]])).tolist() == [[2.0, 1.0, -3.0]]


def _offset_ref(lat0, lon0, alt0, east, north, up):
    """lat/lon/alt of a point east/north/up metres from the reference (ellipsoid radii of curvature)."""
    s = math.sin(math.radians(lat0))
    m = A_WGS84 * (1 - E2) / (1 - E2 * s * s) ** 1.5
    n = A_WGS84 / math.sqrt(1 - E2 * s * s)
    return lat0 + math.degrees(north / m), lon0 + math.degrees(east / (n * math.cos(math.radians(lat0)))), alt0 + up


def test_geodetic_to_enu_small_offsets():
    ref = (47.3977418, 8.5455939, 487.96)
    p = _offset_ref(*ref, 20.0, 10.0, 5.0)
    assert geodetic_to_enu(*p, *ref) == pytest.approx([20.0, 10.0, 5.0], abs=2e-3)
    assert geodetic_to_enu(*ref, *ref) == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)


def test_two_vehicle_alignment_frames_and_clocks():
    ref_a = (47.3977418, 8.5455939, 488.0)
    ref_b = _offset_ref(*ref_a, 20.0, 10.0, 5.0)  # B's origin: 20 m east, 10 m north, 5 m up of A's
    n = 11
    t = np.arange(n) * 0.1
    # Both fly the same world path: east = 2 t, north = 0, up = 3 (in A's frame).
    pos_a = np.column_stack([np.zeros(n), 2 * t, np.full(n, -3.0)])  # NED in A's frame
    pos_b = np.column_stack([np.full(n, -10.0), 2 * t - 20.0, np.full(n, 2.0)])  # the same points from B's origin
    vel = np.tile([0.0, 2.0, 0.0], (n, 1))
    utc0 = 1.7e15
    a = LogTrack("a", 5e6 + t * 1e6, pos_a, vel, ref_a, utc0 - 5e6)
    b = LogTrack("b", 90e6 + t * 1e6, pos_b, vel, ref_b, utc0 - 90e6)  # booted at another time
    traj = combine([a, b])
    ta, tb = traj.tracks["a"], traj.tracks["b"]
    np.testing.assert_allclose(ta.t, tb.t)
    assert ta.t[0] == 0.0 and traj.t0 == pytest.approx(1.7e9)
    np.testing.assert_allclose(tb.pos, ta.pos, atol=5e-3)
    assert ta.pos[10] == pytest.approx([2.0, 0.0, 3.0])
    assert ta.vel[0] == pytest.approx([2.0, 0.0, 0.0])
    assert any(n.startswith("b: origin at E+20.00 N+10.00 U+5.00 m") for n in traj.ingest.notes)


def test_alignment_without_utc_aligns_starts_and_says_so():
    n = 5
    t = np.arange(n) * 0.2
    pos = np.zeros((n, 3))
    a = LogTrack("a", 3e6 + t * 1e6, pos, pos, None, None)
    b = LogTrack("b", 70e6 + t * 1e6, pos + [1.0, 0.0, 0.0], pos, None, 1e15)
    traj = combine([a, b])
    assert traj.tracks["a"].t[0] == 0.0 and traj.tracks["b"].t[0] == 0.0
    assert "no GPS UTC time in a: log starts aligned to t = 0" in traj.ingest.notes
    assert "b: no global reference; its local frame is not placed among the others" in traj.ingest.notes
    assert traj.tracks["b"].pos[0] == pytest.approx([0.0, 1.0, 0.0])  # NED north -> ENU y


def test_damaged_ulog(tmp_path):
    bad = tmp_path / "bad.ulg"
    bad.write_bytes(b"not a ulog" * 100)
    with pytest.raises(InputError, match=r"bad.ulg: cannot read ULog"):
        read_ulogs([bad])
