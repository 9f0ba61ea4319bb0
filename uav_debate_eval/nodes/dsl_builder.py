"""`dsl_builder`: buffers the live poses, cuts mission segments and publishes each closed segment's DSL.

Design (one code path in one process or many): this node is the only one that decides segment
boundaries. For each closed segment it publishes the DSL text on /swarm/dsl (CONTRACT.md §5) and the
boundaries as JSON on /swarm/segment; the debate panel keeps its own bounded buffer of the same poses
and evaluates the window named on /swarm/segment. Both topics are reliable and transient local, so a
restarted panel picks up the latest segment, and no pose data is copied between nodes.

Segment modes: `window` (every window_s of stream time), `phase` (at the mission phase boundaries of
dsl.segments.mission_segments), `veto` (when a veto episode ends, so the segment holds the whole
episode). Every mode also closes at max_segment_s, and when the stream goes idle (the flight ended).
"""

from __future__ import annotations

import json
import math
import time
from concurrent.futures import BrokenExecutor, ThreadPoolExecutor
from dataclasses import asdict, dataclass

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from std_msgs.msg import Bool, String

from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.nodes.live import (
    DSL_TOPIC,
    SEGMENT_TOPIC,
    VETO_TOPIC,
    ClockJumpGuard,
    add_heap_trim,
    declare,
    latched,
    mission_from_param,
    run_node,
    stop_pool,
    worker_pool,
)

MODES = ("window", "phase", "veto")


@dataclass
class Segment:
    """A closed mission segment in stream time (pose stamps)."""

    id: str
    t_start: float
    t_end: float
    reason: str  # window | phase | veto | max | idle | trigger

    def to_json(self, **extra) -> str:
        return json.dumps({**asdict(self), **extra})


class SegmentCutter:
    """Decides where segments end; pure logic (no ROS), driven by stream time and veto edges."""

    def __init__(self, mode: str, window_s: float, min_segment_s: float, max_segment_s: float):
        if mode not in MODES:
            raise ValueError(f"segment_mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        self.window_s = window_s
        self.min_segment_s = min_segment_s
        self.max_segment_s = max(max_segment_s, window_s if mode == "window" else min_segment_s)
        self.start: float | None = None
        self.count = 0
        self._veto = False

    def reset(self) -> None:
        """After a backwards time jump: forget the open segment (its samples are gone)."""
        self.start = None
        self._veto = False

    def _close(self, t_end: float, reason: str) -> Segment | None:
        if self.start is None or t_end - self.start < self.min_segment_s:
            return None
        self.count += 1
        seg = Segment(f"S{self.count}", self.start, t_end, reason)
        self.start = t_end
        return seg

    def on_time(self, t: float) -> Segment | None:
        """Called with the newest stream time; closes window and over-long segments."""
        if self.start is None:
            self.start = t
            return None
        if self.mode == "window" and t - self.start >= self.window_s:
            return self._close(self.start + self.window_s, "window")
        if t - self.start >= self.max_segment_s:
            return self._close(t, "max")
        return None

    def on_veto(self, value: bool, t: float) -> Segment | None:
        """A veto edge at stream time t; in veto mode the falling edge closes the segment."""
        falling = self._veto and not value
        self._veto = value
        if self.mode == "veto" and falling:
            return self._close(t, "veto")
        return None

    def on_phase_boundary(self, t: float) -> Segment | None:
        return self._close(t, "phase") if self.mode == "phase" else None

    def on_idle(self, t: float) -> Segment | None:
        """The stream went quiet: close what is open so the end of a flight is evaluated too."""
        return self._close(t, "idle")


def segment_dsl(traj, mission, budget_tokens: int) -> tuple[str, int]:
    """A segment's DSL text and token count (safety included so violations appear as events); runs in the
    worker process."""
    from uav_debate_eval.dsl.builder import build_dsl
    from uav_debate_eval.safety.checker import check_trajectory
    if not traj.uav_ids:
        return "", 0
    doc = build_dsl(traj, mission, safety=check_trajectory(traj, mission), budget_tokens=budget_tokens)
    return doc.text, doc.tokens


class DslBuilderNode(Node):
    """Fills a bounded StreamingSwarm from the shared pose input and publishes each closed segment."""

    def __init__(self, pose_source=None, **kwargs):
        """`pose_source`: the PoseInput of another node in the same process to take poses from (see `live`)."""
        super().__init__("dsl_builder", **kwargs)
        self.mission_file = declare(self, "mission_file", "", "mission YAML (empty: the packaged default mission)")
        mode = declare(self, "segment_mode", "window", "where segments end: window, phase or veto")
        window_s = declare(self, "window_s", 30.0, "segment length in window mode (stream seconds)")
        min_s = declare(self, "min_segment_s", 2.0, "shorter segments are merged into the next one")
        max_s = declare(self, "max_segment_s", 60.0, "any segment closes at this length (bounds the buffer)")
        self.idle_flush_s = declare(self, "idle_flush_s", 3.0, "close the open segment after this much silence "
                                    "(wall seconds)")
        buffer_s = declare(self, "buffer_s", 90.0, "stream seconds kept per vehicle (must exceed max_segment_s)")
        self.rate_hint_hz = declare(self, "rate_hint_hz", 50.0, "expected pose rate; sizes the ring buffers")
        self.budget_tokens = declare(self, "dsl_budget_tokens", 1500, "token budget of each segment's DSL")
        self.phase_check_s = declare(self, "phase_check_s", 2.0, "how often phase mode looks for a boundary")
        self.clock_jump_s = declare(self, "clock_jump_s", 1.0, "a stamp this much older than the newest resets")

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
            from uav_debate_eval.nodes.pose_input import PoseInput
            self.poses = PoseInput(self, self._on_pose)
        else:  # same process as the verifier: its subscriptions feed both (its pose parameters apply)
            self.poses = pose_source
            pose_source.add_listener(self._on_pose)
        self.dsl_pub = self.create_publisher(String, DSL_TOPIC, latched())
        self.segment_pub = self.create_publisher(String, SEGMENT_TOPIC, latched(10))
        self.create_subscription(Bool, VETO_TOPIC, self._on_veto, latched())
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

    def _on_veto(self, msg: Bool) -> None:
        if math.isfinite(self.swarm.newest_t):
            self._emit(self.cutter.on_veto(bool(msg.data), self.swarm.newest_t))

    def _on_timer(self) -> None:
        t = self.swarm.newest_t
        if not math.isfinite(t):
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
        from uav_debate_eval.dsl.segments import mission_segments
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

    def _publish_segment(self, seg: Segment, traj) -> None:
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
        self.segment_pub.publish(String(data=seg.to_json(uavs=list(traj.uav_ids), dsl_tokens=tokens)))
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
