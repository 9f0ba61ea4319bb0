"""PoseInput's PX4 and Gazebo message kinds: px4_msgs from the uXRCE-DDS agent and tf2_msgs TFMessage from
ros_gz_bridge. The conversion is the ROS-free core's (io/px4.py, io/rosbag/transforms.py), the same the bag reader
uses, so a live flight and its recording place and clock the vehicles alike.

QoS for PX4: best effort, volatile. The agent's publishers on /fmu/out are best effort (PX4's uxrce_dds_client
creates its data writers so); a reliable subscriber is incompatible with them and receives nothing.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from uav_debate_eval.io import px4
from uav_debate_eval.io.rosbag.tf_tree import TfPoses

if TYPE_CHECKING:
    from uav_debate_eval.nodes.pose_input import PoseInput

#: pose_type -> the PX4 topic it is published on
PX4_KINDS = {"VehicleLocalPosition": "vehicle_local_position", "VehicleOdometry": "vehicle_odometry"}
TF_KIND = "TFMessage"


def px4_qos(depth: int) -> QoSProfile:
    """PX4's own: best effort, volatile (see the module docstring), keep last `depth`."""
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.VOLATILE)


def message_class(pose_type: str) -> Any:
    """The rclpy class of a PX4 or tf2 pose type; one line naming the fix when the package is missing."""
    try:
        if pose_type == TF_KIND:
            from tf2_msgs.msg import TFMessage

            return TFMessage
        import px4_msgs.msg

        return getattr(px4_msgs.msg, pose_type)
    except ImportError:
        package = "tf2_msgs" if pose_type == TF_KIND else "px4_msgs"
        raise ValueError(f"pose_type {pose_type}: the {package} message package is not installed (make setup "
                         f"generates it; or source a ROS 2 workspace that has it)") from None


def optional_class(kind: str) -> Any:
    """A px4_msgs class read beside the poses, or None when the package was built without it (poses only)."""
    try:
        return message_class(kind)
    except (ValueError, AttributeError):
        return None


def parse_spawn(items: list[str]) -> dict[str, tuple[float, ...]]:
    """`["px4_1=6,0,0", "px4_2=12,0,0,90", ...]` -> {vehicle: (x, y, z[, yaw_deg])} (ENU metres of its local origin in
    the world frame, and the local frame's yaw about z, as the mission's `frames:` give them)."""
    out = {}
    for item in filter(None, items):
        name, _, xyz = item.partition("=")
        values = [float(v) for v in xyz.split(",")] if xyz else []
        if not name or len(values) not in (3, 4):
            raise ValueError(f"pose_spawn_offsets: expected 'vehicle=x,y,z' or 'vehicle=x,y,z,yaw_deg', got {item!r}")
        out[name.strip()] = tuple(values)
    return out


