"""A simulated swarm as PX4 SITL in Gazebo shows it over ROS 2: what `swarm_sim --px4` publishes and what the
tests record with rosbags' writer.

Each vehicle is one PX4 instance (`px4_0` on `/fmu/out/...`, `px4_N` on `/px4_N/fmu/out/...`): its local NED frame
starts where it was spawned (its first position), its EKF origin is that point's latitude/longitude/altitude in
the world (`ref_lat`/`ref_lon`/`ref_alt`, `xy_global`), and its `timestamp` counts microseconds since its own boot
(instances boot seconds apart). Gazebo's view is the world frame itself: one TFMessage per tick on
`/world/<w>/dynamic_pose/info`, each model (and its base_link under it) a transform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from uav_debate_eval.io.px4 import FRAME_NED, GLOBAL_POSITION, LAND_DETECTED, LOCAL_POSITION, ODOMETRY, STATUS
from uav_debate_eval.io.ulog import geodetic_to_enu, ned_to_enu

#: PX4 SITL's default home (PX4_HOME_LAT/LON/ALT): the world frame's origin.
HOME = (47.397742, 8.545594, 488.0)
_WGS84_A = 6378137.0
_WGS84_E2 = 6.69437999014e-3
#: PX4's vehicle_status values the simulation uses.
DISARMED, ARMED = 1, 2
NAV_LOITER, NAV_TAKEOFF, NAV_OFFBOARD = 4, 17, 14


@dataclass
class Px4Instance:
    """One simulated PX4 instance: its name, topic namespace, spawn point (world ENU) and boot time."""

    uav: str
    index: int
    spawn: np.ndarray
    boot_s: float

    @property
    def namespace(self) -> str:
        """PX4's: none for instance 0 (`px4_0`), else the vehicle's name (`px4_N`, or PX4_UXRCE_DDS_NS's)."""
        return "" if self.uav == "px4_0" else f"/{self.uav}"

    def topic(self, name: str) -> str:
        return f"{self.namespace}/fmu/out/{name}"

    @property
    def ref(self) -> tuple[float, float, float]:
        """The EKF origin: the spawn point in latitude, longitude, altitude (small-offset tangent plane)."""
        return enu_to_geodetic(self.spawn)

    def ned(self, pos_enu: np.ndarray) -> np.ndarray:
        """World ENU positions -> this instance's local NED (from its spawn point)."""
        return ned_to_enu(np.asarray(pos_enu, dtype=float).reshape(-1, 3) - self.spawn)  # the swap is its own inverse

    def boot_us(self, t: float) -> int:
        """Flight time (s) -> this instance's `timestamp` (microseconds since its boot)."""
        return int(round((t + self.boot_s) * 1e6))


def enu_to_geodetic(pos_enu: np.ndarray) -> tuple[float, float, float]:
    """A world ENU point (metres from HOME) in latitude, longitude, altitude (WGS84 radii of curvature at HOME)."""
    lat0, lon0, alt0 = HOME
    e, n, u = np.asarray(pos_enu, dtype=float).reshape(3)
    s2 = np.sin(np.radians(lat0)) ** 2
    meridian = _WGS84_A * (1 - _WGS84_E2) / (1 - _WGS84_E2 * s2) ** 1.5
    normal = _WGS84_A / np.sqrt(1 - _WGS84_E2 * s2)
    lat = lat0 + np.degrees(n / meridian)
    lon = lon0 + np.degrees(e / (normal * np.cos(np.radians(lat0))))
    alt = alt0 + u
    for _ in range(3):  # exact inverse of io.ulog.geodetic_to_enu (the curvature drop over the swarm included)
        de, dn, du = np.asarray(geodetic_to_enu(lat, lon, alt, lat0, lon0, alt0)) - (e, n, u)
        lat -= np.degrees(dn / meridian)
        lon -= np.degrees(de / (normal * np.cos(np.radians(lat0))))
        alt -= du
    return float(lat), float(lon), float(alt)


def instances(uavs: list[str], spawn: dict[str, np.ndarray], boot_s: list[float] | None = None) -> list[Px4Instance]:
    """One instance per vehicle in order; boot times 20 s + 17 s per index unless given."""
    boots = boot_s or [20.0 + 17.0 * k for k in range(len(uavs))]
    return [Px4Instance(u, k, np.asarray(spawn[u], dtype=float), boots[k]) for k, u in enumerate(uavs)]


def blank(store: Any, msgtype: str, **values: Any) -> Any:
    """A message of `msgtype` with every field zero (arrays of zeros, empty sequences), then `values`."""
    fields = {}
    for name, (node, detail) in store.fielddefs[msgtype][1]:
        if name in values:
            fields[name] = values[name]
        elif node == 1:  # base type
            fields[name] = _zero(detail[0])
        elif node == 2:  # nested message
            fields[name] = blank(store, detail)
        elif node == 3 and detail[0][0] == 1:  # fixed array of a base type
            fields[name] = np.zeros(detail[1], dtype=_dtype(detail[0][1][0]))
        else:  # sequences, arrays of messages
            fields[name] = np.zeros(0, dtype=_dtype(detail[0][1][0])) if detail[0][0] == 1 else []
    return store.types[msgtype](**fields)


def bag_maker(store: Any) -> Any:
    """`make` for rosbags' type store (tests writing bags)."""
    return lambda msgtype, **fields: blank(store, msgtype, **fields)


def _zero(kind: str) -> Any:
    return False if kind == "bool" else "" if kind == "string" else 0.0 if kind.startswith("float") else 0


def _dtype(kind: str) -> Any:
    return {"bool": bool, "float32": np.float32, "float64": np.float64}.get(kind, np.dtype(kind) if kind[0] in "ui"
                                                                             and kind[-1].isdigit() else np.uint8)


def local_position(make: Any, inst: Px4Instance, t: float, pos_enu: np.ndarray, vel_enu: Any,
                   with_ref: bool = True, xy_valid: bool = True) -> Any:
    """px4_msgs/VehicleLocalPosition of one sample (NED from the spawn point, the instance's boot clock); without
    `xy_valid` its horizontal position and velocity are flagged invalid (GPS lost: the barometer keeps z_valid).

    `make(msgtype, **fields)` builds the message: rosbags' (`bag_maker`) or rclpy's classes (the simulator node)."""
    n, e, d = inst.ned(pos_enu)[0]
    vn, ve, vd = ned_to_enu(np.asarray(vel_enu, dtype=float).reshape(1, 3))[0]
    lat, lon, alt = inst.ref
    stamp = inst.boot_us(t)
    return make(LOCAL_POSITION, timestamp=stamp + 300, timestamp_sample=stamp, xy_valid=xy_valid,
                 z_valid=True, v_xy_valid=xy_valid, v_z_valid=True, x=float(n), y=float(e), z=float(d), vx=float(vn),
                 vy=float(ve), vz=float(vd), xy_global=with_ref, z_global=with_ref,
                 ref_timestamp=inst.boot_us(-5.0), ref_lat=lat if with_ref else 0.0,
                 ref_lon=lon if with_ref else 0.0, ref_alt=alt if with_ref else 0.0, eph=0.5, epv=0.8)


def odometry(make: Any, inst: Px4Instance, t: float, pos_enu: np.ndarray, vel_enu: np.ndarray) -> Any:
    """px4_msgs/VehicleOdometry of one sample: NED position and velocity, level attitude facing north."""
    stamp = inst.boot_us(t)
    vel = ned_to_enu(np.asarray(vel_enu, dtype=float).reshape(1, 3))[0]
    return make(ODOMETRY, timestamp=stamp + 300, timestamp_sample=stamp, pose_frame=FRAME_NED,
                 position=inst.ned(pos_enu)[0].astype(np.float32), q=np.array([1, 0, 0, 0], dtype=np.float32),
                 velocity_frame=FRAME_NED, velocity=vel.astype(np.float32))


def vehicle_status(make: Any, inst: Px4Instance, t: float, armed: bool, nav_state: int) -> Any:
    return make(STATUS, timestamp=inst.boot_us(t), arming_state=ARMED if armed else DISARMED,
                 nav_state=nav_state, nav_state_user_intention=nav_state, vehicle_type=1)


def land_detected(make: Any, inst: Px4Instance, t: float, landed: bool) -> Any:
    return make(LAND_DETECTED, timestamp=inst.boot_us(t), landed=landed, maybe_landed=landed, ground_contact=landed,
                has_low_throttle=landed)


def global_position(make: Any, inst: Px4Instance, t: float, pos_enu: np.ndarray) -> Any:
    lat, lon, alt = enu_to_geodetic(pos_enu)
    stamp = inst.boot_us(t)
    return make(GLOBAL_POSITION, timestamp=stamp, timestamp_sample=stamp, lat=lat, lon=lon, alt=alt,
                 lat_lon_valid=True, alt_valid=True)


def tf_message(store: Any, t_ns: int, world: str, poses: dict[str, np.ndarray]) -> Any:
    """Gazebo's dynamic_pose/info as ros_gz_bridge gives it: each model under the world, its base_link under it."""
    stamp = store.types["builtin_interfaces/msg/Time"](sec=t_ns // 1_000_000_000, nanosec=t_ns % 1_000_000_000)
    out = []
    for name, p in poses.items():
        for parent, child, xyz in ((world, name, p), (name, f"{name}::base_link", np.zeros(3))):
            header = blank(store, "std_msgs/msg/Header", stamp=stamp, frame_id=parent)
            tr = blank(store, "geometry_msgs/msg/Transform",
                       translation=blank(store, "geometry_msgs/msg/Vector3", x=float(xyz[0]), y=float(xyz[1]),
                                         z=float(xyz[2])),
                       rotation=blank(store, "geometry_msgs/msg/Quaternion", w=1.0))
            out.append(blank(store, "geometry_msgs/msg/TransformStamped", header=header, child_frame_id=child,
                             transform=tr))
    return blank(store, "tf2_msgs/msg/TFMessage", transforms=out)
