"""`swarm_sim`: plays a built-in simulator scenario (or a contract CSV) live, so demos and tests have a swarm.

Poses go out as per-vehicle PoseStamped on `/<uav>/pose` (or Odometry, or one PoseArray), best effort
like a real autopilot's stream. Pacing follows the wall clock times `speed`; with `publish_clock` the
node also publishes /clock in scenario time so monitors running with use_sim_time see consistent
stamps at any speed-up. A vehicle with no sample at a tick (telemetry dropout) is simply not published;
link_ok is metadata of the recording and does not stop the stream. The scenario's ground truth is
published once, latched, on /swarm/sim/truth for tests. When the scenario is over (not looping) the node
says so, latched, on /swarm/sim/end, so the monitors close the flight instead of calling every vehicle stale.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator

import rclpy
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import Pose, PoseArray, PoseStamped, TransformStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.publisher import Publisher
from rosgraph_msgs.msg import Clock
from std_msgs.msg import String

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.mission_file import mission_to_yaml
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.px4 import LAND_DETECTED, STATUS
from uav_debate_eval.live.segments import end_message
from uav_debate_eval.nodes.params import declare
from uav_debate_eval.nodes.pose_input import pose_qos
from uav_debate_eval.nodes.px4_input import px4_qos
from uav_debate_eval.nodes.run import run_node
from uav_debate_eval.nodes.topics import SIM_END_TOPIC, TRUTH_TOPIC, latched
from uav_debate_eval.report.build import jsonable
from uav_debate_eval.sim.playback import Tick, csv_ticks
from uav_debate_eval.sim.px4_shape import (
    NAV_OFFBOARD,
    Px4Instance,
    instances,
    land_detected,
    local_position,
    vehicle_status,
)

SIM_POSE_TYPES = ("PoseStamped", "Odometry", "PoseArray", "VehicleLocalPosition", "TFMessage")
#: Never run the pacing timer faster than this; late ticks are caught up in one callback.
MAX_TIMER_HZ = 200.0
#: PX4 mode: a vehicle lower than this above its spawn's ground is landed (its vehicle_land_detected)
LANDED_HEIGHT_M = 0.2
#: How long a node with exit_when_done stays up after announcing the end of its flight.
END_LINGER_S = 1.0
#: With /clock, at most this many ticks per timer callback (the stream slows down rather than bursts).
MAX_BURST = 2


def _to_stamp(t: float) -> TimeMsg:
    sec = math.floor(t)
    return TimeMsg(sec=int(sec), nanosec=min(int(round((t - sec) * 1e9)), 999_999_999))


class SwarmSimNode(Node):
    """Publishes one scenario (or CSV) at `speed` x real time; `loop` restarts it (time jumps back, like a bag)."""

    def __init__(self, **kwargs):
        super().__init__("swarm_sim", **kwargs)
        def d(name: str, default, description: str, **kw):  # the flight is set up at start: read-only
            return declare(self, name, default, description, read_only=True, **kw)

        self.scenario = d("scenario", "formation", "built-in simulator scenario name")
        self.seed = d("seed", 0, "simulator seed (same seed, same flight)", lo=0)
        self.faults = d("faults", [], "faults to inject, e.g. near_miss (empty: the scenario's own)")
        self.n_uavs = d("uavs", 0, "number of vehicles (0: the scenario's default)", lo=0, hi=100000)
        self.duration_s = d("duration_s", 0.0, "scenario length, s (0: the scenario's default)", lo=0.0, hi=1e6)
        self.rate_hz = d("rate_hz", 0.0, "sample rate, Hz (0: the scenario's default)", lo=0.0, hi=10000.0)
        self.speed = d("speed", 1.0, "playback speed factor (1 = real time)", lo=1e-3, hi=1000.0)
        self.loop = d("loop", False, "restart at the end (stamps jump back, like ros2 bag play -l)")
        self.csv_file = d("csv_file", "", "play this contract CSV instead of a scenario")
        self.pose_type = d("pose_type", "PoseStamped", "PoseStamped, Odometry, PoseArray, VehicleLocalPosition "
                           "(as PX4 SITL: px4_msgs on /<uav>/fmu/out/..., best effort, NED from each vehicle's "
                           "spawn point with its own ref_lat/ref_lon and boot clock) or TFMessage (as Gazebo "
                           "through ros_gz_bridge: one tf2_msgs/TFMessage per tick on tf_topic, each vehicle a "
                           "model under the world, its base_link under it)")
        self.tf_topic = d("tf_topic", "/world/default/dynamic_pose/info", "topic when pose_type is TFMessage "
                          "(the world frame is the name after /world/)")
        self.topic_pattern = d("topic_pattern", "/{uav}/pose", "per-vehicle topic, {uav} is the name")
        self.pose_array_topic = d("pose_array_topic", "/swarm/poses", "topic when pose_type is PoseArray")
        self.frame_id = d("frame_id", "world", "frame of the published poses (ENU)")
        self.publish_clock = d("publish_clock", False, "publish /clock in scenario time (monitors: use_sim_time)")
        self.start_delay_s = d("start_delay_s", 1.0, "wait this long for subscribers before playing", lo=0.0,
                               hi=3600.0)
        self.qos_name = d("pose_qos", "sensor_data", "sensor_data (best effort, like an autopilot) or reliable")
        self.exit_when_done = d("exit_when_done", False, "stop the node when the scenario ends")
        self.wait_for_subscribers = d("wait_for_subscribers", 0, "after start_delay_s, also hold playback until "
                                      "every pose topic has this many subscribers (0: do not wait)", lo=0, hi=1000)
        self.wait_node = d("wait_for_node", "", "after start_delay_s, also hold playback until this node (by "
                               "name, e.g. safety_verifier) subscribes every pose topic; empty: do not wait")
        self.clock_start_s = d("clock_start_s", 1.0, "stamp of scenario time 0 with publish_clock (a zero stamp "
                               "means 'unset' to many tools)", lo=0.0, hi=1e10)
        if self.pose_type not in SIM_POSE_TYPES:
            raise ValueError(f"pose_type must be {', '.join(SIM_POSE_TYPES)}, got {self.pose_type!r}")

        self.traj, self.mission, truth, rate = self._load()
        self.uav_ids = list(self.traj.uav_ids)
        # With /clock the stamps are scenario time; otherwise wall time at the start plus scenario time.
        self.stamp_base = self.clock_start_s if self.publish_clock else time.time() + self.start_delay_s
        qos = pose_qos(self.qos_name)
        self._pubs: dict[str, Publisher] = {}
        self._px4: dict[str, Px4Instance] = {}
        self._status_pubs: dict[str, Publisher] = {}  # PX4: vehicle_status once a second (armed, offboard)
        self._landed_pubs: dict[str, Publisher] = {}  # and vehicle_land_detected (landed: on its spawn's ground)
        self._status_due: dict[str, float] = {}
        #: PX4: the sample times each vehicle's estimator reports without a horizontal position (a CSV's gps_ok = 0)
        self._gps_lost = {u: {t for t, ok in zip(tr.t.tolist(), tr.gps_ok.tolist(), strict=True) if ok < 0.5}
                          for u, tr in self.traj.tracks.items() if tr.gps_ok is not None}  # (NaN: not lost)
        if self.pose_type == "PoseArray":
            self._array_pub = self.create_publisher(PoseArray, self.pose_array_topic, qos)
        elif self.pose_type == "TFMessage":
            from uav_debate_eval.nodes.px4_input import message_class

            self._tf_cls = message_class("TFMessage")
            self._array_pub = self.create_publisher(self._tf_cls, self.tf_topic, qos)
        elif self.pose_type == "VehicleLocalPosition":
            self._make = _Px4Maker()
            # spawned on the ground below its first position: the world frame (the first vehicle's EKF origin) keeps
            # the scenario's heights, so the mission's geofence and waypoints hold as they are
            spawn = {u: self.traj.tracks[u].pos[0] * (1.0, 1.0, 0.0) for u in self.uav_ids}
            for inst in instances(self.uav_ids, spawn):
                self._px4[inst.uav] = inst
                self._pubs[inst.uav] = self.create_publisher(
                    self._make.cls, inst.topic("vehicle_local_position"), px4_qos(10))
                self._status_pubs[inst.uav] = self.create_publisher(
                    self._make.status_cls, inst.topic("vehicle_status"), px4_qos(10))
                if self._make.landed_cls is not None:
                    self._landed_pubs[inst.uav] = self.create_publisher(
                        self._make.landed_cls, inst.topic("vehicle_land_detected"), px4_qos(10))
        else:
            msg_type = PoseStamped if self.pose_type == "PoseStamped" else Odometry
            for uav in self.uav_ids:
                self._pubs[uav] = self.create_publisher(msg_type, self.topic_pattern.format(uav=uav), qos)
        self._clock_pub = self.create_publisher(Clock, "/clock", 10) if self.publish_clock else None
        self._truth_pub = self.create_publisher(String, TRUTH_TOPIC, latched())
        self._end_pub = self.create_publisher(String, SIM_END_TOPIC, latched())
        self._last_t = math.nan
        self._truth = {
            "scenario": self.scenario if not self.csv_file else None, "csv_file": self.csv_file or None,
            "seed": self.seed, "uavs": self.uav_ids, "stamp_base": self.stamp_base, "speed": self.speed,
            "pose_type": self.pose_type, "faults": jsonable(truth), "mission": mission_to_yaml(self.mission),
            "t_start": self.traj.t_start, "t_end": self.traj.t_end,
        }
        self._waits = bool(self.wait_for_subscribers or self.wait_node)
        if not self._waits:  # the stamps are known now; a waiting simulator says them when it starts
            self._truth_pub.publish(String(data=json.dumps(self._truth)))
        self.published = 0
        self.loops = 0
        self.finished = False
        self.finished_at = math.inf
        self._ticks = self._tick_source()
        self._pending: Tick | None = next(self._ticks, None)
        self._t0 = self._pending[0] if self._pending else 0.0
        self._wall0 = time.monotonic() + self.start_delay_s
        period = 1.0 / min(MAX_TIMER_HZ, max(1.0, rate * self.speed))
        self._timer = self.create_timer(period, self._on_timer)
        self.get_logger().info(
            f"playing {self.csv_file or self.scenario} ({len(self.uav_ids)} vehicles, {self.traj.duration:.1f} s) "
            f"as {self.pose_type} at {self.speed:g}x{' with /clock' if self.publish_clock else ''}")

    def _load(self) -> tuple[SwarmTrajectory, Mission, list, float]:
        if self.csv_file:
            from uav_debate_eval.io.csv_io import read_csv
            traj = read_csv(self.csv_file)
            self._sim = None
            return traj, Mission(name=traj.name or "csv"), [], 1.0 / max(traj.sample_period or 0.1, 1e-3)
        from uav_debate_eval.sim.scenarios import simulate
        self._sim = simulate(self.scenario, seed=self.seed, n_uavs=self.n_uavs or None,
                             duration_s=self.duration_s or None, rate_hz=self.rate_hz or None,
                             faults=self.faults or None)
        rate = self.rate_hz or 1.0 / max(self._sim.traj.sample_period or 0.1, 1e-3)
        return self._sim.traj, self._sim.mission, list(self._sim.truth), rate

    def _tick_source(self) -> Iterator[Tick]:
        return self._sim.ticks() if self._sim is not None else csv_ticks(self.traj)

    def _unmatched(self) -> list[str]:
        """Pose topics with fewer subscribers than wait_for_subscribers, or none of wait_for_node: poses sent now
        would be lost to them."""
        pubs = [self._array_pub] if self.pose_type in ("PoseArray", "TFMessage") else list(self._pubs.values())
        missing = [p.topic_name for p in pubs if p.get_subscription_count() < self.wait_for_subscribers]
        if self.wait_node:
            missing += [p.topic_name for p in pubs if p.topic_name not in missing and not any(
                info.node_name == self.wait_node for info in self.get_subscriptions_info_by_topic(p.topic_name))]
        return missing

    def _on_timer(self) -> None:
        now = time.monotonic()
        if now < self._wall0 or self.finished:
            return
        if self.published == 0 and self._waits:
            if missing := self._unmatched():
                self._wall0 = now  # playback starts once the last subscriber has matched
                self.get_logger().info(f"waiting for subscribers on {', '.join(missing[:5])}",
                                       throttle_duration_sec=5.0)
                return
            self._waits = False
            if not self.publish_clock:  # stamped from now: a late start must not put the stream in the past
                self.stamp_base = time.time()  # as without a wait: sample t0 stamped at its wall time + t0
            self._truth_pub.publish(String(data=json.dumps({**self._truth, "stamp_base": self.stamp_base})))
        horizon = self._t0 + (now - self._wall0) * self.speed
        burst = 0
        while self._pending is not None and self._pending[0] <= horizon:
            if self.publish_clock and burst == MAX_BURST:
                # Behind (CPU starved): with /clock, slow the stream down instead of bursting, so no
                # subscriber queue overflows and the monitors see continuous data in stream time.
                self._wall0 += (horizon - self._pending[0]) / self.speed
                break
            burst += 1
            self._publish(*self._pending)
            self._pending = next(self._ticks, None)
            if self._pending is None and self.loop:
                self.loops += 1
                self._ticks = self._tick_source()
                self._pending = next(self._ticks, None)
                self._wall0 = now
                horizon = self._t0
                if not self.publish_clock:
                    self.stamp_base += self.traj.duration  # wall stamps stay monotonic; sim time jumps back
        if self._pending is None and not self.finished:
            self.finished = True
            self.finished_at = now
            self._end_pub.publish(String(data=end_message(self.stamp_base + self._last_t)))
            self.get_logger().info(f"scenario finished: {self.published} poses published")

    def _publish(self, t: float, batch: list) -> None:
        stamp = _to_stamp(self.stamp_base + t)
        self._last_t = t
        if self._clock_pub is not None:
            self._clock_pub.publish(Clock(clock=stamp))
        if self.pose_type == "PoseArray":
            msg = PoseArray()
            msg.header.stamp = stamp
            msg.header.frame_id = self.frame_id
            by_uav = {uav: pos for uav, pos, _, _ in batch}
            msg.poses = [_pose(by_uav.get(uav)) for uav in self.uav_ids]
            self._array_pub.publish(msg)
            self.published += len(by_uav)
            return
        if self.pose_type == "TFMessage":
            self._array_pub.publish(self._tf(stamp, batch))
            self.published += sum(pos is not None for _, pos, _, _ in batch)
            return
        for uav, pos, vel, _ in batch:
            if self._px4:
                if pos is not None:
                    self._pubs[uav].publish(local_position(self._make, self._px4[uav], t, pos,
                                                           vel if vel is not None else (0.0, 0.0, 0.0),
                                                           xy_valid=t not in self._gps_lost.get(uav, ())))
                    self.published += 1
                if t >= self._status_due.get(uav, -math.inf):
                    self._status_due[uav] = t + 1.0
                    self._status_pubs[uav].publish(vehicle_status(self._make, self._px4[uav], t, True, NAV_OFFBOARD))
                    if uav in self._landed_pubs and pos is not None:  # within 0.2 m of its spawn's ground
                        self._landed_pubs[uav].publish(land_detected(self._make, self._px4[uav], t,
                                                                     bool(pos[2] < LANDED_HEIGHT_M)))
                continue
            if self.pose_type == "PoseStamped":
                msg = PoseStamped()
                msg.header.stamp = stamp
                msg.header.frame_id = self.frame_id
                msg.pose = _pose(pos)
            else:
                msg = Odometry()
                msg.header.stamp = stamp
                msg.header.frame_id = self.frame_id
                msg.child_frame_id = uav
                msg.pose.pose = _pose(pos)
                if vel is not None:
                    msg.twist.twist.linear.x, msg.twist.twist.linear.y, msg.twist.twist.linear.z = (
                        float(v) for v in vel)
            self._pubs[uav].publish(msg)
            self.published += 1


    def _tf(self, stamp: TimeMsg, batch: list):
        """Gazebo's dynamic_pose/info as ros_gz_bridge gives it: each vehicle a model under the world (named
        after /world/ in tf_topic), its base_link under it."""
        parts = [p for p in self.tf_topic.split("/") if p]
        world = parts[1] if len(parts) > 1 and parts[0] == "world" else self.frame_id
        transforms = []
        for uav, pos, _, _ in batch:
            if pos is None:
                continue
            for parent, child, xyz in ((world, uav, pos), (uav, f"{uav}::base_link", (0.0, 0.0, 0.0))):
                tr = TransformStamped()
                tr.header.stamp, tr.header.frame_id, tr.child_frame_id = stamp, parent, child
                tr.transform.translation.x, tr.transform.translation.y, tr.transform.translation.z = (
                    float(v) for v in xyz)
                tr.transform.rotation.w = 1.0
                transforms.append(tr)
        return self._tf_cls(transforms=transforms)


class _Px4Maker:
    """`make` for sim.px4_shape with rclpy's px4_msgs (generated at set-up)."""

    def __init__(self) -> None:
        from uav_debate_eval.nodes.px4_input import message_class, optional_class

        self.cls = message_class("VehicleLocalPosition")
        self.status_cls = message_class("VehicleStatus")
        self.landed_cls = optional_class("VehicleLandDetected")

    def __call__(self, msgtype: str, **fields):
        cls = {STATUS: self.status_cls, LAND_DETECTED: self.landed_cls}.get(msgtype, self.cls)
        return cls(**{k: v.tolist() if hasattr(v, "tolist") else v for k, v in fields.items()})


def _pose(pos) -> Pose:
    """A pose at `pos` with identity orientation; NaN (no fix this tick) when pos is None."""
    p = Pose()
    if pos is None:
        p.position.x = p.position.y = p.position.z = math.nan
    else:
        p.position.x, p.position.y, p.position.z = (float(v) for v in pos)
    p.orientation.w = 1.0
    return p


def main(args: list[str] | None = None) -> None:
    def spin(node: SwarmSimNode) -> None:
        # after the end, linger END_LINGER_S so the latched end message reaches every subscriber
        while rclpy.ok() and not (node.exit_when_done and node.finished
                                  and time.monotonic() - node.finished_at > END_LINGER_S):
            rclpy.spin_once(node, timeout_sec=0.1)

    run_node("swarm_sim", SwarmSimNode, spin, args)


if __name__ == "__main__":
    main()
