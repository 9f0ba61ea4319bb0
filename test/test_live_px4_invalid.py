"""PX4 estimates flagged invalid, live and recorded: the live input does not pass them to the verifier, yet the live
flight report holds them as the bag reader does (io.px4.LiveFrames.invalid_rows -> io.live_tape.with_invalid_rows),
so `evaluate` of the session bag and the live flight find the same estimator_invalid spans on the same samples."""

from __future__ import annotations

import numpy as np
import pytest
from px4_bags import EPOCH_S, RATE_HZ, SPAWN, flight

from uav_debate_eval.io import px4
from uav_debate_eval.io.live_tape import tape_trajectory, with_invalid_rows
from uav_debate_eval.io.rosbag.px4 import shipped_store
from uav_debate_eval.io.rosbag.reader import read_bag
from uav_debate_eval.io.rosbag_record import SessionBag
from uav_debate_eval.sim import px4_shape

#: px4_0's estimator: not valid (and no global reference) for its first seconds, then GPS lost in flight (the
#: barometer keeps its altitude valid); px4_2's velocity not valid in height once (v_z_valid false)
BOOT_S = 2.5
GPS_LOST = (9.0, 12.0)


def _messages() -> list[tuple[int, str, object]]:
    """(receive ns, vehicle, message) in receive order, every vehicle's vehicle_local_position."""
    make = px4_shape.bag_maker(shipped_store("v1.16"))
    t, pos, vel = flight()
    rows = []
    for k, inst in enumerate(px4_shape.instances(list(SPAWN), SPAWN)):
        for i, ti in enumerate(t[t < 20.0]):
            msg = px4_shape.local_position(make, inst, ti, pos[inst.uav][i], vel[inst.uav][i])
            if inst.uav == "px4_0" and ti < BOOT_S:
                msg.xy_valid = msg.z_valid = msg.xy_global = msg.z_global = False
                msg.ref_lat = msg.ref_lon = msg.ref_alt = 0.0
            elif inst.uav == "px4_0" and GPS_LOST[0] <= ti <= GPS_LOST[1]:
                msg.xy_valid = msg.v_xy_valid = False
            elif inst.uav == "px4_2" and 6.0 <= ti < 6.3:
                msg.z_valid = msg.v_z_valid = False
            rows.append((int((EPOCH_S + ti + 0.002 + 0.0004 * k) * 1e9), inst.uav, msg))
    return sorted(rows, key=lambda r: r[0])


def _live(messages: list[tuple[int, str, object]]):
    """The flight as the live session's report reads it: the verifier's samples (the tape) and the invalid ones."""
    frames = px4.LiveFrames()
    names = sorted(SPAWN)
    taped = []
    for ns, uav, msg in messages:
        sample = frames.local_position(uav, ns * 1e-9, msg)
        if sample is not None:
            t, p, v = sample
            taped.append((names.index(uav), t, *p, *(v if v is not None else (np.nan,) * 3)))
    data = np.array(taped)
    columns, validity = with_invalid_rows((data, np.asarray(names, dtype=object)[data[:, 0].astype(int)]),
                                          frames.invalid_rows)
    return frames, tape_trajectory(columns, validity=validity)


def test_live_flight_holds_the_invalid_estimates_as_the_session_bag_does(tmp_path):
    messages = _messages()
    store = shipped_store("v1.16")
    bag = SessionBag(tmp_path / "rosbag2")
    for ns, uav, msg in messages:
        bag.write(f"/{uav}/fmu/out/vehicle_local_position", px4.LOCAL_POSITION,
                  store.serialize_cdr(msg, px4.LOCAL_POSITION), ns)
    bag.close()
    recorded = read_bag(tmp_path / "rosbag2")
    frames, live = _live(messages)
    assert not frames.held_invalid, "px4_0's boot samples placed once it was"
    assert live.uav_ids == recorded.uav_ids == sorted(SPAWN)
    for u in sorted(SPAWN):
        a, b = live.tracks[u], recorded.tracks[u]
        assert len(a) == len(b), u
        assert a.t + live.t0 == pytest.approx(b.t + recorded.t0, abs=1e-6), u
        assert a.pos == pytest.approx(b.pos, abs=1e-5), u  # (the origins through other float steps: um)
        for flags in ("est_valid", "est_z_valid"):
            x, y = getattr(a, flags), getattr(b, flags)
            assert (x is None) == (y is None) and (x is None or (x == y).all()), (u, flags)
    zero = live.tracks["px4_0"]
    lost = ~zero.est_valid
    assert lost.sum() == pytest.approx((BOOT_S - 1.0 + GPS_LOST[1] - GPS_LOST[0]) * RATE_HZ + 1, abs=1), \
        "the boot samples after the clock's first second, and the GPS loss"
    assert zero.est_z_valid[lost].sum() == pytest.approx((GPS_LOST[1] - GPS_LOST[0]) * RATE_HZ + 1, abs=1), \
        "over the GPS loss the altitude stays valid"
    assert live.tracks["px4_1"].est_valid is None, "a vehicle always valid carries no flags"