class Px4Input:
    """Subscribes `[/px4_N]/fmu/out/<kind>` of every instance discovered (or named) and feeds the owner's callback
    with world-frame ENU samples on the node's clock."""

    def __init__(self, owner: PoseInput, spawn: dict[str, tuple[float, ...]], shared: bool, for_report: bool = True):
        """`for_report`: keep what the flight report needs beyond the poses (the estimates flagged invalid)."""
        self.owner = owner
        self.topic_name = PX4_KINDS[owner.pose_type]
        self.cls = message_class(owner.pose_type)
        self.frames = px4.LiveFrames(spawn=spawn, shared=shared, keep_invalid=for_report)
        self._said: set[str] = set()
        #: each vehicle's vehicle_status messages as received (a few a second): arming, modes, vehicle class
        self.statuses: dict[str, list[px4.StatusFields]] = {}
        #: each vehicle's land detector as received: (timestamp µs, landed) of its first message and of each change
        self.landings: dict[str, list[tuple[int, bool]]] = {}
        self._status_cls = optional_class("VehicleStatus")
        self._landed_cls = optional_class("VehicleLandDetected")

    def topic_for(self, uav: str) -> str:
        index = uav.removeprefix("px4_")
        return f"/fmu/out/{self.topic_name}" if index == "0" else f"/{uav}/fmu/out/{self.topic_name}"

    def matches(self, topic: str, types: list[str], kind: str | None = None) -> str | None:
        """The vehicle of a PX4 output topic of this kind (or `kind`, e.g. vehicle_status; any message version
        suffix), else None."""
        parsed = px4.px4_topic(topic)
        name = kind or self.topic_name
        want = "px4_msgs/msg/" + ("".join(w.title() for w in name.split("_")) if kind else self.owner.pose_type)
        return parsed[0] if parsed and parsed[1] == name and want in types else None

    @property
    def companions(self) -> list[str]:
        """The kinds of each instance's output topics read beside its poses (their messages are in px4_msgs)."""
        return [kind for kind, cls in (("vehicle_status", self._status_cls),
                                       ("vehicle_land_detected", self._landed_cls)) if cls is not None]

    def companion_subscription(self, uav: str, topic: str, kind: str) -> Any:
        return (self.status_subscription if kind == "vehicle_status" else self.landing_subscription)(uav, topic)

    def status_subscription(self, uav: str, topic: str) -> Any:
        """vehicle_status of one instance (best effort as PX4 publishes it): recorded with the poses, its changes kept
        for the flight report (io.px4.keep_status, apply_status as the bag reader does); its arming goes to the owner's
        on_arming."""
        rows = self.statuses.setdefault(uav, [])

        def on_status(msg: Any) -> None:
            received_ns = self.owner.node.get_clock().now().nanoseconds
            self.owner.record(topic, px4.STATUS, msg, received_ns)
            row = px4.StatusFields(int(msg.timestamp), int(msg.arming_state), int(msg.nav_state),
                                   int(msg.vehicle_type), bool(msg.is_vtol))
            if px4.keep_status(rows, row) and self.owner.on_arming is not None:
                self.owner.on_arming(uav, row.arming_state == px4.ARMED)  # the verifier's parked pairs
        return self.owner.node.create_subscription(self._status_cls, topic, self.owner.recorded(on_status),
                                                   self.owner.qos, callback_group=self.owner.callback_group)

    def landing_subscription(self, uav: str, topic: str) -> Any:
        """vehicle_land_detected of one instance: recorded with the poses, its first state and changes kept for the
        flight report (io.px4.apply_landing, as the bag reader does) and passed to the owner's on_landed."""
        rows = self.landings.setdefault(uav, [])

        def on_landed(msg: Any) -> None:
            self.owner.record(topic, px4.LAND_DETECTED, msg, self.owner.node.get_clock().now().nanoseconds)
            landed = bool(msg.landed)
            if not rows or rows[-1][1] != landed:  # PX4 publishes it on change and once a second
                rows.append((int(msg.timestamp), landed))
                if self.owner.on_landed is not None:
                    self.owner.on_landed(uav, landed)  # the verifier's parked pairs
        return self.owner.node.create_subscription(self._landed_cls, topic, self.owner.recorded(on_landed),
                                                   self.owner.qos, callback_group=self.owner.callback_group)

    def flight_status(self) -> dict:
        """What the flight report needs of vehicle_status and vehicle_land_detected (the messages, the land
        detector's changes), each instance's final clock offset and the samples its estimator flagged invalid."""
        return {"statuses": {u: [tuple(r) for r in rows] for u, rows in self.statuses.items() if rows},
                "landings": {u: list(rows) for u, rows in self.landings.items() if rows},
                "offsets": dict(self.frames.clock.offsets), "spawned": sorted(self.frames.placement.spawned),
                "invalid": self.frames.invalid_arrays()}

    def callback(self, uav: str, topic: str):
        convert = self.frames.local_position if self.topic_name == "vehicle_local_position" else self.frames.odometry
        msgtype = f"px4_msgs/msg/{self.owner.pose_type}"

        def on_message(msg: Any) -> None:
            received_ns = self.owner.node.get_clock().now().nanoseconds
            self.owner.record(topic, msgtype, msg, received_ns)  # the session's bag: the message as received
            was_invalid = uav in self.frames.invalid
            sample = convert(uav, received_ns * 1e-9, msg)
            if (uav in self.frames.invalid) != was_invalid:  # said when the estimate is lost and when it is back
                self.owner.node.get_logger().warning(
                    f"pose input: {uav}'s estimator flags its position invalid (xy_valid/z_valid false, or NaN): its "
                    "poses are not checked (the verifier calls it stale after stale_timeout_s); the flight report "
                    "holds them as an estimator_invalid span" if not was_invalid else
                    f"pose input: {uav}'s position is valid again: its poses are checked")
            if sample is None:
                if uav in self.frames.unplaced and uav not in self._said:
                    self._said.add(uav)
                    self.owner.node.get_logger().error(
                        f"pose input: {uav} has no global reference (xy_global false) and no spawn offset "
                        "(pose_spawn_offsets, or the mission's frames:); its poses are held until it has one")
                return
            self.owner.callback(uav, *sample)
            if uav not in self._said:
                self._said.add(uav)
                self.owner.node.get_logger().info(f"pose input: {uav}: {self.frames.placement.how.get(uav, '')}")
        return on_message


class TfInput:
    """One TFMessage topic (Gazebo's `/world/<w>/dynamic_pose/info` or `/model/<name>/pose`, a /tf tree): every
    transform from a world frame to another is a vehicle (`TfPoses`); `patterns` (the mission's `vehicles:`) pick
    the vehicles among them."""

    def __init__(self, owner: PoseInput, topic: str, patterns: list[str]):
        self.owner = owner
        self.topic = topic
        self.patterns = patterns
        self.cls = message_class(TF_KIND)
        self.tree = TfPoses(topic)  # the offline reader's rule: links between world frames carry the poses

    def on_message(self, msg: Any) -> None:
        now_ns = self.owner.node.get_clock().now().nanoseconds
        self.owner.record(self.topic, "tf2_msgs/msg/TFMessage", msg, now_ns)
        for tr, uav, position, _ in self.tree.poses(msg.transforms, now_ns * 1e-9):
            if self.patterns and not any(fnmatch.fnmatchcase(uav, p) for p in self.patterns):
                continue
            self.owner.callback(uav, self.owner._stamp(tr.header), position, None)
