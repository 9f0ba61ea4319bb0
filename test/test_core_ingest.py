"""Ingest of messy samples: ordering, duplicates, NaN, gaps and silent vehicles are fixed and counted."""

import numpy as np
import pytest

from uav_debate_eval.core import InputError, StreamingSwarm, SwarmTrajectory
from uav_debate_eval.io.csv_io import read_csv, write_csv


def _line(uavs=("uav1", "uav2"), dt=0.1, n=50):
    t, ids, pos = [], [], []
    for k, u in enumerate(uavs):
        for i in range(n):
            t.append(i * dt)
            ids.append(u)
            pos.append([i * dt * 2.0, float(k), 1.0])
    return np.array(t), np.array(ids), np.array(pos)


def test_shuffled_duplicated_nan_rows_are_cleaned_and_counted():
    t, ids, pos = _line()
    rng = np.random.default_rng(3)
    perm = rng.permutation(len(t))
    t, ids, pos = t[perm], ids[perm], pos[perm]
    t = np.concatenate([t, t[:4]])
    ids = np.concatenate([ids, ids[:4]])
    pos = np.concatenate([pos, pos[:4]])
    pos[0, 2] = np.nan
    conflicting = pos[1].copy() + 1.0
    t = np.append(t, t[1])
    ids = np.append(ids, ids[1])
    pos = np.vstack([pos, conflicting])
    traj = SwarmTrajectory.from_columns(t, ids, pos)
    assert traj.uav_ids == ["uav1", "uav2"]
    assert traj.ingest.dropped == {"nan": 1, "duplicate": 3, "conflicting_duplicate": 1}
    assert traj.ingest.out_of_order > 0
    for tr in traj.tracks.values():
        assert np.all(np.diff(tr.t) > 0)
    # 100 distinct samples minus the NaN one (its duplicate survives as the only copy).
    assert traj.n_samples == 100
    np.testing.assert_allclose(traj.tracks["uav2"].vel[:, 0], 2.0, atol=1e-9)


def test_gap_and_silent_vehicle_are_reported():
    t, ids, pos = _line(n=100)
    keep = ~((ids == "uav1") & (t > 3.0) & (t < 4.0)) & ~((ids == "uav2") & (t > 8.0))
    traj = SwarmTrajectory.from_columns(t[keep], ids[keep], pos[keep])
    assert [(g.uav, round(g.t_start, 3), round(g.t_end, 3)) for g in traj.ingest.gaps] == [("uav1", 3.0, 4.0)]
    assert traj.ingest.silent == {"uav2": pytest.approx(8.0)}


def test_csv_round_trip_and_errors(tmp_path):
    t, ids, pos = _line()
    traj = SwarmTrajectory.from_columns(t, ids, pos)
    path = write_csv(traj, tmp_path / "a.csv")
    back = read_csv(path)
    assert back.uav_ids == traj.uav_ids
    np.testing.assert_allclose(back.tracks["uav1"].pos, traj.tracks["uav1"].pos)
    bad = tmp_path / "bad.csv"
    bad.write_text("t,uav_id,x,y\n0,a,1,2\n")
    with pytest.raises(InputError, match="missing required column"):
        read_csv(bad)
    messy = tmp_path / "messy.csv"
    messy.write_text("t,uav_id,x,y,z\n0,a,0,0,1\n0.1,a,abc,0,1\n0.2,a,0.2,0,1\n,a,1,1,1\n")
    got = read_csv(messy)
    assert got.n_samples == 2 and got.ingest.dropped == {"nan": 2}
    assert any("not numbers" in n for n in got.ingest.notes)


def test_streaming_buffers_are_bounded_and_reject_bad_samples():
    s = StreamingSwarm(capacity=100, clock_jump_s=1.0)
    for i in range(1000):
        assert s.add("a", i * 0.02, (i * 0.02, 0.0, 1.0))
    assert len(s.rings["a"]) == 100
    nbytes = s.nbytes
    for i in range(1000, 5000):
        s.add("a", i * 0.02, (i * 0.02, 0.0, 1.0))
    assert s.nbytes == nbytes
    assert not s.add("a", 99.5, (0, 0, 0))  # older than the newest, within the jump threshold
    assert not s.add("a", 100.0, (float("nan"), 0, 0))
    assert not s.add("a", 100.01, (0, 1e300, 0))  # as ingest: no position (the live flight is the recorded one)
    assert s.rejected == {"out_of_order": 1, "nan": 1, "out_of_range": 1}
    w = s.window(99.0, 200.0)
    assert w.tracks["a"].t[0] == pytest.approx(99.0) and len(w.tracks["a"]) == 50
    assert s.add("a", 3.0, (0, 0, 0))  # clock jumped back 97 s: reset, then accepted
    assert s.resets == 1 and len(s.rings["a"]) == 1


