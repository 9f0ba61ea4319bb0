"""Which topics of a bag are read: the pose topics (by type, or as `--topics` names them), the vehicle each one
is, and the MAVROS, ArduPilot DDS and /tf_static topics that complete them."""

from __future__ import annotations

import re
from pathlib import Path

from uav_debate_eval.core.errors import InputError

POSE = "geometry_msgs/msg/PoseStamped"
POSE_COV = "geometry_msgs/msg/PoseWithCovarianceStamped"
ODOM = "nav_msgs/msg/Odometry"
POSE_ARRAY = "geometry_msgs/msg/PoseArray"
TF = "tf2_msgs/msg/TFMessage"
TF_STATIC = "/tf_static"
TRANSFORM = "geometry_msgs/msg/TransformStamped"
TWIST = "geometry_msgs/msg/TwistStamped"
FIX = "sensor_msgs/msg/NavSatFix"
POINT = "geometry_msgs/msg/PointStamped"
STATE = "mavros_msgs/msg/State"
EXTENDED_STATE = "mavros_msgs/msg/ExtendedState"
#: ROS 1's tf/tfMessage (tf before tf2) has TFMessage's layout, byte for byte: read as one.
_SAME_LAYOUT = {"tf/msg/tfMessage": TF}
#: Preferred first when one vehicle has several pose topics.
SUPPORTED = (POSE, ODOM, POSE_COV, TRANSFORM, POSE_ARRAY, TF)
#: Positions without attitude, read only from a bag that has no pose (or as `--topics` names them), in this order:
#: GPS fixes, then a position-only tracker's points (beside a pose, a point is more often a target or a click).
POSITION_ONLY = (FIX, POINT)
WORLD_FRAMES = {"world", "map", "odom", "earth", "enu"}
#: Namespaces of autopilot drivers (`/mavros/local_position/pose` alone is one unnamed vehicle) and of
#: motion-capture bridges (`/vicon/cf3/cf3`: the next level names the body).
_DRIVER_NS = {"mavros", "fmu", "px4"}
_MOCAP_NS = {"vicon", "vrpn_client_node", "natnet", "optitrack", "qualisys", "mocap", "motion_capture_tracking"}
#: MAVROS topics beside a pose topic: measured velocity (world frame first: `velocity_local`, or `velocity` before
#: MAVROS 0.29, which 0.28 published in the body frame (`base_link`: rotated as `velocity_body` is); then body frame),
#: the global fix and the autopilot's state (arming) and extended state (landed).
_MAVROS_COMPANIONS = (("/local_position/velocity_local", TWIST), ("/local_position/velocity", TWIST),
                      ("/local_position/velocity_body", TWIST),
                      ("/global_position/global", FIX), ("/state", STATE), ("/extended_state", EXTENDED_STATE))
#: ArduPilot's own DDS client (4.5+): `<ns>/ap/pose/filtered` and, beside it, the AHRS's velocity (local ENU).
AP_POSE, AP_TWIST = "/ap/pose/filtered", "/ap/twist/filtered"


def ap_twist_topic(pose_topic: str) -> str | None:
    """ArduPilot DDS's `<ns>/ap/twist/filtered` beside its `<ns>/ap/pose/filtered`, else None."""
    return pose_topic.removesuffix(AP_POSE) + AP_TWIST if pose_topic.endswith(AP_POSE) else None


def same_type(msgtype: str) -> str:
    """The supported type a message type is read as (itself, or the one it shares its layout with)."""
    return _SAME_LAYOUT.get(msgtype, msgtype)


def vehicle_from_topic(topic: str) -> str:
    """`/uav1/pose` -> `uav1`; `/vicon/cf3/cf3` -> `cf3`; `/mavros/local_position/pose` -> `uav`; `/pose` -> `pose`."""
    parts = [p for p in topic.split("/") if p]
    if len(parts) >= 2 and parts[0] in _MOCAP_NS:
        return parts[1]
    if len(parts) >= 2 and parts[0] not in _DRIVER_NS:
        return parts[0]
    if len(parts) >= 2:
        return "uav"
    return parts[0] if parts else "uav"


def frame_vehicle(frame: str) -> str:
    """tf child frame `uav1/base_link` or `/uav1` -> `uav1`."""
    parts = [p for p in frame.split("/") if p]
    if not parts:
        return frame
    if len(parts) >= 2 and re.fullmatch(r"base_link|base_footprint|body|fcu|imu", parts[-1]):
        return parts[-2]
    return parts[0]


