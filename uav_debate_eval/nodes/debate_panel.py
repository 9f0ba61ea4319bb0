"""`debate_panel`: evaluates each closed mission segment (and on demand) and publishes the report JSON.

The panel keeps its own bounded buffer of the poses (the same shared pose input as every node) and
evaluates the window that dsl_builder names on /swarm/segment, so nothing but boundaries crosses
between the two nodes. In one process (`uav-debate-eval live`) the builder hands each segment's
samples over directly instead, so every pose is buffered once. The evaluation (pipeline.evaluate:
metrics, DSL, debate) runs in one worker *process* fed by one thread, so the executor (and the
safety verifier beside it) keeps taking poses and veto messages while the LLM talks.

Live override (live.veto): a segment that overlaps a veto episode is `risky` and `vetoed` whatever the
panel concluded. Evaluation (live.segment_job) falls back to `rules` when the LLM fails. At the end of the
session the panel writes the flight-level report (live.flight) to OUTPUT_DIR/flight/.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from concurrent.futures import BrokenExecutor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.live.config import mission_from_param
from uav_debate_eval.live.flight import FlightRecord, write_flight_report
from uav_debate_eval.live.segment_job import PanelJob, PanelSettings, evaluate_segment, next_seq
from uav_debate_eval.live.veto import EVIDENCE_PER_EPISODE, VetoEpisode, level_of, status_evidence
from uav_debate_eval.live.workers import stop_pool, worker_pool
from uav_debate_eval.nodes.params import declare
from uav_debate_eval.nodes.pose_input import PoseInput
from uav_debate_eval.nodes.run import ClockJumpGuard, add_heap_trim, run_node
from uav_debate_eval.nodes.topics import REPORT_TOPIC, SEGMENT_TOPIC, STATUS_TOPIC, TRIGGER_SERVICE, VETO_TOPIC, latched


class DebatePanelNode(Node):
    """Runs the evaluation on each closed segment and on /swarm/evaluation/trigger."""

    #: The Trigger service waits for its evaluation; a second executor thread keeps veto, status and segments
    #: flowing meanwhile (used by main() and by `live`).
    EXECUTOR_THREADS = 2

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
        self.backend = self.settings.backend
        self.output_dir = Path(self.settings.output_dir)
        self.max_pending = d("max_pending", 2, "segments waiting for the panel; more are skipped", lo=1, hi=1000)
        buffer_s = d("buffer_s", 90.0, "stream seconds kept per vehicle (must exceed a segment)", lo=1.0, hi=86400.0)
        rate_hint = d("rate_hint_hz", 50.0, "expected pose rate; sizes the ring buffers", lo=0.1, hi=10000.0)
        clock_jump_s = d("clock_jump_s", 1.0, "a stamp this much older than the newest resets", lo=0.0, hi=3600.0)

        self.mission = mission_from_param(self.mission_file)
        self.jumps = ClockJumpGuard(self, "panel buffer and veto history")
        self.episodes: deque[VetoEpisode] = deque(maxlen=200)
        self._veto = False
        self._lock = threading.Lock()  # episodes are read by the worker, written by callbacks
        # One thread hands segments to one worker *process*: the debate (numpy, the LLM) never holds this
        # process's GIL, so the executor (and, in `live`, the safety verifier) keeps its pace.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="panel")
        self._pool = worker_pool()
        self._closing = False  # set by destroy_node: an evaluation cut short then is no error
        self._pending = 0
        self.skipped: deque[str] = deque(maxlen=100)
        #: The last evaluated segments: id, label, vetoed, summary and report directory (None: not written).
        self.evaluated: deque[dict] = deque(maxlen=50)
        self._seen_segments: deque[str] = deque(maxlen=50)
        self._last_end = -math.inf
        self._seq = next_seq(self.output_dir)
        #: Every evaluated segment folded into the flight-level report written by `close_flight`.
        self.flight = FlightRecord()
        self._flight_written: Path | None = None

        self.report_pub = self.create_publisher(String, REPORT_TOPIC, latched())
        if builder is None:  # own buffer, boundaries from /swarm/segment (a process of its own)
            self.swarm = StreamingSwarm(capacity=max(2, int(buffer_s * rate_hint)), clock_jump_s=clock_jump_s)
            self.poses = PoseInput(self, self._on_pose)
            # depth 1: a restarted panel takes only the newest latched segment (older ones left its buffer)
            self.create_subscription(String, SEGMENT_TOPIC, self._on_segment, latched(1))
            add_heap_trim(self)  # (in one process with the builder, its trim covers the process)
        else:  # same process: the builder hands over each segment's samples (no second copy of every pose)
            self.swarm = builder.swarm
            builder.segment_listeners.append(self._on_builder_segment)
        self.create_subscription(Bool, VETO_TOPIC, self._on_veto, latched())
        self.create_subscription(DiagnosticArray, STATUS_TOPIC, self._on_status, 10)
        # The trigger waits for the worker: on its own group, so poses keep flowing meanwhile.
        self.create_service(Trigger, TRIGGER_SERVICE, self._on_trigger,
                            callback_group=MutuallyExclusiveCallbackGroup())
        self.get_logger().info(f"panel backend {self.backend}, reports in {self.output_dir} "
                               f"(keep {self.settings.keep_reports}), mission {self.mission.name!r}")

    # -- inputs ---------------------------------------------------------------------------------

    def _on_pose(self, uav: str, t: float, pos, vel=None) -> None:
        if self.swarm.add(uav, t, pos, vel):
            self._check_jump()

    def _check_jump(self) -> None:
        """After a backwards time jump the veto history and the last segment end are meaningless."""
        if self.jumps.check(self.swarm.resets, self.swarm.newest_t):
            with self._lock:
                self.episodes.clear()
                self._last_end = -math.inf

    def _on_veto(self, msg: Bool) -> None:
        self._check_jump()
        t = self.swarm.newest_t if math.isfinite(self.swarm.newest_t) else 0.0
        with self._lock:
            if msg.data and not self._veto:
                self.episodes.append(VetoEpisode(t))
            elif self._veto and not msg.data and self.episodes:
                self.episodes[-1].t_off = t
            self._veto = bool(msg.data)

    def _on_status(self, msg: DiagnosticArray) -> None:
        with self._lock:
            if not self._veto or not self.episodes:
                return
            ep = self.episodes[-1]
            for status in msg.status:
                if level_of(status.level) < level_of(DiagnosticStatus.ERROR) or status.name.endswith("/veto"):
                    continue
                ev = status_evidence(status)
                t = ev.t
                if t is not None and ep.t_violating is None:
                    ep.t_on = t  # the verifier's own time of the violation (the Bool veto carries no stamp)
                ep.t_violating = t if t is not None else self.swarm.newest_t
                if len(ep.evidence) < EVIDENCE_PER_EPISODE:
                    ep.evidence.append(ev)

    def _on_segment(self, msg: String) -> None:
        seg = json.loads(msg.data)
        self._take(seg["id"], seg["t_start"], seg["t_end"], seg.get("reason", "segment"), None)

    def _on_builder_segment(self, seg, traj) -> None:
        self._take(seg.id, seg.t_start, seg.t_end, seg.reason, traj)

    def _take(self, seg_id: str, t0: float, t1: float, reason: str, traj) -> None:
        key = f"{seg_id}@{t0:.3f}"
        if key in self._seen_segments:  # a latched segment seen again after a restart
            return
        self._seen_segments.append(key)
        if self._pending >= self.max_pending:
            self.skipped.append(seg_id)
            self.get_logger().warning(f"segment {seg_id} skipped: {self._pending} segments still waiting "
                                      "for the panel (the LLM is slower than the segments)")
            return
        self.submit(seg_id, t0, t1, reason, traj)

    def _on_trigger(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        t1 = self.swarm.newest_t
        if not math.isfinite(t1):
            response.success, response.message = False, "no poses received yet"
            return response
        t0 = self._last_end if math.isfinite(self._last_end) else -math.inf
        report = self.submit("T", t0, t1, "trigger").result()
        response.success = report is not None
        response.message = json.dumps(report) if report is not None else "evaluation failed (see the node log)"
        return response

    # -- evaluation -----------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Evaluations queued or running."""
        return self._pending

    def submit(self, seg_id: str, t0: float, t1: float, reason: str, traj=None) -> Future:
        """Queue one evaluation of [t0, t1]; the future resolves to the published report (or None)."""
        if traj is None:
            traj = self.swarm.window(t0, t1, name=seg_id)
        with self._lock:
            self._last_end = max(self._last_end, t1)
            self._pending += 1
        return self._worker.submit(self._evaluate_safely, seg_id, t0, t1, reason, traj)

    def _evaluate_safely(self, seg_id: str, t0: float, t1: float, reason: str, traj: SwarmTrajectory) -> dict | None:
        try:
            return self._evaluate(seg_id, t0, t1, reason, traj)
        except Exception as exc:  # one bad segment (or a dead worker) must not stop the live panel
            if self._closing:
                return None
            self.get_logger().error(f"segment {seg_id}: evaluation failed: {exc!r}")
            if isinstance(exc, BrokenExecutor):
                self._pool = worker_pool()
            return None
        finally:
            with self._lock:
                self._pending -= 1

    def _evaluate(self, seg_id: str, t0: float, t1: float, reason: str, traj: SwarmTrajectory) -> dict | None:
        if not traj.uav_ids:
            self.get_logger().warning(f"segment {seg_id}: no buffered poses in [{t0:.2f}, {t1:.2f}] "
                                      "(this panel started later or the buffer is too short)")
            return None
        with self._lock:
            episodes = list(self.episodes)
            seq = self._seq
            self._seq += 1
        job = PanelJob(self.settings, self.mission, traj, seg_id, t0, t1, reason, episodes, seq,
                       list(self.skipped), self.jumps.jumps)
        limit = self.settings.llm_timeout_s if self.settings.backend != "rules" else 0.0
        try:
            result = self._pool.submit(evaluate_segment, job).result(timeout=limit or None)
        except FutureTimeout:  # a hung or far too slow LLM counts as down for this segment
            stop_pool(self._pool)
            self._pool = worker_pool()
            job.forced_fallback = (f"LLM backend {self.settings.backend} did not finish within {limit:g} s; "
                                   "rules backend used")
            self.get_logger().warning(f"segment {seg_id}: {job.forced_fallback}")
            result = self._pool.submit(evaluate_segment, job).result()
        for level, text in result.log:
            getattr(self.get_logger(), level)(text)
        report, path = result.report, result.path
        if report is None:
            return None
        with self._lock:
            self.flight.add(report, path)
        if not self.context.ok():  # shutting down: nothing to publish to
            return None
        self.report_pub.publish(String(data=json.dumps(report)))
        verdict = report["verdict"]
        self.evaluated.append({"id": seg_id, "label": verdict["label"], "vetoed": verdict["vetoed"],
                               "summary": verdict["summary"], "path": path})
        self.get_logger().info(f"segment {seg_id}: {report['verdict']['label']}"
                               f"{' (vetoed)' if report['verdict']['vetoed'] else ''}, "
                               f"backend {report['debate']['backend']}{f', {path}' if path else ''}")
        return report

    def close_flight(self) -> Path | None:
        """Write the flight-level report over every evaluated segment to OUTPUT_DIR/flight/ (once; None when
        no segment was evaluated or files are off). Called at the end of a session and by destroy_node."""
        if self._flight_written is not None or not self.settings.write_files:
            return self._flight_written
        with self._lock:
            report = self.flight.report()
        if report is None:
            return None
        self._flight_written = write_flight_report(report, self.output_dir / "flight")
        self.get_logger().info(f"flight report: {self._flight_written}")
        return self._flight_written

    def destroy_node(self) -> None:
        """Stop at once: a debate still running in the worker process is abandoned (its report never published)."""
        self._closing = True
        stop_pool(self._pool)
        self._worker.shutdown(wait=True, cancel_futures=True)
        self.close_flight()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    def spin(node: Node) -> None:
        executor = MultiThreadedExecutor(num_threads=DebatePanelNode.EXECUTOR_THREADS)
        executor.add_node(node)
        executor.spin()

    run_node("debate_panel", DebatePanelNode, spin, args)


if __name__ == "__main__":
    main()