def test_streaming_holds_a_stamp_far_ahead_until_a_later_one_confirms_the_clock():
    s = StreamingSwarm(capacity=100)
    for i in range(10):
        assert s.add("a", 10.0 + i * 0.1, (0.0, 0.0, 1.0)) and s.add("b", 10.0 + i * 0.1, (1.0, 0.0, 1.0))
    assert not s.add("a", 9e8, (0.0, 0.0, 1.0))  # held: not stored, not (yet) counted
    assert s.rejected == {} and s.newest_t == pytest.approx(10.9)
    assert s.add("b", 11.0, (1.0, 0.0, 1.0))  # b goes on on the old clock: still held (a's next decides, or 1 s)
    assert s.add("a", 11.0, (0.0, 0.0, 1.0))  # a goes on on the old clock: the held stamp was a stray
    assert s.rejected == {"stray_stamp": 1} and s.resets == 0 and s.rings["a"].last_t == 11.0
    assert not s.add("a", 200.0, (0.0, 0.0, 1.0)) and not s.add("b", 200.0, (1.0, 0.0, 1.0))  # one instant
    assert s.add("a", 200.1, (0.0, 0.0, 1.0))  # a later stamp near it: the clock moved forward
    assert s.rings["a"].view()[-2:, 0].tolist() == [200.0, 200.1] and s.rings["b"].last_t == 200.0
    assert s.rejected == {"stray_stamp": 1} and s.resets == 0 and s.newest_t == pytest.approx(200.1)
    assert not s.add("b", 5e8, (1.0, 0.0, 1.0)) and not s.add("b", 9e8, (1.0, 0.0, 1.0))  # two clocks far ahead
    assert s.rejected == {"stray_stamp": 2}  # the first dropped, the second held
    for i in range(12):  # the stream goes on for more than clock_jump_s without b: the held one drops too
        s.add("a", 200.2 + i * 0.1, (0.0, 0.0, 1.0))
    assert s.rejected == {"stray_stamp": 3} and s.rings["b"].last_t == 200.0


def test_streaming_resets_when_a_vehicle_s_own_clock_goes_back_not_on_another_s_offset():
    s = StreamingSwarm(capacity=100)
    for i in range(10):
        assert s.add("a", 100.0 + i * 0.1, (0.0, 0.0, 1.0))
        assert s.add("d", 95.0 + i * 0.1, (1.0, 0.0, 1.0))  # a clock 5 s behind a's: kept, no reset
    assert s.resets == 0 and len(s.rings["a"]) == len(s.rings["d"]) == 10
    assert not s.add("d", 3.0, (1.0, 0.0, 1.0))  # d's own stamps went back 92 s: waits for another vehicle's
    assert s.resets == 0 and len(s.rings["d"]) == 10
    assert s.add("a", 8.0, (0.0, 0.0, 1.0))  # a's went back too: the stream restarted, d's sample starts it
    assert s.resets == 1 and len(s.rings["a"]) == 1 and len(s.rings["d"]) == 1 and s.rings["d"].last_t == 3.0
    assert [b[:2] for b in s.settled] == [("d", 3.0)] and s.rejected == {}


def test_one_vehicle_s_clock_restarting_alone_is_rejected_not_a_reset_of_the_swarm():
    """d's companion computer rebooted (its stamps from 3 s) while a flies on at 101 s: d's new stamps cannot be
    placed on the stream's clock. Before, d's first such pose reset every vehicle's buffer."""
    s = StreamingSwarm(capacity=100)
    for i in range(10):
        s.add("a", 100.0 + i * 0.1, (0.0, 0.0, 1.0))
        s.add("d", 100.0 + i * 0.1, (1.0, 0.0, 1.0))
    for i in range(5):
        assert not s.add("d", 3.0 + i * 0.1, (1.0, 0.0, 1.0))
        assert s.add("a", 101.0 + i * 0.1, (0.0, 0.0, 1.0))  # a on the old clock: d's restart was its own
    assert s.resets == 0 and len(s.rings["a"]) == 15 and s.rings["d"].last_t == pytest.approx(100.9)
    assert s.rejected == {"clock_back": 5} and s.clock_back["d"][0] == 5
    assert s.clock_back["d"][1] == pytest.approx(100.9 - 3.0)  # how far it went back when it restarted