def parse_topic_args(topics: list[str] | None) -> dict[str, str | None]:
    """`--topics /a/pose /b/pose=uav2` -> {topic: explicit vehicle name or None}."""
    out: dict[str, str | None] = {}
    for item in topics or []:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            topic, _, name = part.partition("=")
            out[topic if topic.startswith("/") else "/" + topic] = name or None
    return out


#: MAVROS's pose estimate (its local_position/pose) among the pose topics of a MAVROS namespace.
MAVROS_ESTIMATE = "/mavros/local_position/"


def select_topics(path: Path, types: dict[str, str], wanted: dict[str, str | None],
                  notes: list[str] | None = None) -> dict[str, str | None]:
    """Topics to read, each with its explicit vehicle name (None: from namespace / frame); `notes` gets a line for
    each vehicle with pose topics left unread."""
    if wanted:
        missing = [t for t in wanted if t not in types]
        if missing:
            raise InputError(f"{path}: topic(s) not in bag: {', '.join(missing)} (has: {', '.join(sorted(types))})")
        bad = [f"{t} ({types[t]})" for t in wanted if types[t] not in (*SUPPORTED, *POSITION_ONLY)]
        if bad:
            raise InputError(f"{path}: unsupported pose topic type: {', '.join(bad)}; expected one of "
                             f"{', '.join((*SUPPORTED, *POSITION_ONLY))}")
        return dict(wanted)
    found = {t: ty for t, ty in types.items() if ty in SUPPORTED}
    for kind in POSITION_ONLY:  # no pose at all: the positions (beside a pose, a fix is a sensor, a point a target)
        if not found and (positions := sorted(t for t, ty in types.items() if ty == kind)):
            return {t: None for t in positions}
    if not found:
        listed = ", ".join(f"{t} ({ty})" for t, ty in sorted(types.items())[:8]) or "none"
        raise InputError(f"{path}: no pose topic (PoseStamped, Odometry, PoseWithCovarianceStamped, PoseArray, "
                         "TFMessage, NavSatFix, PointStamped or px4_msgs VehicleLocalPosition/VehicleOdometry on "
                         f"[/px4_N]/fmu/out/...); topics: {listed}")
    direct = {t: ty for t, ty in found.items() if ty in (POSE, ODOM, POSE_COV)}
    if direct:
        # One topic per vehicle: MAVROS's own estimate first (local_position/pose or /odom, what `live` reads; not
        # the vision_pose it is fed, nor a setpoint), then PoseStamped before Odometry before
        # PoseWithCovarianceStamped, then the shortest name.
        best: dict[str, str] = {}
        unread: dict[str, list[str]] = {}
        for t in sorted(direct, key=lambda t: (MAVROS_ESTIMATE not in t, SUPPORTED.index(direct[t]), len(t), t)):
            if best.setdefault(vehicle := vehicle_from_topic(t), t) != t:
                unread.setdefault(vehicle, []).append(t)
        if notes is not None:
            notes.extend(f"{best[v]} read as the vehicle's pose; not read: {', '.join(others)} (one pose topic a "
                         "vehicle; --topics picks others)" for v, others in sorted(unread.items()))
        return {t: None for t in sorted(best.values())}
    arrays = sorted(t for t, ty in found.items() if ty == POSE_ARRAY)
    if arrays:
        return {arrays[0]: None}
    return {t: None for t in sorted(found)}


def companions(selected: dict[str, str | None], types: dict[str, str]) -> dict[str, str]:
    """Companion topic -> the pose topic it completes: MAVROS velocity (world or body), global fix, state and extended
    state of the same namespace; ArduPilot DDS's twist beside its pose; and /tf_static (-> itself) when the bag has
    it and it is not read as poses."""
    out = {}
    for topic in selected:
        if (twist := ap_twist_topic(topic)) is not None and types.get(twist) == TWIST:
            out[twist] = topic
        if "/mavros/" not in topic + "/":
            continue
        ns = topic[:topic.index("/mavros") + len("/mavros")] if "/mavros" in topic else ""
        for suffix, kind in _MAVROS_COMPANIONS:
            cand = ns + suffix
            if types.get(cand) == kind:
                out[cand] = topic
    if types.get(TF_STATIC) == TF and TF_STATIC not in selected:
        out[TF_STATIC] = TF_STATIC
    return out


def pose_vehicles(types: dict[str, str]) -> list[str]:
    """The vehicles a bag's one-body-per-topic pose topics name (without reading a message)."""
    return sorted({vehicle_from_topic(t) for t, ty in types.items() if ty in (POSE, ODOM, POSE_COV, TRANSFORM)})
