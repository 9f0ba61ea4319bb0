"""`debate_panel`: evaluates each closed mission segment (and on demand) and publishes the report JSON.

The panel keeps its own bounded buffer of the poses (the same shared pose input as every node) and
evaluates the window that dsl_builder names on /swarm/segment, so nothing but boundaries crosses
between the two nodes. In one process (`uav-debate-eval live`) the builder hands each segment's
samples over directly instead, so every pose is buffered once. Everything else is the ROS-free core:
the evaluation service (live.evaluator: one worker process, skips, LLM fallback), the live veto override
(live.veto_history) and the flight-level report written to OUTPUT_DIR/flight/ at the end (live.flight).
"""

from __future__ import annotations

import json
import math
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.rosbag_record import SESSION_BAG, SessionBag
from uav_debate_eval.live.config import mission_from_param
from uav_debate_eval.live.evaluator import SegmentEvaluator
from uav_debate_eval.live.segment_job import PanelSettings
from uav_debate_eval.live.segments import Segment
from uav_debate_eval.live.veto_history import VetoHistory, status_evidence
from uav_debate_eval.nodes.executors import BlockingServiceNode, spin_nodes
from uav_debate_eval.nodes.params import declare
from uav_debate_eval.nodes.pose_input import PoseInput
from uav_debate_eval.nodes.run import ClockJumpGuard, add_heap_trim, run_node
from uav_debate_eval.nodes.topics import REPORT_TOPIC, SEGMENT_TOPIC, STATUS_TOPIC, TRIGGER_SERVICE, VETO_TOPIC, latched
from uav_debate_eval.report.precision import rounded