def test_a_bag_loop_over_a_topic_per_vehicle_loses_no_pose_when_deliveries_interleave_at_the_loop():
    """a's first pose of the next run arrives before b's last of this one (a topic each): one vehicle going on is not
    yet "a's clock restarted alone"; c's going back too makes it a restart, and a's pose starts the run."""
    s = StreamingSwarm(capacity=100)
    for i in range(30):
        for u in "abc":
            s.add(u, 100.0 + i * 0.1, (0.0, 0.0, 1.0))
    assert not s.add("a", 100.0, (0.0, 0.0, 1.0))  # the loop: a waits
    assert s.add("b", 103.0, (0.0, 0.0, 1.0))  # b's last pose of the run, delivered late: one vote only
    assert s.add("c", 100.0, (0.0, 0.0, 1.0))  # c went back too: the bag looped
    assert s.resets == 1 and s.rejected == {} and [x[:2] for x in s.settled] == [("a", 100.0)]
    assert s.add("b", 100.0, (0.0, 0.0, 1.0)) and {u: len(r) for u, r in s.rings.items()} == {"a": 1, "b": 1, "c": 1}


def test_a_lone_vehicle_s_clock_going_back_restarts_at_once_and_alone_too_long_restarts_too():
    s = StreamingSwarm(capacity=100)
    for i in range(10):
        s.add("a", 100.0 + i * 0.1, (0.0, 0.0, 1.0))
    assert s.add("a", 3.0, (0.0, 0.0, 1.0)) and s.resets == 1  # no other vehicle to ask: a new run at once
    for i in range(10):
        s.add("b", 3.1 + i * 0.1, (2.0, 0.0, 1.0))  # b joins; a falls quiet
    assert not s.add("b", 0.5, (2.0, 0.0, 1.0))  # b's clock goes back and a says nothing
    assert s.add("b", 1.6, (2.0, 0.0, 1.0))  # more than clock_jump_s of b's new clock, a still quiet: a new run
    assert s.resets == 2 and s.rings["b"].last_t == 1.6 and len(s.rings["b"]) == 2 and not len(s.rings["a"])


def test_a_lone_pose_stamped_seconds_ahead_is_a_stray_and_a_stream_resuming_after_a_pause_is_kept():
    """A time-sync glitch put one pose of c 5 s ahead: held, then dropped as the others and c go on (before: kept,
    and c's next pose "jumped back" and reset the swarm). After a 3-s pause of the whole stream, the first pose waits
    only for the next vehicle's; a vehicle sampled every 2 s is never held."""
    s = StreamingSwarm(capacity=100)
    for i in range(10):
        for u in "abc":
            s.add(u, 100.0 + i * 0.1, (0.0, 0.0, 1.0))
    assert not s.add("c", 106.0, (0.0, 0.0, 1.0))
    for u in "abc":
        assert s.add(u, 101.0, (0.0, 0.0, 1.0))
    assert s.resets == 0 and s.rejected == {"stray_stamp": 1} and s.newest_t == 101.0
    assert not s.add("a", 104.0, (0.0, 0.0, 1.0))  # the stream paused 3 s: a's pose waits ...
    assert s.add("b", 104.0, (0.0, 0.0, 1.0))  # ... for b's, as far ahead: both kept
    assert s.rings["a"].last_t == 104.0 and [x[:2] for x in s.settled] == [("a", 104.0)]
    slow = StreamingSwarm(capacity=100)
    assert slow.add("g", 4.0, (0.0, 0.0, 1.0)) and not slow.add("g", 6.0, (0.0, 0.0, 1.0))  # its step not yet known
    assert slow.add("g", 8.0, (0.0, 0.0, 1.0)) and len(slow.settled) == 1  # a later stamp near it: both kept
    assert all(slow.add("g", 2.0 * i, (0.0, 0.0, 1.0)) for i in range(5, 9))  # every 2 s, its own step: at once
    assert slow.rejected == {} and len(slow.rings["g"]) == 7


