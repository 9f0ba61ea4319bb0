"""`dsl_builder`: buffers the live poses, cuts mission segments and publishes each closed segment's DSL.

Design (one code path in one process or many): this node is the only one that decides segment
boundaries. For each closed segment it publishes the DSL text on /swarm/dsl (CONTRACT.md §5) and the
boundaries as JSON on /swarm/segment; the debate panel keeps its own bounded buffer of the same poses
and evaluates the window named on /swarm/segment. Both topics are reliable and transient local, so a
restarted panel picks up the latest segment, and no pose data is copied between nodes.

Segment modes: `window` (every window_s of stream time), `phase` (at the mission phase boundaries of
dsl.segments.mission_segments), `veto` (when a veto episode ends, so the segment holds the whole
episode). Every mode also closes at max_segment_s, when the stream goes idle, and when the simulator announces the
end of its flight on /swarm/sim/end. The cutting itself is live.segments (no ROS).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import BrokenExecutor, ThreadPoolExecutor

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from std_msgs.msg import Bool, String

from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.dsl.segments import mission_segments
from uav_debate_eval.live.config import mission_from_param
from uav_debate_eval.live.segments import Segment, SegmentCutter, announced_end, segment_dsl
from uav_debate_eval.live.workers import stop_pool, worker_pool
from uav_debate_eval.nodes.params import declare
from uav_debate_eval.nodes.pose_input import PoseInput
from uav_debate_eval.nodes.run import ClockJumpGuard, add_heap_trim, run_node
from uav_debate_eval.nodes.topics import DSL_TOPIC, SEGMENT_TOPIC, SIM_END_TOPIC, VETO_TOPIC, latched


class DslBuilderNode(Node):
    """Fills a bounded StreamingSwarm from the shared pose input and publishes each closed segment."""

    def __init__(self, pose_source=None, **kwargs):
        """`pose_source`: the PoseInput of another node in the same process to take poses from (see `live`)."""
        super().__init__("dsl_builder", **kwargs)
        def d(name: str, default, description: str, **kw):  # read once at start: a later change is refused
            return declare(self, name, default, description, read_only=True, **kw)

        self.mission_file = d("mission_file", "", "mission YAML (empty: the packaged default mission)")
        mode = d("segment_mode", "window", "where segments end: window, phase or veto")
        window_s = d("window_s", 30.0, "segment length in window mode (stream seconds)", lo=0.5, hi=86400.0)
        min_s = d("min_segment_s", 2.0, "shorter segments are merged into the next one", lo=0.0, hi=86400.0)
        max_s = d("max_segment_s", 60.0, "any segment closes at this length (bounds the buffer)", lo=0.5, hi=86400.0)
        self.idle_flush_s = d("idle_flush_s", 3.0, "close the open segment after this much silence (wall seconds)",
                              lo=0.1, hi=3600.0)
        buffer_s = d("buffer_s", 90.0, "stream seconds kept per vehicle (must exceed max_segment_s)", lo=1.0,
                     hi=86400.0)
        self.rate_hint_hz = d("rate_hint_hz", 50.0, "expected pose rate; sizes the ring buffers", lo=0.1, hi=10000.0)
        self.budget_tokens = d("dsl_budget_tokens", 1500, "token budget of each segment's DSL", lo=50, hi=1 << 20)
        self.phase_check_s = d("phase_check_s", 2.0, "how often phase mode looks for a boundary", lo=0.1, hi=3600.0)
        self.clock_jump_s = d("clock_jump_s", 1.0, "a stamp this much older than the newest resets", lo=0.0,
                              hi=3600.0)

        self.mission = mission_from_param(self.mission_file)
        self.cutter = SegmentCutter(mode, window_s, min_s, max_s)
        self.swarm = StreamingSwarm(capacity=max(2, int(buffer_s * self.rate_hint_hz)), clock_jump_s=self.clock_jump_s)
        self.jumps = ClockJumpGuard(self, "segment buffers")
        self.segments: list[Segment] = []  # the last few, for tests and the live command's progress view
        #: In-process consumers of closed segments, called with (segment, its samples) on the callback thread.
        self.segment_listeners: list = []
        self._last_sample_wall = math.inf
        self._last_phase_check = 0.0
        # The DSL is built in a worker process (fed by one thread): pose callbacks and, in `live`, the safety
        # verifier keep their pace while a big segment is summarised.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dsl")
        self._pool = worker_pool()
        self._closing = False  # set by destroy_node: a job cut short then is no error
        add_heap_trim(self)

        if pose_source is None:
            self.poses = PoseInput(self, self._on_pose)
        else:  # same process as the verifier: its subscriptions feed both (its pose parameters apply)
            self.poses = pose_source
            pose_source.add_listener(self._on_pose)
        self.dsl_pub = self.create_publisher(String, DSL_TOPIC, latched())
        self.segment_pub = self.create_publisher(String, SEGMENT_TOPIC, latched(10))
        self.create_subscription(Bool, VETO_TOPIC, self._on_veto, latched())
        self.create_subscription(String, SIM_END_TOPIC, self._on_flight_end, latched())
        steady = Clock(clock_type=ClockType.STEADY_TIME)  # idle detection must work when /clock stops too
        self.create_timer(0.5, self._on_timer, clock=steady)
        self.get_logger().info(f"segments: {mode} (window {window_s:g} s, max {self.cutter.max_segment_s:g} s), "
                               f"mission {self.mission.name!r}")

    def _on_pose(self, uav: str, t: float, pos, vel=None) -> None:
        if not self.swarm.add(uav, t, pos, vel):
            return
        self._last_sample_wall = time.monotonic()
        if self.jumps.check(self.swarm.resets, self.swarm.newest_t):
            self.cutter.reset()
        self.cutter.on_sample(t)

    def _on_veto(self, msg: Bool) -> None:
        if math.isfinite(self.swarm.newest_t):
            self._emit(self.cutter.on_veto(bool(msg.data), self.swarm.newest_t))

    def _on_flight_end(self, msg: String) -> None:
        """The simulator's flight is over: close the open segment once its last poses are in (no idle wait)."""
        if not math.isfinite(self.swarm.newest_t):
            return  # no pose yet: nothing to close
        if seg := self.cutter.on_end(announced_end(msg.data), self.swarm.newest_t):
            self._emit(seg)
            self._last_sample_wall = math.inf
        elif self.cutter.end_t is not None:
            self.get_logger().info(f"flight end announced at t={self.cutter.end_t:.2f}: closing once its poses are in")

    def close_segment(self, reason: str) -> Segment | None:
        """Close the open segment at the newest stream time (the end of a flight or of the session)."""
        seg = self.cutter.on_idle(self.swarm.newest_t, reason) if math.isfinite(self.swarm.newest_t) else None
        self._emit(seg)
        self._last_sample_wall = math.inf
        return seg

    def _on_timer(self) -> None:
        t = self.swarm.newest_t
        if not math.isfinite(t):
            return
        if self.cutter.end_due(t):
            self.close_segment("end")
            return
        if time.monotonic() - self._last_sample_wall > self.idle_flush_s:
            self._emit(self.cutter.on_idle(t))
            self._last_sample_wall = math.inf  # once per silence
            return
        self._emit(self.cutter.on_time(t))
        if self.cutter.mode == "phase" and time.monotonic() - self._last_phase_check >= self.phase_check_s:
            self._last_phase_check = time.monotonic()
            self._emit(self._phase_boundary(t))

    def _phase_boundary(self, t: float) -> Segment | None:
        if self.cutter.start is None:
            return None
        traj = self.swarm.window(self.cutter.start, t)
        if not traj.uav_ids:
            return None
        parts = mission_segments(traj, self.mission, mode="phase")
        return self.cutter.on_phase_boundary(parts[0].t_end) if len(parts) > 1 else None

    def _emit(self, seg: Segment | None) -> None:
        """Snapshot the segment's samples now; build and publish its DSL in the worker thread."""
        if seg is not None:
            traj = self.swarm.window(seg.t_start, seg.t_end, name=seg.id)
            for listener in self.segment_listeners:
                listener(seg, traj)
            self._worker.submit(self._publish_segment, seg, traj)

    def _publish_segment(self, seg: Segment, traj: SwarmTrajectory) -> None:
        try:
            text, tokens = self._pool.submit(segment_dsl, traj, self.mission, self.budget_tokens).result()
        except Exception as exc:  # a DSL bug must not stop segmentation; the panel still gets the boundaries
            if self._closing:
                return
            self.get_logger().error(f"segment {seg.id}: DSL failed: {exc!r}")
            if isinstance(exc, BrokenExecutor):
                self._pool = worker_pool()
            text, tokens = "", 0
        if not self.context.ok():
            return
        self.dsl_pub.publish(String(data=text))
        self.segment_pub.publish(String(data=seg.to_json(uavs=list(traj.uav_ids), dsl_tokens=tokens,
                                                                flight_origin=traj.t0)))
        self.segments = [*self.segments[-9:], seg]
        self.get_logger().info(f"segment {seg.id} closed ({seg.reason}): t=[{seg.t_start:.2f}, {seg.t_end:.2f}] "
                               f"{len(traj.uav_ids)} vehicles, DSL {tokens} tokens")

    def destroy_node(self) -> None:
        self._closing = True
        stop_pool(self._pool)
        self._worker.shutdown(wait=True, cancel_futures=True)
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node("dsl_builder", DslBuilderNode, args=args)


if __name__ == "__main__":
    main()
