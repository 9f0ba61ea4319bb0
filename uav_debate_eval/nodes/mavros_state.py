"""MAVROS's topics beside its poses, as the bag reader takes them recorded (io.rosbag.mavros):
- `<ns>/mavros/state` (mavros_msgs/State): each vehicle's arming, for the verifier's parked pairs (two disarmed
  vehicles are no pair of the separation constraint: safety.parked) and the flight report's events. Without the
  mavros_msgs package (make setup generates it) the poses are read alone.
- `<ns>/mavros/global_position/global` (NavSatFix) beside a `local_position` topic: the fixes that place each
  vehicle's local frame in the world frame (io.mavros_fixes).
- `<ns>/mavros/extended_state` (mavros_msgs/ExtendedState): each vehicle's landed state; armed on its pad it is
  parked too.
- `<ns>/mavros/local_position/velocity_local` (TwistStamped) beside a `local_position` topic, and ArduPilot DDS's
  `<ns>/ap/twist/filtered` beside its `<ns>/ap/pose/filtered`: the velocity the autopilot measured, which the flight
  report puts on the poses in place of the derived one, as the bag reader does (io.live_tape.put_measured_velocity).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
from geometry_msgs.msg import TwistStamped
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import NavSatFix

from uav_debate_eval.core.arming import LANDING_WORDS, landed_state
from uav_debate_eval.io.mavros_fixes import valid_fix
from uav_debate_eval.io.rosbag.topics import ap_twist_topic

#: As MAVROS publishes the state (sys_status: QoS(10).transient_local(), reliable): a reader that joins late still
#: gets the latest state, and a volatile reader would miss a vehicle standing disarmed since before it started.
STATE_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)


def mavros_topic(pose_topic: str, suffix: str, local_only: bool = False) -> str | None:
    """`<ns>/mavros/<suffix>` beside a MAVROS pose or odometry topic (`<ns>/mavros/local_position/pose`; with
    `local_only`, beside a local_position topic only: a local frame to place, its measured velocity), else None."""
    head, sep, _ = pose_topic.partition("/mavros/")
    return f"{head}/mavros/{suffix}" if sep and (not local_only or "/local_position/" in pose_topic) else None


def velocity_topic(pose_topic: str) -> str | None:
    """The autopilot's measured velocity beside a pose topic: MAVROS `local_position/velocity_local` (world frame),
    ArduPilot DDS's `ap/twist/filtered` (its AHRS's, local ENU); else None."""
    return ap_twist_topic(pose_topic) or mavros_topic(pose_topic, "local_position/velocity_local", local_only=True)


def state_topic(pose_topic: str) -> str | None:
    """`<ns>/mavros/state` of a MAVROS pose or odometry topic, else None."""
    return mavros_topic(pose_topic, "state")


def state_class(name: str = "State") -> Any:
    """mavros_msgs' State (or ExtendedState), or None when the package is not installed (or was built without it)."""
    try:
        import mavros_msgs.msg
    except ImportError:
        return None
    return getattr(mavros_msgs.msg, name, None)