def test_a_window_is_in_flight_time_of_the_given_origin():
    """A panel that joined late (first pose at 23 s) dates a segment on the clock of the node that cut it."""
    s = StreamingSwarm()
    for i in range(100):
        s.add("a", 23.0 + i * 0.1, (float(i), 0.0, 1.0))
    assert s.window(25.0, 30.0).tracks["a"].t[0] == pytest.approx(2.0)  # from its own first pose
    late = s.window(25.0, 30.0, origin=1.0)
    assert late.t0 == 1.0 and late.tracks["a"].t[0] == pytest.approx(24.0)
    assert late.tracks["a"].pos[0, 0] == pytest.approx(20.0)


def test_streaming_swarm_windows_while_another_thread_adds_vehicles():
    """`live` adds poses on the verifier's thread while segments are cut on the builder's: no torn reads,
    and no 'dictionary changed size during iteration' when a new vehicle appears mid-window."""
    import sys
    import threading

    s = StreamingSwarm(capacity=200)
    done = threading.Event()
    errors: list[BaseException] = []

    def add() -> None:
        try:
            for k in range(4000):
                s.add(f"u{k % 400}", 1.0 + k * 1e-3, (float(k), 0.0, 1.0))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            done.set()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over as often as possible
    thread = threading.Thread(target=add)
    thread.start()
    windows = 0
    try:
        while not done.is_set():
            w = s.window()
            windows += 1
            for tr in w.tracks.values():  # strictly increasing flight times; positions match their stream stamps
                assert (np.diff(tr.t) > 0).all()
                np.testing.assert_allclose(tr.pos[:, 0], np.round((tr.t + w.t0 - 1.0) * 1e3))
    finally:
        thread.join()
        sys.setswitchinterval(switch)
    assert not errors and windows > 0
    assert len(s.rings) == 400 and sum(len(r) for r in s.rings.values()) == 4000


def test_time_ordered_rows_with_repeated_stamps_keep_the_first_row_like_shuffled_ones():
    """Rows already in time order per vehicle skip the (vehicle, time) sort: repeated stamps still keep the first
    row, the same tracks as from the rows in another order of vehicles, and measured velocities are kept."""
    t, ids, pos = _line(("uav1", "uav2", "uav3"), n=40)
    order = np.lexsort((ids, t))  # time-major, as a recorder writes
    t, ids, pos = t[order], ids[order], pos[order]
    vel = np.tile([2.0, 0.0, 0.0], (len(t), 1))
    dup = np.flatnonzero((ids == "uav2") & (t == t[30]))[0]
    t2 = np.insert(t, [dup + 1, dup + 1], [t[dup], t[dup]])
    ids2 = np.insert(ids, [dup + 1, dup + 1], [ids[dup], ids[dup]])
    pos2 = np.insert(pos, [dup + 1, dup + 1], [pos[dup], pos[dup] + 5.0], axis=0)
    vel2 = np.insert(vel, [dup + 1, dup + 1], [vel[dup], vel[dup]], axis=0)
    ordered = SwarmTrajectory.from_columns(t2, ids2, pos2, vel=vel2)
    assert ordered.ingest.out_of_order == 0
    assert ordered.ingest.dropped == {"duplicate": 1, "conflicting_duplicate": 1}
    by_vehicle = np.argsort(ids2, kind="stable")  # vehicle-major: the same rows, still time-ordered per vehicle
    other = SwarmTrajectory.from_columns(t2[by_vehicle], ids2[by_vehicle], pos2[by_vehicle], vel=vel2[by_vehicle])
    for u in ("uav1", "uav2", "uav3"):
        a, b = ordered.tracks[u], other.tracks[u]
        assert len(a) == 40 and np.all(np.diff(a.t) > 0)
        np.testing.assert_array_equal(a.t, b.t)
        np.testing.assert_array_equal(a.pos, b.pos)
        np.testing.assert_array_equal(a.vel, np.tile([2.0, 0.0, 0.0], (40, 1)))
        assert not a.vel_derived
    kept = ordered.tracks["uav2"]
    np.testing.assert_array_equal(kept.pos[np.flatnonzero(kept.t == t[dup])[0]], pos[dup])  # the first of the three