class DebatePanelNode(Node):
    """Runs the evaluation on each closed segment and on /swarm/evaluation/trigger (served by `trigger_server`,
    which whoever spins the panel spins too: main() and `live`)."""

    def __init__(self, builder=None, **kwargs):
        """`builder`: a DslBuilderNode in the same process to share poses and segments with (see `live`)."""
        super().__init__("debate_panel", **kwargs)
        def d(name: str, default, description: str, **kw):  # every panel setting is read once, at start
            return declare(self, name, default, description, read_only=True, **kw)

        self.mission_file = d("mission_file", "", "mission YAML (empty: the packaged default mission)")
        self.settings = PanelSettings(
            backend=d("llm_backend", "rules", "panel backend: rules, local or openai"),
            model=d("llm_model", "", "model name or GGUF path (empty: the backend's default)"),
            base_url=d("llm_base_url", "", "OpenAI-compatible server URL (openai backend)"),
            debate_config=d("debate_config", "", "debate protocol YAML (empty: defaults)"),
            max_layer=d("max_layer", 3, "highest debate layer the router may pick (1-3)", lo=1, hi=3),
            max_rounds=d("max_rounds", 0, "cap on rounds per layer (0: the protocol's)", lo=0, hi=100),
            max_tokens=d("max_tokens", 0, "completion tokens per agent turn (0: the protocol's)", lo=0, hi=1 << 20),
            token_budget=d("token_budget", 0, "tokens per segment (0: the protocol's)", lo=0, hi=1 << 24),
            output_dir=d("output_dir", "out/live", "where report files are written"),
            keep_reports=d("keep_reports", 20, "report directories kept on disk (oldest removed)", lo=1, hi=100000),
            write_files=d("write_files", True, "write report.json/md/html and figures per segment"),
            llm_timeout_s=d("llm_timeout_s", 0.0, "an LLM evaluation taking longer is redone with rules (0: wait)",
                            lo=0.0, hi=86400.0),
        )
        record = d("record_flight", True, "write OUTPUT_DIR/flight/flight.mcap (the flight's poses, annotated) and, "
                   "for PX4 / Gazebo input, OUTPUT_DIR/flight/rosbag2 (the pose messages as received)")
        self.backend = self.settings.backend
        self.output_dir = Path(self.settings.output_dir)
        self.max_pending = d("max_pending", 2, "segments waiting for the panel; more are skipped", lo=1, hi=1000)
        buffer_s = d("buffer_s", 90.0, "stream seconds kept per vehicle (must exceed a segment)", lo=1.0, hi=86400.0)
        rate_hint = d("rate_hint_hz", 50.0, "expected pose rate; sizes the ring buffers", lo=0.1, hi=10000.0)
        clock_jump_s = d("clock_jump_s", 1.0, "a stamp this much older than the newest resets", lo=0.0, hi=3600.0)

        self.mission = mission_from_param(self.mission_file)
        self.jumps = ClockJumpGuard(self, "panel buffer and veto history")
        self.vetoes = VetoHistory()

        self.report_pub = self.create_publisher(String, REPORT_TOPIC, latched())
        if builder is None:  # own buffer, boundaries from /swarm/segment (a process of its own)
            self.swarm = StreamingSwarm(capacity=max(2, int(buffer_s * rate_hint)), clock_jump_s=clock_jump_s)
            self.poses = PoseInput(self, self._on_pose)
            # depth 1: a restarted panel takes only the newest latched segment (older ones left its buffer)
            self.create_subscription(String, SEGMENT_TOPIC, self._on_segment, latched(1))
            add_heap_trim(self)  # (in one process with the builder, its trim covers the process)
        else:  # same process: the builder hands over each segment's samples (no second copy of every pose)
            self.swarm = builder.swarm
            self.poses = builder.poses
            builder.segment_listeners.append(self._on_builder_segment)
        #: PX4 / Gazebo input: the messages as received, a rosbag2 MCAP `evaluate` replays to the flight report
        bag = SessionBag(self.output_dir / "flight" / SESSION_BAG)
        self.session_bag = bag if record and self.settings.write_files and self.poses.record_to(bag) else None
        self.evaluator = SegmentEvaluator(self.settings, self.mission, self.vetoes, max_pending=self.max_pending,
                                          publish=self._publish, log=self._log, clock_jumps=lambda: self.jumps.jumps,
                                          swarm=self.swarm, session=self.session, record=record)
        self.create_subscription(Bool, VETO_TOPIC, self._on_veto, latched())
        self.create_subscription(DiagnosticArray, STATUS_TOPIC, self._on_status, 10)
        # the trigger waits for its evaluation: on a node (and so a thread) of its own, it holds up nothing else
        self.trigger_server = BlockingServiceNode(self, Trigger, TRIGGER_SERVICE, self.on_trigger)
        self.get_logger().info(f"panel backend {self.backend}, reports in {self.output_dir} "
                               f"(keep {self.settings.keep_reports}), mission {self.mission.name!r}")

    # -- inputs ---------------------------------------------------------------------------------

    def _on_pose(self, uav: str, t: float, pos, vel=None) -> None:
        if self.swarm.add(uav, t, pos, vel):
            self._check_jump()

    def _check_jump(self) -> None:
        """After a backwards time jump the veto history and the last segment end are meaningless."""
        if self.jumps.check(self.swarm.resets, self.swarm.newest_t):
            self.vetoes.clear()
            self.evaluator.clock_jumped()

    def _on_veto(self, msg: Bool) -> None:
        self._check_jump()
        self.vetoes.on_veto(msg.data, self.swarm.newest_t if math.isfinite(self.swarm.newest_t) else 0.0)

    def _on_status(self, msg: DiagnosticArray) -> None:
        self.vetoes.on_status([status_evidence(s) for s in msg.status], self.swarm.newest_t)

    def _on_segment(self, msg: String) -> None:
        seg = json.loads(msg.data)
        # in the builder's flight time: a panel restarted mid-flight dates its reports as the first one did
        origin = seg.get("flight_origin")
        self._take(seg["id"], seg["t_start"], seg["t_end"], seg.get("reason", "segment"), None,
                   float(origin) if origin is not None else None)

    def _on_builder_segment(self, seg: Segment, traj: SwarmTrajectory) -> None:
        self._take(seg.id, seg.t_start, seg.t_end, seg.reason, traj)

    def _take(self, seg_id: str, t0: float, t1: float, reason: str, traj: SwarmTrajectory | None,
              origin: float | None = None) -> None:
        if self.evaluator.admit(seg_id, t0):
            self.submit(seg_id, t0, t1, reason, traj, origin)

    def on_trigger(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        t1 = self.swarm.newest_t
        if not math.isfinite(t1):
            response.success, response.message = False, "no poses received yet"
            return response
        report = self.submit("T", self.evaluator.last_end, t1, "trigger").result()
        response.success = report is not None
        response.message = json.dumps(rounded(report)) if report is not None else "evaluation failed (see the node log)"
        return response

    def submit(self, seg_id: str, t0: float, t1: float, reason: str, traj: SwarmTrajectory | None = None,
               origin: float | None = None) -> Future:
        """Queue one evaluation of [t0, t1] (the buffered poses when `traj` is None, in flight time since `origin`,
        default this node's first pose)."""
        if traj is None:
            traj = self.swarm.window(t0, t1, name=seg_id, origin=origin)
        return self.evaluator.submit(seg_id, t0, t1, reason, traj)

    def session(self) -> dict:
        """The live session for the flight report's Inputs: pose topics, vehicles, clock."""
        sim_time = bool(self.get_parameter("use_sim_time").value)
        clock = "ROS time from /clock (use_sim_time)" if sim_time else "system clock"
        px4, mavros = self.poses.flight_status(), self.poses.mavros_status()
        return {"node": self.get_fully_qualified_name(), "pose_type": self.poses.pose_type,
                "topics": self.poses.topics, "vehicles": sorted(self.swarm.last_seen()) or list(self.poses.uav_names),
                "clock": (f"PX4 timestamp_sample moved onto this node's receive clock ({clock})" if px4 else
                          f"pose header stamps ({clock})" if not sim_time else clock),
                **({"px4": px4} if px4 else {}), **({"mavros": mavros} if mavros else {}),
                **({"local_frames": local} if (local := self.poses.local_frames()) else {})}

    def _publish(self, report: dict) -> None:
        if self.context.ok():  # (shutting down: nothing to publish to)
            self.report_pub.publish(String(data=json.dumps(rounded(report))))

    def _log(self, level: str, text: str) -> None:
        # one call per level: rclpy's logger refuses a second severity from the same line of code
        logger = self.get_logger()
        if level == "error":
            logger.error(text)
        elif level == "warning":
            logger.warning(text)
        else:
            logger.info(text)

    # the live command's view of the evaluation
    pending = property(lambda self: self.evaluator.pending)
    evaluated = property(lambda self: self.evaluator.evaluated)
    flight_report = property(lambda self: self.evaluator.flight_report)
    skipped = property(lambda self: list(self.evaluator.skipped))

    def close_flight(self, stop: threading.Event | None = None) -> Path | None:
        if self.session_bag is not None:  # the bag and the flight's tape end with the same message
            self.poses.end_recording(self.evaluator.end_tape)
        self._close_bag()
        return self.evaluator.close_flight(stop)

    def _close_bag(self) -> None:
        if self.session_bag is not None and (path := self.session_bag.close()) is not None:
            self.get_logger().info(f"session bag: {path} ({self.session_bag.messages} messages)")

    def destroy_node(self) -> None:
        self._close_bag()
        if (where := self.evaluator.close()) is not None:
            # (after SIGTERM rclpy's context is down and /rosout gone: the line goes to stderr)
            print(f"[debate_panel] flight report: {where}", file=sys.stderr)
        self.trigger_server.destroy_node()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node("debate_panel", DebatePanelNode, lambda node: spin_nodes([node, node.trigger_server]), args)


if __name__ == "__main__":
    main()
