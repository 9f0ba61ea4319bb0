"""A PX4 SITL swarm as ROS 2 records it (issue 34), written with rosbags' writer: three vehicles spawned 6 m apart,
each with its own EKF origin and boot clock, and one injected near miss (px4_1 drifts to 1 m from px4_2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from uav_debate_eval.io.rosbag.px4 import shipped_store
from uav_debate_eval.sim import px4_shape

RATE_HZ = 20.0
DURATION_S = 40.0
SPAWN = {"px4_0": np.array([0.0, 0.0, 0.0]), "px4_1": np.array([6.0, 0.0, 0.0]), "px4_2": np.array([12.0, 0.0, 0.0])}
#: The injected near miss: px4_1 closer than 2 m to px4_2 (its east offset above 4 m) from NEAR_MISS[0] to [1].
NEAR_MISS = (21.2, 24.8)
EPOCH_S = 1_760_000_000.0  # the recorder's clock at flight time 0
MISSION_YAML = """\
mission: {name: px4_swarm, type: formation}
constraints:
  min_separation_m: 2.0
  max_speed_mps: 8.0
  max_vertical_speed_mps: 3.0
  stale_timeout_s: 2.0
"""


def flight() -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Flight time and each vehicle's world ENU position and velocity: take-off together, north at 1 m/s, and
    px4_1's sidestep east (5 m out between 18 and 22 s, held to 24 s, back by 28 s)."""
    t = np.arange(0.0, DURATION_S, 1.0 / RATE_HZ)
    z = np.clip(t - 4.0, 0.0, 5.0)
    north = np.clip(t - 10.0, 0.0, 25.0)
    side = np.interp(t, [18.0, 22.0, 24.0, 28.0], [0.0, 5.0, 5.0, 0.0])
    pos = {}
    for uav, spawn in SPAWN.items():
        east = spawn[0] + (side if uav == "px4_1" else np.zeros_like(t))
        pos[uav] = np.column_stack([east, spawn[1] + north, spawn[2] + z])
    vel = {u: np.gradient(p, t, axis=0) for u, p in pos.items()}
    return t, pos, vel


def write_mission(folder: Path, extra: str = "") -> Path:
    path = folder / "mission.yaml"
    path.write_text(MISSION_YAML + extra)
    return path


def write_px4_bag(path: Path, storage: str = "mcap", embed: bool = True, kind: str = "local_position",
                  version: str = "v1.16", with_ref: bool = True) -> Path:
    """The flight as `ros2 bag record` of the uXRCE-DDS agent's topics; kind `local_position` or `odometry`
    (then vehicle_global_position places it). `embed=False` writes a .db3 without message definitions, as rosbag2
    before Iron did."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    store = shipped_store(version)
    make = px4_shape.bag_maker(store)
    t, pos, vel = flight()
    insts = px4_shape.instances(list(SPAWN), SPAWN)
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    rows: list[tuple[int, str, object, str]] = []
    pose_type = px4_shape.LOCAL_POSITION if kind == "local_position" else px4_shape.ODOMETRY
    for k, inst in enumerate(insts):
        p, v = pos[inst.uav], vel[inst.uav]
        for i, ti in enumerate(t):
            recv = _recv_ns(ti, k, i)
            if kind == "local_position":
                msg = px4_shape.local_position(make, inst, ti, p[i], v[i], with_ref)
            else:
                msg = px4_shape.odometry(make, inst, ti, p[i], v[i])
                if i % 4 == 0:
                    rows.append((recv + 1000, inst.topic("vehicle_global_position"),
                                 px4_shape.global_position(make, inst, ti, p[i]), px4_shape.GLOBAL_POSITION))
            rows.append((recv, inst.topic(f"vehicle_{kind}"), msg, pose_type))
            if i % int(RATE_HZ) == 0:
                armed = ti >= 3.0
                nav = px4_shape.NAV_TAKEOFF if 4.0 <= ti < 10.0 else px4_shape.NAV_OFFBOARD if armed else \
                    px4_shape.NAV_LOITER
                rows.append((recv + 500, inst.topic("vehicle_status"),
                             px4_shape.vehicle_status(make, inst, ti, armed, nav), px4_shape.STATUS))
                rows.append((recv + 700, inst.topic("vehicle_land_detected"),  # armed on the pad from 3 s to 4 s
                             px4_shape.land_detected(make, inst, ti, bool(ti < 4.0)), px4_shape.LAND_DETECTED))
    rows.sort(key=lambda r: r[0])
    bag = path.with_suffix("") if path.suffix else path
    with Writer(bag, version=Writer.VERSION_LATEST, storage_plugin=plugin) as writer:
        conns = {}
        for _, topic, _, msgtype in rows:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=store)
        for ns, topic, msg, msgtype in rows:
            writer.write(conns[topic], ns, store.serialize_cdr(msg, msgtype))
    if not embed:
        import sqlite3

        assert storage == "sqlite3", "a bag without definitions is a .db3 of rosbag2 before Iron"
        with sqlite3.connect(next(bag.glob("*.db3"))) as db:
            db.execute("DELETE FROM message_definitions")
    return bag


def write_gazebo_bag(path: Path, world: str = "default") -> Path:
    """The same flight as ros_gz_bridge gives Gazebo's poses: TFMessage on /world/<w>/dynamic_pose/info, models
    x500_0.. (their base_link under them) and a box that is no vehicle."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    t, pos, _ = flight()
    with Writer(path, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP) as writer:
        topic, msgtype = f"/world/{world}/dynamic_pose/info", "tf2_msgs/msg/TFMessage"
        conn = writer.add_connection(topic, msgtype, typestore=store)
        for i, ti in enumerate(t):
            ns = int(round((EPOCH_S + ti) * 1e9))
            poses = {f"x500_{k}": pos[u][i] for k, u in enumerate(SPAWN)}
            poses["box"] = np.array([3.0, 20.0, 0.5])
            writer.write(conn, ns + 2_000_000, store.serialize_cdr(px4_shape.tf_message(store, ns, world, poses),
                                                                  msgtype))
    return path


def _recv_ns(t: float, k: int, i: int) -> int:
    """Receive time: the flight time on the recorder's clock plus 2-4 ms of transport, varying per message."""
    return int(round((EPOCH_S + t + 0.002 + 0.001 * ((i * 7 + k * 3) % 3)) * 1e9))
