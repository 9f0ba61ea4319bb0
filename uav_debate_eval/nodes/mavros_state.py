"""MAVROS's autopilot state beside its poses: `<ns>/mavros/state` (mavros_msgs/State) of each vehicle whose pose
topic is MAVROS's gives its arming, for the verifier's parked pairs (two disarmed vehicles are no pair of the
separation constraint: safety.parked) and for the flight report's events, as the bag reader takes a recorded state
topic (io.rosbag.mavros). Without the mavros_msgs package (make setup generates it) the poses are read alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: As MAVROS publishes the state (sys_status: QoS(10).transient_local(), reliable): a reader that joins late still
#: gets the latest state, and a volatile reader would miss a vehicle standing disarmed since before it started.
STATE_QOS = QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                       durability=DurabilityPolicy.TRANSIENT_LOCAL)


def state_topic(pose_topic: str) -> str | None:
    """`<ns>/mavros/state` of a MAVROS pose or odometry topic (`<ns>/mavros/local_position/pose`), else None."""
    head, sep, _ = pose_topic.partition("/mavros/")
    return f"{head}/mavros/state" if sep else None


def state_class() -> Any:
    """mavros_msgs' State, or None when the package is not installed."""
    try:
        from mavros_msgs.msg import State
    except ImportError:
        return None
    return State


class MavrosState:
    """Each MAVROS vehicle's first state read and every change of its arming: (stamp s, armed)."""

    def __init__(self, node: Any, stamp: Callable[[Any], float], on_arming: Callable[[str, bool], None] | None,
                 callback_group: Any = None):
        """`stamp(header)`: the pose input's clock rule (a zero stamp is the node's clock); `on_arming(uav, armed)`:
        called on the first state and on each change."""
        self.node = node
        self.stamp = stamp
        self.on_arming = on_arming
        self.callback_group = callback_group
        self.cls = state_class()
        self.states: dict[str, list[tuple[float, bool]]] = {}
        self._subs: dict[str, Any] = {}
        self._missing_said = False

    def watch(self, uav: str, pose_topic: str) -> None:
        """Subscribe the state topic beside a vehicle's pose topic, if it is MAVROS's (once per vehicle)."""
        topic = state_topic(pose_topic)
        if topic is None or uav in self._subs:
            return
        if self.cls is None:
            if not self._missing_said:
                self._missing_said = True
                self.node.get_logger().warning(
                    "pose input: mavros_msgs is not installed (make setup generates it): MAVROS arming is not "
                    "read, so vehicles parked side by side count as pairs of the separation constraint")
            return
        self._subs[uav] = self.node.create_subscription(self.cls, topic, self._on_state(uav, topic), STATE_QOS,
                                                        callback_group=self.callback_group)

    def _on_state(self, uav: str, topic: str) -> Callable[[Any], None]:
        rows = self.states.setdefault(uav, [])

        def on_state(msg: Any) -> None:
            armed = bool(msg.armed)
            if rows and rows[-1][1] == armed:  # MAVROS repeats the state with every heartbeat
                return
            if not rows:
                self.node.get_logger().info(f"pose input: {uav}: arming from {topic} "
                                            f"({'armed' if armed else 'disarmed'})")
            rows.append((self.stamp(msg.header), armed))
            if self.on_arming is not None:
                self.on_arming(uav, armed)
        return on_state

    def flight_status(self) -> dict:
        """What the flight report needs: each vehicle's first state and arming changes."""
        return {"states": {u: list(rows) for u, rows in self.states.items() if rows}}
