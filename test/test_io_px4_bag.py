"""rosbag2 recordings of a PX4 swarm over ROS 2 (issue 34): px4_msgs (with or without the bag's embedded
definitions, .mcap and .db3) and Gazebo's TFMessage evaluate to exactly the injected near miss. Three vehicles
spawned 6 m apart, each with its own EKF origin and boot clock: merged naively they would all start at (0, 0)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from px4_bags import EPOCH_S, NEAR_MISS, SPAWN, flight, write_gazebo_bag, write_mission, write_px4_bag

from uav_debate_eval.cli import main
from uav_debate_eval.io import px4
from uav_debate_eval.io.rosbag.reader import read_bag


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("px4_bags")


def evaluate(bag: Path, mission: Path, out: Path) -> tuple[int, dict]:
    rc = main(["evaluate", str(bag), "--mission", str(mission), "--out", str(out), "--llm", "rules", "--quiet"])
    return rc, json.loads((out / "report.json").read_text())


#: The smallest transport delay of px4_bags' receive times: each vehicle's clock offset is off by it.
MIN_DELAY_S = 0.002


def flight_time_of_zero(t0: float | None) -> float:
    """The flight time (px4_bags' clock) at the report's t = 0: PX4 vehicles start after their first second of
    messages (io.px4.BootClock's warm-up), Gazebo's TFMessage at once (t0 None)."""
    return 0.0 if t0 is None else t0 - EPOCH_S - MIN_DELAY_S


def assert_only_the_near_miss(report: dict, pair: set[str], px4_clock: bool = True) -> None:
    violations = report["safety"]["violations"]
    assert [v["constraint"] for v in violations] == ["min_separation"], violations
    v = violations[0]
    assert set(v["uavs"]) == pair
    start = flight_time_of_zero(report["mission"]["t0"] if px4_clock else None)
    assert start == pytest.approx(1.0 if px4_clock else 0.0, abs=0.06)
    assert v["t_start"] + start == pytest.approx(NEAR_MISS[0], abs=0.15)
    assert v["t_end"] + start == pytest.approx(NEAR_MISS[1], abs=0.15)
    assert v["worst_value"] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("storage,embed", [("mcap", True), ("sqlite3", True), ("sqlite3", False)])
def test_px4_local_position_bag_gives_exactly_the_near_miss(root, storage, embed):
    bag = write_px4_bag(root / f"lp_{storage}_{embed}", storage=storage, embed=embed)
    rc, report = evaluate(bag, write_mission(root), root / f"out_{storage}_{embed}")
    assert rc == 3
    assert_only_the_near_miss(report, {"px4_1", "px4_2"})


def test_vehicles_placed_at_their_origins_on_one_clock(root):
    traj = read_bag(write_px4_bag(root / "placed"))
    t, pos, _ = flight()
    assert traj.uav_ids == ["px4_0", "px4_1", "px4_2"]
    start = flight_time_of_zero(traj.t0)
    for uav, tr in traj.tracks.items():
        # every instance booted at another time; on one clock their samples line up with the flight's
        assert tr.t[0] == pytest.approx(0.0, abs=0.005)
        truth = np.column_stack([np.interp(tr.t + start, t, pos[uav][:, k]) for k in range(3)])
        assert np.abs(tr.pos - truth).max() < 0.02, uav
    start = {u: tr.pos[0] for u, tr in traj.tracks.items()}
    assert np.linalg.norm(start["px4_1"] - start["px4_0"]) == pytest.approx(6.0, abs=0.02)
    assert any(px4.CLOCK_NOTE in n for n in traj.ingest.notes)


def test_vehicle_status_arming_and_modes(root):
    traj = read_bag(write_px4_bag(root / "status"))
    start = flight_time_of_zero(traj.t0)
    events = [(e.type, e.uavs[0], e.extra["label"], round(e.t + start, 1)) for e in traj.ingest.log_events]
    assert ("autopilot_event", "px4_2", "armed", 3.0) in events
    assert ("flight_mode", "px4_1", "mode=AUTO_TAKEOFF", 4.0) in events
    assert ("flight_mode", "px4_0", "mode=OFFBOARD", 10.0) in events
    assert any("vehicle type rotary wing" in n for n in traj.ingest.notes)
    assert traj.ingest.autopilot["px4_1"] == {"vehicle_class": "multirotor", "firmware": "PX4"}
    # the land detector, as the ULog reader reads it: armed on the pad (3-4 s) is parked (safety.parked)
    landing = [(u, label, t, bool(e.extra.get("initial"))) for e, (_, u, label, t) in zip(traj.ingest.log_events,
                                                                                        events, strict=True)
               if e.extra.get("source") == "vehicle_land_detected"]
    assert landing == [(u, label, t, first) for u in ("px4_0", "px4_1", "px4_2")
                       for label, t, first in (("landed", 1.0, True), ("airborne", 4.0, False))]


def test_odometry_placed_by_global_position(root):
    bag = write_px4_bag(root / "odom", kind="odometry")
    rc, report = evaluate(bag, write_mission(root), root / "out_odom")
    assert rc == 3
    assert_only_the_near_miss(report, {"px4_1", "px4_2"})


def test_without_reference_spawn_offsets_from_the_mission(root):
    bag = write_px4_bag(root / "noref", with_ref=False)
    frames = "frames:\n" + "".join(f"  {u}: {{origin: [{s[0]}, {s[1]}, {s[2]}]}}\n" for u, s in SPAWN.items())
    folder = root / "noref_mission"
    folder.mkdir()
    rc, report = evaluate(bag, write_mission(folder, frames), root / "out_noref")
    assert rc == 3
    assert_only_the_near_miss(report, {"px4_1", "px4_2"})


def test_without_reference_or_spawn_offsets_no_false_near_miss(root):
    """Each local frame starts at its own origin: separation is not evaluable, not violated at take-off."""
    bag = write_px4_bag(root / "noref2", with_ref=False)
    rc, report = evaluate(bag, write_mission(root), root / "out_noref2")
    assert not [v for v in report["safety"]["violations"] if v["constraint"] == "min_separation"]
    kinds = {f["kind"] for f in report["data_quality"]["findings"]}
    assert "frames_misaligned" in kinds
    assert rc in (0, 4)


def test_older_px4_msgs_layout_decodes_without_definitions(root):
    """A v1.15 firmware's VehicleLocalPosition (another layout) decodes with the shipped v1.15 definitions."""
    bag = write_px4_bag(root / "v115", storage="sqlite3", embed=False, version="v1.15")
    traj = read_bag(bag)
    assert traj.uav_ids == ["px4_0", "px4_1", "px4_2"]
    assert traj.tracks["px4_2"].pos[0] == pytest.approx([12.0, 0.0, 0.0], abs=0.02)
    assert len([e for e in traj.ingest.log_events if e.extra.get("source") == "vehicle_land_detected"]) == 6


def test_gazebo_tf_bag_selects_vehicles_by_model_name(root):
    bag = write_gazebo_bag(root / "gz.mcap")
    folder = root / "gz_mission"
    folder.mkdir()
    mission = write_mission(folder, 'vehicles: ["x500_*"]\n')
    rc, report = evaluate(bag, mission, root / "out_gz")
    assert rc == 3
    assert_only_the_near_miss(report, {"x500_1", "x500_2"}, px4_clock=False)
    chosen = {v["uav"]: v["vehicle"] for v in report["ingest"]["vehicles"]}
    assert chosen == {"box": False, "x500_0": True, "x500_1": True, "x500_2": True}


def test_px4_topic_names():
    assert px4.px4_topic("/fmu/out/vehicle_local_position") == ("px4_0", "vehicle_local_position")
    assert px4.px4_topic("/px4_3/fmu/out/vehicle_odometry") == ("px4_3", "vehicle_odometry")
    assert px4.px4_topic("/px4_1/fmu/out/vehicle_local_position_v1") == ("px4_1", "vehicle_local_position")
    assert px4.px4_topic("/px4_1/fmu/in/vehicle_command") is None
    assert sorted(["px4_10", "px4_2"], key=px4.natural_key) == ["px4_2", "px4_10"]


def test_odometry_body_velocity_rotated_to_ned():
    yaw90 = np.array([[np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4)]])  # facing east
    vel = px4.odometry_velocity_ned(np.array([px4.FRAME_BODY_FRD]), yaw90, np.array([[1.0, 0.0, 0.0]]))
    assert vel[0] == pytest.approx([0.0, 1.0, 0.0], abs=1e-9)


def test_live_frames_place_and_clock_like_the_bag():
    """The live conversion: origins from ref_lat/lon, one clock from the first receive time, held until placed."""
    from types import SimpleNamespace

    from uav_debate_eval.sim import px4_shape

    insts = px4_shape.instances(list(SPAWN), SPAWN)
    frames = px4.LiveFrames()
    got = {}
    for inst in insts:
        lat, lon, alt = inst.ref
        msg = SimpleNamespace(xy_valid=True, z_valid=True, xy_global=True, z_global=True, ref_lat=lat, ref_lon=lon,
                              ref_alt=alt, timestamp=inst.boot_us(1.0), timestamp_sample=inst.boot_us(1.0),
                              x=0.0, y=0.0, z=-1.0, vx=0.0, vy=0.0, vz=0.0)
        assert frames.local_position(inst.uav, 100.0 + 1.0, msg) is None, "the first second sets the clock"
        msg.timestamp = msg.timestamp_sample = inst.boot_us(2.1)
        got[inst.uav] = frames.local_position(inst.uav, 100.0 + 2.1, msg)
    assert got["px4_2"][1] == pytest.approx((12.0, 0.0, 1.0), abs=0.01)
    assert {round(s[0], 6) for s in got.values()} == {102.1}
    no_ref = SimpleNamespace(xy_valid=True, z_valid=True, xy_global=False, z_global=False, ref_lat=0.0, ref_lon=0.0,
                             ref_alt=0.0, timestamp=5, timestamp_sample=5, x=0.0, y=0.0, z=0.0, vx=0.0, vy=0.0,
                             vz=0.0)
    frames.local_position("px4_9", 3.0, no_ref)
    no_ref.timestamp_sample = 2_000_005
    assert frames.local_position("px4_9", 5.0, no_ref) is None and frames.unplaced == {"px4_9"}
    spawned = px4.LiveFrames(spawn={"px4_9": (3.0, 4.0, 0.0)})
    spawned.local_position("px4_9", 3.0, no_ref)
    no_ref.timestamp_sample = 4_000_005
    assert spawned.local_position("px4_9", 5.0, no_ref)[1] == pytest.approx((3.0, 4.0, 0.0))
    no_ref.xy_valid, no_ref.timestamp_sample = False, 4_100_005  # the estimate lost: named, so the node says why
    assert spawned.local_position("px4_9", 5.1, no_ref) is None and spawned.invalid == {"px4_9"}
    no_ref.xy_valid, no_ref.timestamp_sample = True, 4_200_005
    assert spawned.local_position("px4_9", 5.2, no_ref) is not None and not spawned.invalid


def _stalled_stream(seed: int = 4) -> tuple[np.ndarray, np.ndarray, float]:
    """One instance at 20 Hz on its boot clock (true offset 1000 s to the receive clock), received 1-4 ms late,
    except its first 2.5 s, which arrive in one burst 2.5 s late (a busy executor at start: the first message too),
    and a reboot at 30 s (the boot clock starts again from 5 s)."""
    rng = np.random.default_rng(seed)
    sample_s = np.arange(0.0, 40.0, 0.05) + 20.0
    true = np.full(len(sample_s), 1000.0)
    reboot = sample_s >= 50.0
    sample_s[reboot] -= 45.0
    true[reboot] += 45.0
    received = sample_s + true + rng.uniform(0.001, 0.004, len(sample_s))
    burst = (sample_s < 22.5) & ~reboot
    received[burst] = 1000.0 + 22.5 + np.arange(burst.sum()) * 1e-5
    return np.round(sample_s * 1e6), np.round(received * 1e9).astype(np.int64), 1000.0


def test_boot_clock_live_and_recorded_give_the_same_stamps():
    """The live rule (message by message) and the recorded one (the bag's receive times) give the same stamps; a
    late burst at the start does not push the vehicle late (the smallest delay wins) and its squeezed samples are
    left out; a reboot starts afresh."""
    sample_us, received_ns, true = _stalled_stream()
    clock = px4.BootClock()
    live = [clock.to_receive("px4_0", float(s), int(r) * 1e-9) for s, r in zip(sample_us, received_ns, strict=True)]
    stamps, keep, _ = px4.receive_stamps(sample_us, received_ns)
    assert keep.tolist() == [t is not None for t in live]
    assert np.array_equal(stamps[keep], np.array([t for t in live if t is not None]))
    kept_s, t = sample_us[keep] * 1e-6, stamps[keep]
    before_reboot = kept_s >= 20.0
    assert np.all(np.diff(t[before_reboot]) > 0.025)
    assert not keep[:50].any(), "the first second (the late burst) only sets the clock"
    error = t[before_reboot] - (kept_s[before_reboot] + true)
    assert error.min() >= 0.0 and error.max() < 0.0045, "the burst (2.5 s late) set no lasting offset"
    error = t[~before_reboot] - (kept_s[~before_reboot] + true + 45.0)
    assert np.abs(error).max() < 0.0045, "after the reboot the offset starts afresh"


@pytest.mark.parametrize("with_definitions", [True, False])
def test_session_bag_of_received_messages_reads_back(tmp_path, with_definitions):
    """io.rosbag_record.SessionBag (what `live` writes): the messages' bytes at their receive times, with the
    definitions of the installed package's .msg files or none (the reader then takes the shipped px4_msgs)."""
    from uav_debate_eval.io.rosbag.px4 import MSGS, shipped_store
    from uav_debate_eval.io.rosbag_record import SessionBag, installed_definitions
    from uav_debate_eval.sim import px4_shape

    store = shipped_store("v1.16")
    make = px4_shape.bag_maker(store)
    # a package installed as colcon/rosidl do: <prefix>/lib/python3.x/site-packages/px4_msgs, <prefix>/share/px4_msgs
    init = tmp_path / "prefix" / "lib" / "python3.11" / "site-packages" / "px4_msgs" / "__init__.py"
    init.parent.mkdir(parents=True)
    init.touch()
    (tmp_path / "prefix" / "share" / "px4_msgs").mkdir(parents=True)
    (tmp_path / "prefix" / "share" / "px4_msgs" / "msg").symlink_to(MSGS / "v1.16" / "msg")
    definitions = installed_definitions(init, px4_shape.LOCAL_POSITION) if with_definitions else {}
    assert (px4_shape.LOCAL_POSITION in definitions) == with_definitions
    t, pos, vel = flight()
    bag = SessionBag(tmp_path / "rosbag2")
    for i, ti in enumerate(t[::4]):
        for inst in px4_shape.instances(list(SPAWN), SPAWN):
            msg = px4_shape.local_position(make, inst, ti, pos[inst.uav][4 * i], vel[inst.uav][4 * i])
            bag.write(inst.topic("vehicle_local_position"), px4_shape.LOCAL_POSITION,
                      store.serialize_cdr(msg, px4_shape.LOCAL_POSITION), int((EPOCH_S + ti + 0.003) * 1e9),
                      definitions)
    assert bag.close() == tmp_path / "rosbag2" and bag.messages == 3 * len(t[::4])
    bag.write("/late", px4_shape.LOCAL_POSITION, b"", 0)  # after close: dropped, not an error
    traj = read_bag(tmp_path / "rosbag2")
    assert traj.uav_ids == ["px4_0", "px4_1", "px4_2"]
    assert traj.tracks["px4_2"].pos[0] - traj.tracks["px4_0"].pos[0] == pytest.approx([12.0, 0.0, 0.0], abs=0.02)


def test_live_spawn_offsets_carry_the_frames_yaw_as_the_report_does():
    """A mission frame with a yaw (`frames: {px4_9: {origin: [3, 4, 0], yaw_deg: 90}}`): live, PX4's input places
    the instance as the flight report's evaluation places a recorded one (quality.frames.place_frames); the yaw was
    dropped live before (the veto checked the vehicle 2 m from where the report put it)."""
    from types import SimpleNamespace

    from uav_debate_eval.core.mission import FrameOrigin, Mission
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.nodes.px4_input import parse_spawn
    from uav_debate_eval.quality.frames import place_frames

    spawn = parse_spawn(["px4_9=3,4,0,90"])
    assert spawn == {"px4_9": (3.0, 4.0, 0.0, 90.0)}
    with pytest.raises(ValueError, match="x,y,z,yaw_deg"):
        parse_spawn(["px4_9=3,4"])
    frames = px4.LiveFrames(spawn=spawn)
    msg = SimpleNamespace(xy_valid=True, z_valid=True, xy_global=False, z_global=False, ref_lat=0.0, ref_lon=0.0,
                          ref_alt=0.0, timestamp=5, timestamp_sample=5, x=1.0, y=0.0, z=-2.0, vx=1.0, vy=0.0, vz=0.0)
    frames.local_position("px4_9", 3.0, msg)  # the first second sets the clock
    msg.timestamp_sample = 2_000_005
    _, pos, vel = frames.local_position("px4_9", 5.0, msg)
    assert frames.placement.spawned == {"px4_9"}
    local = SwarmTrajectory.from_columns(np.array([0.0, 1.0]), ["px4_9", "px4_9"], np.array([[0.0, 1.0, 2.0]] * 2),
                                         vel=np.array([[0.0, 1.0, 0.0]] * 2))  # the same sample in ENU, unplaced
    place_frames(local, Mission(frame_origins={"px4_9": FrameOrigin((3.0, 4.0, 0.0), 90.0)}))
    assert pos == pytest.approx(tuple(local.tracks["px4_9"].pos[0])) and pos == pytest.approx((2.0, 4.0, 2.0))
    assert vel == pytest.approx(tuple(local.tracks["px4_9"].vel[0]))


def test_live_px4_takes_the_missions_frames_with_their_yaw(tmp_path):
    pytest.importorskip("px4_msgs.msg", reason="px4_msgs not generated (make setup)")
    from uav_debate_eval.commands.live import _stack_pose_params

    mission = tmp_path / "mission.yaml"
    mission.write_text("frames: {px4_1: {origin: [6, 0, 0], yaw_deg: 90}, px4_2: {origin: [12, 0, 0]}}\n")
    params = _stack_pose_params(True, None, mission)
    assert params["pose_spawn_offsets"] == ["px4_1=6,0,0,90", "px4_2=12,0,0"]