def test_sample_periods_of_a_swarms_tracks_taken_together_equal_each_tracks_median():
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("grid", seed=0, n_uavs=70, duration_s=40.0).traj
    tracks = dict(traj.tracks)
    tracks["uav4"] = tracks["uav4"].select(np.r_[0:100, 101:300, 305:len(tracks["uav4"])])  # its own stamps
    traj = SwarmTrajectory(tracks, traj.ingest)
    for part in (traj, traj.window(3.05, 27.33), traj.window(10.0, 10.35)):
        fresh = [tr.select(slice(None)) for tr in part.tracks.values()]  # nothing cached
        expected = [float(np.median(np.diff(tr.t))) if len(tr) > 1 else 0.0 for tr in fresh]
        assert part.sample_period == float(np.median([p for p, tr in zip(expected, fresh, strict=True)
                                                        if len(tr) > 1]))
        assert [tr.sample_period for tr in part.tracks.values()] == expected


def test_stray_stamps_are_left_out_and_found_where_they_were_recorded():
    """A corrupted clock value (a flipped bit of a log's counter: days off) is not data: it is dropped, counted and
    found at the flight time of the row recorded before it; the flight's origin and span are the real samples'."""
    t, ids, pos = _line(n=100)  # 10 s of two vehicles, uav1's rows first
    start = 1.7e9  # a unix-clock recording
    t = t + start
    t_late, t_early = t.copy(), t.copy()
    t_late[30] += 2.7e8        # uav1's 31st sample, days after the flight
    t_early[100 + 40] -= 5e5   # uav2's 41st sample, days before it (it would become flight time 0)
    for stamps, uav, where in ((t_late, "uav1", 2.9), (t_early, "uav2", 3.9)):
        traj = SwarmTrajectory.from_columns(stamps, ids, pos)
        assert traj.t0 == pytest.approx(start)
        assert traj.duration == pytest.approx(9.9)
        assert traj.ingest.dropped == {"stray_stamp": 1}
        assert traj.n_samples == 199
        (found,) = traj.ingest.findings
        assert (found.kind, found.uavs) == ("stray_stamp", [uav])
        assert found.t_start == pytest.approx(where) and found.t_end == pytest.approx(where)
        assert not traj.ingest.gaps


def test_a_recording_keeps_every_part_that_holds_data_and_its_pauses():
    """Two sessions two hours apart in one file are both data (each holds far more than 1% of the rows); a vehicle
    resuming for 3 s (3% of the rows) 40 minutes after the flight is data too; and a sample alone 50 s after a 10-s
    flight is a gap (a pause shorter than STRAY_MIN_GAP_S), not a stray stamp."""
    t, ids, pos = _line(n=100)
    two = np.concatenate([t, t + 7200.0])
    traj = SwarmTrajectory.from_columns(two, np.concatenate([ids, ids]), np.concatenate([pos, pos + 1.0]))
    assert traj.duration == pytest.approx(7209.9)
    assert "stray_stamp" not in traj.ingest.dropped and not traj.ingest.findings
    resumed = np.concatenate([t, 2400.0 + t[:30]])
    traj = SwarmTrajectory.from_columns(resumed, np.concatenate([ids, ids[:30]]), np.concatenate([pos, pos[:30]]))
    assert traj.duration == pytest.approx(2402.9) and "stray_stamp" not in traj.ingest.dropped
    lone = t.copy()
    lone[-1] = 60.0  # the last row, 50 s on
    traj = SwarmTrajectory.from_columns(lone, ids, pos)
    assert traj.duration == pytest.approx(60.0)
    assert "stray_stamp" not in traj.ingest.dropped
    assert traj.ingest.gaps
    lone = t.copy()
    lone[5] = 60.0  # in the middle of the recording, its clock going on after it: a stray, as live drops it
    traj = SwarmTrajectory.from_columns(lone, ids, pos)
    assert traj.duration == pytest.approx(9.9) and traj.ingest.dropped == {"stray_stamp": 1}


def test_a_coordinate_no_flight_reaches_is_dropped_and_counted_apart_from_nan():
    """A flipped exponent bit of a logged float reads 1e300 m (its square overflowed into warnings and inf norms):
    beyond MAX_COORD_M a row is no position, dropped as out_of_range; NaN and inf rows stay counted as nan."""
    import warnings

    t, ids, pos = _line()
    pos[10, 0], pos[20, 2], pos[30, 1], pos[40, 0] = 1e300, -2e9, np.nan, np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = SwarmTrajectory.from_columns(t, ids, pos)
    assert traj.ingest.dropped == {"nan": 2, "out_of_range": 2}
    assert traj.n_samples == 96 and max(float(np.abs(tr.pos).max()) for tr in traj.tracks.values()) < 100.0
    assert SwarmTrajectory.from_columns(*_line()).ingest.dropped == {}