class MavrosState:
    """Each MAVROS vehicle's first state read and every change of its arming (stamp s, armed) and of its landed state
    (stamp s, landed), its first valid global fix (stamp s, lat, lon, alt) and its measured velocity (stamp s, vx, vy,
    vz rows, 32 bytes each)."""

    def __init__(self, node: Any, stamp: Callable[[Any], float], on_arming: Callable[[str, bool], None] | None,
                 callback_group: Any = None, on_fix: Callable[[str, float, float, float, float], None] | None = None,
                 velocities: bool = True, on_landed: Callable[[str, bool], None] | None = None):
        """`stamp(header)`: the pose input's clock rule (a zero stamp is the node's clock); `on_arming(uav, armed)`:
        called on the first state and on each change, `on_landed(uav, landed)` likewise for the extended state;
        `on_fix(uav, t, lat, lon, alt)`: on its first valid fix; `velocities`: keep each vehicle's measured
        velocity."""
        self.node = node
        self.stamp = stamp
        self.on_arming = on_arming
        self.on_landed = on_landed
        self.on_fix = on_fix
        self.callback_group = callback_group
        self.cls, self.extended_cls = state_class(), state_class("ExtendedState")
        self.states: dict[str, list[tuple[float, bool]]] = {}
        self.landings: dict[str, list[tuple[float, bool]]] = {}
        self.fixes: dict[str, tuple[float, float, float, float]] = {}
        self.velocities: dict[str, tuple[str, array]] = {}  # uav -> (topic, flat rows)
        self._want_velocities = velocities
        self.pose_topics: dict[str, str] = {}
        self._subs: dict[str, Any] = {}
        self._missing_said = False

    def watch(self, uav: str, pose_topic: str) -> None:
        """Subscribe the state topic (and a local frame's fixes) beside a vehicle's pose topic, if it is MAVROS's,
        and the measured velocity beside it (MAVROS's or ArduPilot DDS's), once per vehicle."""
        topic = state_topic(pose_topic)
        velocity = velocity_topic(pose_topic) if self._want_velocities else None
        if (topic is None and velocity is None) or uav in self.pose_topics:
            return
        self.pose_topics[uav] = pose_topic
        if velocity is not None:
            rows = array("d")
            self.velocities[uav] = (velocity, rows)
            self._subs[velocity] = self.node.create_subscription(TwistStamped, velocity, self._on_velocity(rows),
                                                                 qos_profile_sensor_data,
                                                                 callback_group=self.callback_group)
        if topic is None:  # ArduPilot DDS: its velocity only
            return
        if (fixes := mavros_topic(pose_topic, "global_position/global", local_only=True)) is not None:
            self._subs[fixes] = self.node.create_subscription(NavSatFix, fixes, self._on_fix(uav),
                                                              qos_profile_sensor_data,
                                                              callback_group=self.callback_group)
        if self.cls is None:
            if not self._missing_said:
                self._missing_said = True
                self.node.get_logger().warning(
                    "pose input: mavros_msgs is not installed (make setup generates it): MAVROS arming is not "
                    "read, so vehicles parked side by side count as pairs of the separation constraint")
            return
        self._subs[topic] = self.node.create_subscription(
            self.cls, topic, self._on_change(uav, topic, self.states.setdefault(uav, []), lambda m: bool(m.armed),
                                             self.on_arming, ("armed", "disarmed")),
            STATE_QOS, callback_group=self.callback_group)
        # (a package generated before ExtendedState was shipped: arming only)
        if self.extended_cls is not None and (extended := mavros_topic(pose_topic, "extended_state")) is not None:
            self._subs[extended] = self.node.create_subscription(
                self.extended_cls, extended,
                self._on_change(uav, extended, self.landings.setdefault(uav, []),
                                lambda m: landed_state(m.landed_state), self.on_landed, LANDING_WORDS),
                qos_profile_sensor_data, callback_group=self.callback_group)

    def _on_fix(self, uav: str) -> Callable[[Any], None]:
        def on_fix(msg: Any) -> None:
            lat, lon, alt = float(msg.latitude), float(msg.longitude), float(msg.altitude)
            if uav in self.fixes or not valid_fix(lat, lon, alt):  # the first valid fix places the frame
                return
            t = self.stamp(msg.header)
            self.fixes[uav] = (t, lat, lon, alt)
            if self.on_fix is not None:
                self.on_fix(uav, t, lat, lon, alt)
        return on_fix

    def _on_velocity(self, rows: array) -> Callable[[Any], None]:
        def on_velocity(msg: Any) -> None:
            v = msg.twist.linear
            rows.extend((self.stamp(msg.header), v.x, v.y, v.z))
        return on_velocity

    def _on_change(self, uav: str, topic: str, rows: list[tuple[float, bool]],
                   state_of: Callable[[Any], bool | None], notify: Callable[[str, bool], None] | None,
                   words: tuple[str, str]) -> Callable[[Any], None]:
        """A state message's handler: its first state and each change kept (stamp, state) and passed to `notify`
        (a message whose state is None says nothing)."""
        def on_message(msg: Any) -> None:
            now = state_of(msg)
            if now is None or (rows and rows[-1][1] == now):  # MAVROS repeats the states with every heartbeat
                return
            if not rows:
                self.node.get_logger().info(f"pose input: {uav}: {words[0]}/{words[1]} from {topic} "
                                            f"({words[0] if now else words[1]})")
            rows.append((self.stamp(msg.header), now))
            if notify is not None:
                notify(uav, now)
        return on_message

    def heard(self) -> bool:
        """Anything for the flight report: a state, a fix or a measured velocity."""
        return bool(any(self.states.values()) or any(self.landings.values()) or self.fixes
                    or any(len(rows) for _, rows in self.velocities.values()))

    def flight_status(self) -> dict:
        """What the flight report needs: each vehicle's first state and arming changes; the first valid fixes and
        the anchor of their placement (the fixed vehicle whose pose topic sorts first); the measured velocities
        ((n, 4) rows) and their topics."""
        anchor = min(self.fixes, key=self.pose_topics.__getitem__) if self.fixes else None
        measured = {u: (topic, np.frombuffer(rows[:], dtype=float).reshape(-1, 4))
                    for u, (topic, rows) in self.velocities.items() if len(rows)}
        return {"states": {u: list(rows) for u, rows in self.states.items() if rows},
                "landings": {u: list(rows) for u, rows in self.landings.items() if rows},
                "fixes": {u: list(fix) for u, fix in self.fixes.items()}, "anchor": anchor,
                "velocities": {u: rows for u, (_, rows) in measured.items()},
                "velocity_topics": {u: topic for u, (topic, _) in measured.items()}}
