"""Mission segments (one debate each): fixed windows, flight phases, cuts at veto edges."""

from types import SimpleNamespace

import numpy as np
import pytest

from uav_debate_eval.core import InputError, SwarmTrajectory
from uav_debate_eval.core.mission import Constraints, Mission
from uav_debate_eval.dsl.segments import mission_segments

DT = 0.1


def _swarm(duration=95.0, x_of_t=None, extra=None) -> SwarmTrajectory:
    t = np.arange(0.0, duration + 1e-9, DT)
    x = x_of_t(t) if x_of_t else 2 * t
    paths = [np.column_stack([x, 0 * t + 5.0 * k, 0 * t + 5]) for k in range(3)]
    if extra is not None:
        paths.append(extra(t))
    n = len(paths)
    ids = np.repeat([f"uav{k + 1}" for k in range(n)], len(t))
    return SwarmTrajectory.from_columns(np.tile(t, n), ids, np.vstack(paths))


def test_windows_cover_the_flight_and_a_short_tail_joins_the_last_window():
    segs = mission_segments(_swarm(95.0), Mission(), mode="window", window_s=30.0)
    assert [(s.t_start, s.t_end) for s in segs] == [(0.0, 30.0), (30.0, 60.0), (60.0, 95.0)]
    assert [s.id for s in segs] == ["MSEG[1]", "MSEG[2]", "MSEG[3]"]
    segs = mission_segments(_swarm(100.0), Mission(), mode="window", window_s=30.0)
    assert [(s.t_start, s.t_end) for s in segs] == [(0.0, 30.0), (30.0, 60.0), (60.0, 90.0), (90.0, 100.0)]


def test_phases_split_where_the_swarm_changes_regime():
    def hover_cruise_hover(t):
        return np.where(t < 20, 0.0, np.where(t < 60, 2 * (t - 20), 80.0))

    segs = mission_segments(_swarm(80.0, hover_cruise_hover), Mission(), mode="phase")
    assert [s.label for s in segs] == ["hover", "cruise", "hover"]
    assert segs[0].t_start == 0.0 and segs[-1].t_end == 80.0
    assert segs[1].t_start == pytest.approx(20.0, abs=2.0)
    assert segs[1].t_end == pytest.approx(60.0, abs=2.0)
    assert all(a.t_end == b.t_start for a, b in zip(segs, segs[1:], strict=False))


def test_phases_are_cut_at_veto_edges():
    def intruder(t):  # passes 0.2 m from uav1's track at t = 50 s
        return np.column_stack([2 * t, -0.2 - np.abs(t - 50.0), 0 * t + 5])

    mission = Mission(constraints=Constraints(min_separation_m=0.5))
    segs = mission_segments(_swarm(95.0, extra=intruder), mission, mode="phase")
    veto = [s for s in segs if s.label == "veto"]
    assert len(veto) == 1
    assert veto[0].t_start == pytest.approx(49.7, abs=0.3)
    assert [s.label for s in segs] == ["cruise", "veto", "cruise"]


def test_long_phases_are_split_and_bad_modes_rejected():
    segs = mission_segments(_swarm(300.0), Mission(), mode="phase")
    assert len(segs) == 3 and segs[-1].t_end == 300.0
    assert all(s.t_end - s.t_start <= 120.0 + 1e-9 for s in segs)
    with pytest.raises(InputError, match="unknown segment mode"):
        mission_segments(_swarm(30.0), Mission(), mode="bogus")
    with pytest.raises(InputError, match="window length"):
        mission_segments(_swarm(30.0), Mission(), mode="window", window_s=0)


def test_the_last_segment_holds_the_flights_last_sample_off_the_grid():
    """A log stamps in microseconds: its last sample lies past the checker's last grid step and between two
    milliseconds. The segments still cover the flight to it (a late sample's segment was cut empty, and its DSL
    failed with 'no samples in t_range')."""
    base = _swarm(14.0)
    late = SwarmTrajectory.from_columns(
        np.concatenate([np.tile(np.arange(0.0, 14.0 + 1e-9, DT), 3), [100.000456]]),
        np.concatenate([np.repeat(["uav1", "uav2", "uav3"], len(base.tracks["uav1"])), ["uav1"]]),
        np.vstack([np.vstack([tr.pos for tr in base.tracks.values()]), [[28.0, 0.0, 5.0]]]))
    for mode in ("phase", "window"):
        segs = mission_segments(late, Mission(), mode=mode)
        assert segs[0].t_start == 0.0 and segs[-1].t_end == 100.001
        last = late.window(segs[-1].t_start, segs[-1].t_end)
        assert last.tracks["uav1"].t[-1] == pytest.approx(100.000456)


def test_a_sliver_between_two_vetoes_joins_a_segment_with_samples():
    """A real ArduCopter crash log (10 Hz, stamps off the millisecond): a loss of attitude control vetoed until
    32.801053 s, a fall from the sample at 32.900252 s. The 0.1-s piece between the vetoes holds that sample only
    before its bounds are rounded to the millisecond (32.801..32.9): it was kept, and the flight's evaluation failed
    with 'no samples in t_range 32.801..32.9 s'. Every segment now holds samples and the vetoes stay segments."""
    t = np.concatenate([[0.0], np.arange(0.1, 34.85, DT) + 0.000252])  # the log's first stamp is its zero
    traj = SwarmTrajectory.from_columns(t, np.repeat(["uav1"], len(t)), np.column_stack([0 * t, 0 * t, 10 + 0 * t]))
    safety = SimpleNamespace(veto_intervals=[(31.300819, 32.801053), (t[329], t[-1])])  # the fall from a sample
    segs = mission_segments(traj, Mission(), mode="phase", safety=safety)
    for s in segs:
        assert len(traj.window(s.t_start, s.t_end).tracks["uav1"].t), s
    assert [s.label for s in segs][-2:] == ["veto", "veto"]
    assert (segs[-2].t_start, segs[-2].t_end, segs[-1].t_start, segs[-1].t_end) == (31.301, 32.9, 32.9, 34.801)
    assert all(a.t_end == b.t_start for a, b in zip(segs, segs[1:], strict=False))