def test_invalid_rows_go_among_the_taped_ones_in_time_order():
    data = np.array([[0, 1.0, 0, 0, 0, 0, 0, 0], [1, 1.05, 5, 0, 0, 0, 0, 0], [0, 1.3, 1, 0, 0, 0, 0, 0]], float)
    ids = np.array(["b", "a", "b"], dtype=object)
    (rows, names), (valid, altitude) = with_invalid_rows(
        (data, ids), {"b": [(1.1, 9, 9, 9, np.nan, np.nan, np.nan, 1.0), (1.2, 9, 9, 9, 0, 0, 0, 0.0)],
                      "c": [(0.5, 1, 1, 1, 0, 0, 0, 0.0)]})
    assert [(n, t) for n, t in zip(names.tolist(), rows[:, 1].tolist(), strict=True)] == [
        ("a", 1.05), ("b", 1.0), ("b", 1.1), ("b", 1.2), ("b", 1.3), ("c", 0.5)]
    assert valid.tolist() == [True, True, False, False, True, False]
    assert altitude.tolist() == [True, True, True, False, True, False]
    assert with_invalid_rows((data, ids), {"b": []}) == ((data, ids), None)
    traj = tape_trajectory((rows, names), validity=(valid, altitude))
    assert traj.ingest.out_of_order == 0 and not any(traj.ingest.dropped.values())
    assert traj.tracks["b"].est_valid.tolist() == [True, False, False, True]
    assert traj.tracks["a"].est_valid is None


def test_invalid_samples_before_placement_are_held_within_a_bound(monkeypatch):
    """A vehicle that cannot be placed yet (no reference, no spawn offset) holds its invalid samples, at most
    MAX_HELD, and places them with its first placed sample."""
    from types import SimpleNamespace

    monkeypatch.setattr(px4, "MAX_HELD", 3)
    frames = px4.LiveFrames(clock=px4.BootClock(warmup_s=0.0))
    msg = SimpleNamespace(xy_valid=False, z_valid=False, xy_global=False, z_global=False, ref_lat=0.0, ref_lon=0.0,
                          ref_alt=0.0, timestamp=0, timestamp_sample=0, x=1.0, y=2.0, z=-3.0, vx=0.0, vy=0.0, vz=0.0)
    for i in range(5):
        msg.timestamp_sample = 100_000 * (i + 1)
        assert frames.local_position("px4_4", 10.0 + 0.1 * i, msg) is None
    assert len(frames.held_invalid["px4_4"]) == 3 and not frames.invalid_rows
    inst = px4_shape.instances(["px4_4"], {"px4_4": np.zeros(3)})[0]
    lat, lon, alt = inst.ref
    msg.xy_valid = msg.z_valid = msg.xy_global = msg.z_global = True
    msg.ref_lat, msg.ref_lon, msg.ref_alt, msg.timestamp_sample = lat, lon, alt, 600_000
    assert frames.local_position("px4_4", 10.5, msg)[1] == pytest.approx((2.0, 1.0, 3.0))
    rows = frames.invalid_arrays()["px4_4"]
    assert rows[:, 0] == pytest.approx([10.0, 10.1, 10.2]) and rows[0, 1:4] == pytest.approx((2.0, 1.0, 3.0))
    assert not frames.held_invalid


def test_the_verifiers_input_keeps_no_invalid_estimate():
    """Only the panel's input keeps the invalid estimates (for the flight report): the verifier's would grow for as
    long as an estimate stays invalid (an hour of one vehicle at 100 Hz: ~23 MB kept flat), for nothing."""
    from types import SimpleNamespace

    frames = px4.LiveFrames(clock=px4.BootClock(warmup_s=0.0), spawn={"px4_4": (0.0, 0.0, 0.0)}, keep_invalid=False)
    msg = SimpleNamespace(xy_valid=False, z_valid=True, xy_global=False, z_global=False, ref_lat=0.0, ref_lon=0.0,
                          ref_alt=0.0, timestamp=0, timestamp_sample=100_000, x=1.0, y=2.0, z=-3.0, vx=0.0, vy=0.0,
                          vz=0.0)
    assert frames.local_position("px4_4", 10.0, msg) is None and frames.invalid == {"px4_4"}
    assert not frames.invalid_rows and not frames.held_invalid and frames.invalid_arrays() == {}
