"""The one pose-ingest path shared by every node: per-vehicle PoseStamped / Odometry / PointStamped topics (the last
a position-only tracker's) or one PoseArray.

Topic patterns cover MAVROS (``/{uav}/mavros/local_position/pose``), Crazyswarm2 (``/{uav}/pose``)
and Gazebo (``/world/<w>/pose/info`` bridged as PoseArray, names by index). With ``uav_names``
empty, vehicles are discovered from the graph: every topic matching the pattern with the right type.
Stamps come from the message headers; a zero stamp falls back to the node clock (said once).
PX4 over uXRCE-DDS (``VehicleLocalPosition`` / ``VehicleOdometry`` on ``[/px4_N]/fmu/out/...``) and Gazebo's
TFMessage go through nodes/px4_input.py (one world frame, one clock, PX4's best-effort QoS).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from geometry_msgs.msg import PointStamped, PoseArray, PoseStamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from std_msgs.msg import UInt8MultiArray

from uav_debate_eval.core.cdr import pose_array_positions, pose_stamped_position
from uav_debate_eval.core.frames import WorldPlacement, odometry_velocity
from uav_debate_eval.core.pose_relay import PoseBatch
from uav_debate_eval.core.pose_relay import decode as decode_relay
from uav_debate_eval.io.mavros_fixes import LiveFixes
from uav_debate_eval.nodes.mavros_state import MavrosState
from uav_debate_eval.nodes.px4_input import PX4_KINDS, TF_KIND, Px4Input, TfInput, parse_spawn, px4_qos
from uav_debate_eval.nodes.topics import POSE_RELAY_TOPIC, RELAY_DEPTH, latched

if TYPE_CHECKING:
    from uav_debate_eval.io.rosbag_record import SessionBag

PoseCallback = Callable[[str, float, tuple[float, float, float], "tuple[float, float, float] | None"], None]
BatchCallback = Callable[[float, list[str], np.ndarray], None]

POSE_TYPES = {"PoseStamped": PoseStamped, "Odometry": Odometry, "PointStamped": PointStamped, "PoseArray": PoseArray}
#: a topic per vehicle: what pose_relay passes on (the others are one topic, or recorded as received)
RELAYED = ("PoseStamped", "Odometry")
#: message kinds whose packages may be missing (imported only when chosen): PX4 and Gazebo
EXTRA_TYPES = (*PX4_KINDS, TF_KIND)
_TYPE_NAMES = {"PoseStamped": "geometry_msgs/msg/PoseStamped", "Odometry": "nav_msgs/msg/Odometry",
               "PointStamped": "geometry_msgs/msg/PointStamped"}


#: Default per-topic queue of the pose subscriptions: 1 s at 50 Hz. The sensor-data profile keeps 5,
#: which a loaded machine overwrote (11.7 % of poses lost, short breaks missed at load average 5).
POSE_QUEUE_DEPTH = 50
#: The safety verifier's queue: the one reader that must not lose a pose. 10 s at 50 Hz per topic (a few hundred
#: kB), so a verifier starved of the CPU for seconds still gets every pose, late (and says so: verifier_degraded)
#: rather than never. Best effort like the others by default: the autopilots publish best effort, and a reliable
#: reader matches no best-effort writer (it would receive nothing); with reliable publishers set pose_qos reliable.
VERIFIER_QUEUE_DEPTH = 500


def pose_qos(name: str, depth: int | None = None) -> QoSProfile:
    """'sensor_data' (best effort, the default for poses) or 'reliable'; keep last `depth` (None: 5 and 50)."""
    if depth is not None and depth < 1:
        raise ValueError(f"pose queue depth: must be >= 1, got {depth}")
    if name == "sensor_data":
        if depth is None:
            return qos_profile_sensor_data
        return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                          reliability=qos_profile_sensor_data.reliability,
                          durability=qos_profile_sensor_data.durability)
    if name == "reliable":
        return QoSProfile(depth=depth or 50, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
    raise ValueError(f"pose_qos: expected 'sensor_data' or 'reliable', got {name!r}")


def declare_list(node: Node, name: str, description: str, item=str) -> list:
    """Declare a list parameter that may be empty or typed loosely in YAML ([] is a byte array, [0, 1] ints)."""
    value = node.declare_parameter(name, None, ParameterDescriptor(description=description, dynamic_typing=True)).value
    if value is None or (isinstance(value, (list, tuple)) and not len(value)):
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or isinstance(value, bytes):
        raise ValueError(f"parameter {name}: expected a list, got {value!r}")
    try:
        return [item(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"parameter {name}: expected a list of {item.__name__}, got {list(value)!r}") from None


def topic_regex(pattern: str) -> re.Pattern:
    """Regex that matches the pattern with ``{uav}`` standing for one topic name segment."""
    if "{uav}" not in pattern:
        raise ValueError(f"pose_topic_pattern must contain {{uav}}, got {pattern!r}")
    return re.compile("^" + re.escape(pattern).replace(re.escape("{uav}"), "([^/]+)") + "$")


class PoseInput:
    """Declares the pose parameters on `node`, subscribes, and calls callback(uav, t, pos, vel | None).

    Other nodes of the same process can `add_listener` instead of subscribing again (`live`: the DSL builder
    takes the verifier's poses, so each message is received and converted once, not once per node). They are
    called after `callback`, on its thread; one that fails is logged and detached, never the owner.
    """

    def __init__(self, node: Node, callback: PoseCallback, callback_group=None, queue_depth: int = POSE_QUEUE_DEPTH,
                 on_lost: Callable[[str, int], None] | None = None, on_batch: BatchCallback | None = None,
                 on_arming: Callable[[str, bool], None] | None = None, owner_frames: dict | None = None,
                 on_frame_moved: Callable[[str], None] = lambda uav: None, measured_velocity: bool = True,
                 on_landed: Callable[[str, bool], None] | None = None):
        """`queue_depth`: the default of the pose_queue_depth parameter; `on_lost(uav, n)`: DDS reports n samples
        of that vehicle's topic lost on the way (a best-effort gap), so the owner knows what it never saw;
        `on_batch(t, uavs, positions)`: the owner takes a PoseArray whole (else pose by pose); `on_arming(uav,
        armed)`: a vehicle's arming read or changed (PX4 vehicle_status, MAVROS state); `owner_frames`: the mission's
        `frames:` origins (core.mission.FrameOrigin by vehicle): given, the owner gets per-vehicle topics' poses in
        the world frame, MAVROS local frames placed by their global fixes, then by these origins, as a bag's are
        (the listeners get them as received, as the flight's tape and report take them); `on_frame_moved(uav)`: the
        owner's next pose of the vehicle is in a frame placed since its last one (no step of motion between);
        `measured_velocity`: MAVROS, each vehicle's velocity_local kept for the flight report, PX4 its estimates
        flagged invalid (the verifier, which checks the poses, keeps neither); `on_landed(uav, landed)`: its land
        detector read or changed (PX4 vehicle_land_detected, MAVROS extended_state)."""
        self.node = node
        self.on_lost = on_lost
        self.on_arming = on_arming
        self.on_landed = on_landed
        self.on_batch = on_batch
        self.callback = callback  # until a listener attaches: then `_fan_out`
        self._owner = callback
        self.listeners: list[PoseCallback] = []
        self.callback_group = callback_group
        p = self._declare
        names = declare_list(node, "uav_names",
                             "vehicle names; empty: discover the topics matching pose_topic_pattern and pose_type")
        self.pattern = p("pose_topic_pattern", "/{uav}/pose",
                         "per-vehicle topic, {uav} = vehicle name (MAVROS: /{uav}/mavros/local_position/pose)")
        self.pose_type = p("pose_type", "PoseStamped", "PoseStamped, Odometry, PointStamped, PoseArray, "
                           "VehicleLocalPosition, VehicleOdometry (PX4 [/px4_N]/fmu/out/..., discovered) or "
                           "TFMessage (Gazebo)")
        self.array_topic = p("pose_array_topic", "/world/default/pose/info",
                             "PoseArray topic (pose_type PoseArray), e.g. Gazebo pose/info via ros_gz_bridge")
        array_names = declare_list(node, "pose_array_names",
                                   "vehicle name of each PoseArray index; empty entries are skipped")
        qos_name = p("pose_qos", "sensor_data", "pose subscription QoS: sensor_data (best effort) or reliable")
        depth = p("pose_queue_depth", queue_depth, "poses queued per topic while the node is busy (keep last); "
                  "too short a queue loses poses, and short breaks with them, on a loaded machine")
        self.discovery_period_s = p("pose_discovery_period_s", 1.0,
                                    "how often to look for new vehicle topics when uav_names is empty")
        tf_topic = p("pose_tf_topic", "/world/default/dynamic_pose/info", "TFMessage topic (pose_type TFMessage): "
                     "Gazebo through ros_gz_bridge, /world/<w>/dynamic_pose/info or /model/<name>/pose")
        patterns = declare_list(node, "uav_patterns", "TFMessage: vehicle name glob patterns (the mission's "
                                "vehicles:); empty: every model under the world")
        spawn = declare_list(node, "pose_spawn_offsets", "PX4 without a global reference: vehicle=x,y,z[,yaw_deg] "
                             "(ENU m) of each instance's local origin, e.g. px4_1=6,0,0")
        shared = p("pose_frames_shared", False, "PX4: every instance's local frame is the world frame")
        relay = p("pose_relay", "off", "PoseStamped / Odometry: send (pass the poses received on to "
                  f"/{POSE_RELAY_TOPIC}, batched: flush_relay) or receive (take them from there, not from each "
                  "vehicle's topic: `live`'s DSL builder from its safety verifier); off")
        if relay not in ("off", "send", "receive"):
            raise ValueError(f"pose_relay: expected off, send or receive, got {relay!r}")
        if self.pose_type not in (*POSE_TYPES, *EXTRA_TYPES):
            raise ValueError(f"pose_type: expected one of {', '.join((*POSE_TYPES, *EXTRA_TYPES))}, "
                             f"got {self.pose_type!r}")
        self.qos = pose_qos(qos_name, depth)
        #: the owner's placement of MAVROS local frames by their global fixes
        self.fixes = LiveFixes(self.topic_for, lambda text: node.get_logger().info(f"pose input: {text}"),
                               on_frame_moved) if owner_frames is not None and self.reports_local_frames else None
        if (owner_frames or self.fixes is not None) and self.pose_type in RELAYED:  # (PX4's places its own)
            self.callback = self._owner = self._placed(callback, WorldPlacement(owner_frames or {}), self.fixes)
        self._px4 = Px4Input(self, parse_spawn(spawn), shared, for_report=measured_velocity) \
            if self.pose_type in PX4_KINDS else None
        #: MAVROS pose topics: each vehicle's state topic beside them (arming)
        self._mavros = MavrosState(node, self._stamp, on_arming, callback_group, self._on_fix, measured_velocity,
                                   on_landed) if self.pose_type in RELAYED else None
        if self._px4 is not None:
            self.qos = px4_qos(depth)
        self.uav_names: list[str] = list(names or [])
        self.array_names: list[str] = list(array_names or [])
        self._subs: dict[str, object] = {}
        self._zero_stamp_said = False
        self._bad_said: set[str] = set()
        self._relayed = set(self.uav_names)  # pose_relay receive: the vehicles named so far
        self.relay_received = relay == "receive" and self.pose_type in RELAYED
        self._bag: SessionBag | None = None
        self._definitions: dict[str, str] = {}
        #: held while a recorded message is written and delivered, and by `end_recording`
        self._recording = threading.Lock()
        self._regex = topic_regex(self.pattern) if self.pose_type not in ("PoseArray", TF_KIND) else None
        if self.pose_type == TF_KIND:
            tf = TfInput(self, tf_topic, list(patterns))
            self.array_topic = tf_topic
            self._subs[tf_topic] = node.create_subscription(tf.cls, tf_topic, self.recorded(tf.on_message),
                                                            self.qos, callback_group=callback_group)
        elif self.pose_type == "PoseArray":
            if not self.array_names:
                raise ValueError("pose_type PoseArray needs pose_array_names (one vehicle name per array index)")
            self.uav_names = [n for n in self.array_names if n]
            self._array_slots = [k for k, n in enumerate(self.array_names) if n]
            # raw: read with numpy (core.cdr), not as 4 Python objects per pose (13 ms per 1,000-pose message)
            self._subs[self.array_topic] = node.create_subscription(
                PoseArray, self.array_topic, self._on_array, self.qos, callback_group=callback_group,
                event_callbacks=self._lost_events(*self.uav_names), raw=True)
        elif self.relay_received:
            self._subs["/" + POSE_RELAY_TOPIC] = node.create_subscription(
                UInt8MultiArray, POSE_RELAY_TOPIC, self._on_relay, latched(RELAY_DEPTH), callback_group=callback_group,
                raw=True)
            for uav in self.uav_names:
                self._watch_state(uav)
        elif self.uav_names:
            for uav in self.uav_names:
                self._subscribe(uav)
        else:
            self._timer = node.create_timer(self.discovery_period_s, self.discover, callback_group=callback_group)
        #: pose_relay send: the poses received since the last flush_relay
        self.relay = PoseBatch() if relay == "send" and self.pose_type in RELAYED else None
        if self.relay is not None:
            self._relay_pub = node.create_publisher(UInt8MultiArray, POSE_RELAY_TOPIC, latched(RELAY_DEPTH))
            self.add_listener(self.relay.add)
        node.get_logger().info(
            f"pose input: {self.pose_type} "
            + (f"/{POSE_RELAY_TOPIC} (the safety verifier's)" if self.relay_received else
               self.array_topic if self.pose_type in ("PoseArray", TF_KIND) else
               "[/px4_N]/fmu/out/" + PX4_KINDS[self.pose_type] if self._px4 is not None else self.pattern)
            + (" (reliable, transient local)" if self.relay_received else f" ({qos_name}, queue {depth})")
            + f"; vehicles: {', '.join(self.uav_names) or 'discovering'}")

    def record_to(self, bag: SessionBag) -> bool:
        """Write every PX4 / TFMessage pose message as received to `bag` (io.rosbag_record), the bag of the session
        that `evaluate` replays as live saw it; False for the other pose types (the flight's MCAP holds those)."""
        if self.pose_type not in EXTRA_TYPES:
            return False
        import importlib.util

        from uav_debate_eval.io.rosbag_record import installed_definitions

        package = "tf2_msgs" if self.pose_type == TF_KIND else "px4_msgs"
        spec = importlib.util.find_spec(package)
        self._definitions = installed_definitions(spec.origin if spec else None, f"{package}/msg/{self.pose_type}")
        self._bag = bag
        return True

    def recorded(self, handler: Callable[[Any], None]) -> Callable[[Any], None]:
        """`handler` of a message that goes to the session bag: it records and delivers the message under the lock
        `end_recording` takes, so the bag and the flight's tape end with the same message."""
        def locked(msg: Any) -> None:
            with self._recording:
                handler(msg)
        return locked

    def end_recording(self, end_tape: Callable[[], object]) -> None:
        """No message is recorded from now on, and `end_tape` (the flight's last take) runs with no message
        recorded or delivered meanwhile: a message received as the session ends is in both or in neither."""
        with self._recording:
            self._bag = None
            end_tape()

    def record(self, topic: str, msgtype: str, msg, received_ns: int) -> None:
        if self._bag is not None:
            from rclpy.serialization import serialize_message

            try:
                self._bag.write(topic, msgtype, serialize_message(msg), received_ns, self._definitions)
            except Exception as exc:  # noqa: BLE001  (the recording must never stop the monitoring)
                self._bag = None
                self.node.get_logger().error(f"pose input: session bag stopped: {exc}")

    def flight_status(self) -> dict:
        """PX4 input: the vehicle_status messages received and each instance's clock offset (the flight report's
        vehicle class and arming/mode events); empty for the other pose types."""
        return self._px4.flight_status() if self._px4 is not None else {}

    @property
    def reports_local_frames(self) -> bool:
        """Per-vehicle topics in local frames of their own (MAVROS `local_position`, the bag reader's rule)."""
        return self.pose_type in RELAYED and "/local_position/" in self.pattern

    def local_frames(self) -> list[str]:
        """The vehicles whose topic reports a local frame of their own: the flight report places them by the
        mission's `frames:` or says they are unverified, as for a bag."""
        return list(self.uav_names) if self.reports_local_frames else []

    def mavros_status(self) -> dict:
        """MAVROS input: each vehicle's first state and arming changes (the flight report's arming events), first fix
        and measured velocity; empty for the other inputs."""
        mavros = self._mavros
        return mavros.flight_status() if mavros is not None and mavros.heard() else {}

    @staticmethod
    def _placed(callback: PoseCallback, frames: WorldPlacement, fixes: LiveFixes | None) -> PoseCallback:
        def placed(uav: str, t: float, pos, vel) -> None:
            callback(uav, t, *frames(uav, pos if fixes is None else fixes.pose(uav, t, pos), vel))
        return placed

    def _on_fix(self, uav: str, t: float, lat: float, lon: float, alt: float) -> None:
        if self.fixes is not None:
            self.fixes.fix(uav, t, lat, lon, alt)

    def add_listener(self, listener: PoseCallback) -> None:
        self.listeners.append(listener)
        self.callback = self._fan_out

    def _fan_out(self, uav: str, t: float, pos, vel) -> None:
        self._owner(uav, t, pos, vel)
        self._notify(uav, t, pos, vel)

    def _notify(self, uav: str, t: float, pos, vel) -> None:
        """The listeners, after the owner."""
        for listener in self.listeners:
            try:
                listener(uav, t, pos, vel)
            except Exception as exc:  # noqa: BLE001  (a listener's bug must not stop the owner, e.g. the verifier)
                # a new list: the loop goes on over the old one, so the other listeners still get this pose
                self.listeners = [other for other in self.listeners if other is not listener]
                self.node.get_logger().error(f"pose input: listener {getattr(listener, '__qualname__', listener)} "
                                             f"failed and was detached: {exc!r}")

    def _declare(self, name: str, default, description: str):
        value = self.node.declare_parameter(name, default, ParameterDescriptor(description=description)).value
        return value

    @property
    def topics(self) -> list[str]:
        """The pose topics subscribed so far."""
        return sorted(self._subs)

    def topic_for(self, uav: str) -> str:
        if self._px4 is not None:
            return self._px4.topic_for(uav)
        return self.pattern.replace("{uav}", uav)

    def _subscribe(self, uav: str) -> None:
        topic = self.topic_for(uav)
        if topic in self._subs:
            return
        if self._px4 is not None:
            self._subs[topic] = self.node.create_subscription(self._px4.cls, topic,
                                                              self.recorded(self._px4.callback(uav, topic)),
                                                              self.qos, callback_group=self.callback_group)
            for kind in self._px4.companions:  # vehicle_status, vehicle_land_detected
                companion = topic.rsplit("/", 1)[0] + "/" + kind
                if companion not in self._subs:
                    self._subs[companion] = self._px4.companion_subscription(uav, companion, kind)
            if uav not in self.uav_names:
                self.uav_names.append(uav)
            return
        raw = self.pose_type == "PoseStamped"  # read with struct (core.cdr): a show streams 10,000 of them a second
        if raw:
            cb = lambda data, u=uav: self._on_pose(u, data)  # noqa: E731
        elif self.pose_type == "PointStamped":
            cb = lambda msg, u=uav: self._on_point(u, msg)  # noqa: E731
        else:
            cb = lambda msg, u=uav: self._on_odom(u, msg)  # noqa: E731
        self._subs[topic] = self.node.create_subscription(POSE_TYPES[self.pose_type], topic, cb, self.qos,
                                                          callback_group=self.callback_group,
                                                          event_callbacks=self._lost_events(uav), raw=raw)
        if self._mavros is not None:
            self._mavros.watch(uav, topic)
        if uav not in self.uav_names:
            self.uav_names.append(uav)

    def _watch_state(self, uav: str) -> None:
        """pose_relay receive: the vehicle's MAVROS state all the same (the panel's flight report: its arming)."""
        if self._mavros is not None:
            self._mavros.watch(uav, self.pattern.replace("{uav}", uav))

    def _lost_events(self, *uavs: str) -> SubscriptionEventCallbacks | None:
        if self.on_lost is None:
            return None
        on_lost = self.on_lost

        def lost(info) -> None:  # a PoseArray's loss is every vehicle's
            for uav in uavs:
                on_lost(uav, int(info.total_count_change))
        return SubscriptionEventCallbacks(message_lost=lost)

    def discover(self) -> list[str]:
        """Subscribe every new topic that matches the pattern and type; returns the new vehicle names."""
        new: list[str] = []
        regex = self._regex
        if regex is None:  # one PoseArray/TFMessage topic, subscribed at start: nothing to discover
            return new
        if self._px4 is not None:
            for topic, types in self.node.get_topic_names_and_types():
                for kind in self._px4.companions:
                    of = self._px4.matches(topic, types, kind)
                    if of is not None and topic not in self._subs:
                        self._subs[topic] = self._px4.companion_subscription(of, topic, kind)
                uav = self._px4.matches(topic, types)
                if uav is not None and topic not in self._subs:
                    self._subs[topic] = self.node.create_subscription(
                        self._px4.cls, topic, self.recorded(self._px4.callback(uav, topic)), self.qos,
                        callback_group=self.callback_group)
                    self.uav_names.append(uav)
                    new.append(uav)
            if new:
                self.node.get_logger().info(f"pose input: discovered {', '.join(new)}")
            return new
        want = _TYPE_NAMES[self.pose_type]
        for topic, types in self.node.get_topic_names_and_types():
            m = regex.match(topic)
            if m and want in types and topic not in self._subs:
                self._subscribe(m.group(1))
                new.append(m.group(1))
        if new:
            self.node.get_logger().info(f"pose input: discovered {', '.join(new)}")
        return new

    def _stamp(self, header) -> float:
        if header.stamp.sec == 0 and header.stamp.nanosec == 0:
            return self._zero_stamp()
        return header.stamp.sec + header.stamp.nanosec * 1e-9

    def _zero_stamp(self) -> float:
        if not self._zero_stamp_said:
            self._zero_stamp_said = True
            self.node.get_logger().warning("pose input: zero header stamps, using the node clock instead")
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_pose(self, uav: str, data: bytes) -> None:
        try:
            t, _, pos = pose_stamped_position(data)
        except ValueError as exc:
            self._bad_message(uav, exc)
            return
        self.callback(uav, t if t != 0.0 else self._zero_stamp(), pos, None)

    def flush_relay(self) -> None:
        """pose_relay send: publish the poses received since the last flush, if any."""
        if self.relay is not None and (data := self.relay.take()) is not None:
            self._relay_pub.publish(data)

    def _on_relay(self, data: bytes) -> None:
        try:
            names, rows = decode_relay(data)
        except ValueError as exc:
            self._bad_message(POSE_RELAY_TOPIC, exc)
            return
        for uav in names:
            if uav not in self._relayed:
                self._relayed.add(uav)
                self.uav_names.append(uav)
                self._watch_state(uav)
        for k, t, x, y, z, vx, vy, vz in rows.tolist():
            self.callback(names[int(k)], t, (x, y, z), None if math.isnan(vx) else (vx, vy, vz))

    def _bad_message(self, where: str, exc: ValueError) -> None:
        """A message that does not parse: said once per topic or array, then skipped."""
        if where not in self._bad_said:
            self._bad_said.add(where)
            self.node.get_logger().error(f"pose input: {where}: {exc}; such messages are skipped")

    def _on_odom(self, uav: str, msg: Odometry) -> None:
        p, q, v = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist.linear
        vel = odometry_velocity(msg.child_frame_id, msg.header.frame_id, (q.x, q.y, q.z, q.w), (v.x, v.y, v.z))
        self.callback(uav, self._stamp(msg.header), (p.x, p.y, p.z), vel)

    def _on_point(self, uav: str, msg: PointStamped) -> None:
        """A position-only tracker's point (io.rosbag.point offline): the velocity is derived from the positions."""
        self.callback(uav, self._stamp(msg.header), (msg.point.x, msg.point.y, msg.point.z), None)

    def _on_array(self, data: bytes) -> None:
        try:
            t, _, positions = pose_array_positions(data)
        except ValueError as exc:
            self._bad_message(self.array_topic, exc)
            return
        if t == 0.0:
            t = self._zero_stamp()
        if len(positions) >= len(self.array_names):
            slots = self._array_slots
        else:  # a model gone from the world shifts every index after it: the names may no longer match
            slots = [k for k in self._array_slots if k < len(positions)]
            if "short array" not in self._bad_said:
                self._bad_said.add("short array")
                self.node.get_logger().warning(
                    f"pose input: {self.array_topic}: {len(positions)} poses for {len(self.array_names)} "
                    "pose_array_names; names are matched by index, so after a missing pose they may be wrong")
        names = [self.array_names[k] for k in slots]
        chosen = positions[slots]
        if self.on_batch is not None:
            self.on_batch(t, names, chosen)
        each = self._notify if self.on_batch is not None else self.callback
        if self.on_batch is None or self.listeners:
            for name, (x, y, z) in zip(names, chosen.tolist(), strict=True):
                each(name, t, (x, y, z), None)