def test_a_float64_velocity_of_1e300_is_a_velocity_spike_without_overflow():
    """A CSV or bag velocity (float64) whose top exponent bit flipped reads 1e300 m/s; its square overflowed. The
    spike check compares speeds clipped far beyond flight and reports the recorded value."""
    import warnings

    from uav_debate_eval.core.mission import Mission
    from uav_debate_eval.quality.assessment import assess

    t, ids, pos = _line(uavs=("uav1",), n=100)
    vel = np.tile([2.0, 0.0, 0.0], (len(t), 1))
    vel[50, 1] = -1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quality = assess(SwarmTrajectory.from_columns(t, ids, pos, vel=vel), Mission())
    (found,) = [f for f in quality.findings if f.kind == "velocity_spike"]
    assert found.t_start == pytest.approx(5.0) and found.values["recorded_mps"] == pytest.approx(1e300)
    assert quality.traj.tracks["uav1"].vel[50] == pytest.approx([2.0, 0.0, 0.0])


def test_two_time_sync_glitches_as_far_ahead_are_both_strays():
    """A vehicle's pose stamped 5 s ahead twice, 10 s apart, its clock going on between: not a clock ahead (that
    vehicle reported on the stream's clock between the two), both dropped."""
    s = StreamingSwarm(capacity=1000)
    for i in range(300):
        for u in "ab":
            ahead = 5.0 if u == "b" and i in (50, 150) else 0.0
            s.add(u, 100.0 + i * 0.1 + ahead, (0.0, 0.0, 1.0))
    assert s.rejected == {"stray_stamp": 2} and s.resets == 0 and len(s.rings["b"]) == 298


def test_a_vehicle_whose_clock_restarted_alone_and_caught_up_is_asked_anew_at_the_next_jump():
    """b's clock restarts alone (its samples rejected at once after the vote), then runs past its old newest stamp
    (kept again). When the bag then loops, b's first pose of the next run is a jump like any other's, told by the
    others (a restart), not rejected at once as b's clock restarting alone again."""
    s = StreamingSwarm(capacity=1000)
    for i in range(20):
        for u in "abc":
            s.add(u, 100.0 + i * 0.1, (0.0, 0.0, 1.0))
    for i in range(50):  # b from 98 s (2 s back) while a and c fly on from 102 s
        for u in "abc":
            s.add(u, round((98.0 if u == "b" else 102.0) + i * 0.1, 3), (0.0, 0.0, 1.0))
    # b's 98.0-100.8 s are behind its clock by more than a second: 29 rejected as its clock restarted alone;
    # 100.9-101.9 s out of order; from 102.0 s on kept: its clock caught up
    assert s.clock_back["b"][0] == 29 and s.rejected["out_of_order"] + s.rejected["duplicate"] == 11
    assert s.rings["b"].last_t == pytest.approx(102.9) and s.resets == 0
    assert not s.add("b", 100.0, (0.0, 0.0, 1.0))  # the loop, b's pose first: it waits
    assert s.add("a", 106.9, (0.0, 0.0, 1.0)) is False  # a's last of the run, delivered late (a duplicate)
    assert s.add("c", 100.0, (0.0, 0.0, 1.0))  # c went back too: the bag looped
    assert s.resets == 1 and [x[:2] for x in s.settled] == [("b", 100.0)] and s.clock_back["b"][0] == 29


def test_an_events_dict_is_asdicts_without_its_recursion():
    """Event.to_dict builds its dict by hand (asdict's recursion cost a show's ten thousand log events 0.3 s): the
    same keys in the same order, `extra` a copy (left out when empty)."""
    from dataclasses import asdict

    from uav_debate_eval.core.records import Event

    full = Event("EVENT[1]", "flight_mode", 1.5, ["a"], 2.0, 3.0, "m", {"label": "LAND", "nested": {"x": [1, 2]}})
    d = full.to_dict()
    assert list(d.items()) == list(asdict(full).items())
    d["extra"]["nested"]["x"].append(3)
    assert full.extra["nested"]["x"] == [1, 2]
    bare = asdict(Event("EVENT[2]", "arming", 0.0, ["b"]))
    bare.pop("extra")
    assert list(Event("EVENT[2]", "arming", 0.0, ["b"]).to_dict().items()) == list(bare.items())
