"""`debate_panel`: evaluates each closed mission segment (and on demand) and publishes the report JSON.

The panel keeps its own bounded buffer of the poses (the same shared pose input as every node) and
evaluates the window that dsl_builder names on /swarm/segment, so nothing but boundaries crosses
between the two nodes. In one process (`uav-debate-eval live`) the builder hands each segment's
samples over directly instead, so every pose is buffered once. The evaluation (pipeline.evaluate:
metrics, DSL, debate) runs in one worker *process* fed by one thread, so the executor (and the
safety verifier beside it) keeps taking poses and veto messages while the LLM talks.

Live override: the panel records veto episodes from /swarm/safety/veto (with the evidence of
/swarm/safety/status) in stream time. A segment that overlaps an episode is `risky` and `vetoed`
whatever the panel concluded, and the report carries the live evidence under `live`.
If the LLM backend fails, the segment is evaluated with the `rules` backend and the report says why.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
import threading
from collections import deque
from concurrent.futures import BrokenExecutor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.nodes.live import (
    REPORT_TOPIC,
    SEGMENT_TOPIC,
    STATUS_TOPIC,
    TRIGGER_SERVICE,
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

#: Evidence kept per veto episode (the first ones: they show what started it).
EVIDENCE_PER_EPISODE = 10
CONSTRAINTS = ("min_separation", "max_speed", "max_vertical_speed", "geofence", "stale_data")


@dataclass
class VetoEpisode:
    """One period with the veto up, in stream time; `t_off` is None while it lasts.

    `t_violating` is the last stream time a constraint status was still in error: after it the veto only
    waits out its hold time, so a segment that sees nothing but that tail is not made risky by it.
    """

    t_on: float
    t_off: float | None = None
    t_violating: float | None = None
    evidence: list[dict] = field(default_factory=list)

    def overlaps(self, t0: float, t1: float) -> bool:
        end = self.t_violating if self.t_violating is not None else self.t_off
        return self.t_on <= t1 and (end is None or end >= t0)

    def to_dict(self, origin: float = 0.0) -> dict:
        """In flight time: stream times less `origin`, the stream clock at flight time 0."""
        def flight(t: float | None) -> float | None:
            return None if t is None else t - origin
        return {"t_on": flight(self.t_on), "t_off": flight(self.t_off), "t_violating_until": flight(self.t_violating),
                "evidence": self.evidence}


def level_of(level: bytes | int) -> int:
    """DiagnosticStatus.level is a ROS `byte` (bytes of length 1 in rclpy)."""
    return level[0] if isinstance(level, bytes) else int(level)


def status_evidence(status: DiagnosticStatus) -> dict:
    """One DiagnosticStatus as plain data: name, level, message and its key/values (numbers parsed)."""
    values: dict[str, object] = {}
    for kv in status.values:
        try:
            values[kv.key] = float(kv.value)
        except ValueError:
            values[kv.key] = kv.value
    return {"name": status.name, "level": level_of(status.level), "message": status.message, "values": values}


def _constraint_of(ev: dict) -> str | None:
    for text in (str(ev["values"].get("constraint", "")), ev["name"].split("/")[-1], ev["name"]):
        if text in CONSTRAINTS:
            return text
    return next((c for c in CONSTRAINTS if c in ev["name"]), None)


def _uavs_of(ev: dict) -> list[str]:
    raw = ev["values"].get("uavs", ev["values"].get("vehicles", ""))
    return [u for u in str(raw).replace(";", ",").replace(" ", ",").split(",") if u]


def apply_live_veto(report: dict, episodes: list[VetoEpisode], t0: float, t1: float, origin: float = 0.0) -> bool:
    """Make the report `risky`/`vetoed` when a live veto episode overlaps [t0, t1]; returns whether it did.

    Episodes and [t0, t1] are in stream time; the report is in flight time (stream time less `origin`).
    Live violations the offline check of the window missed are added from the status evidence, so the
    report always names what the verifier saw.
    """
    hit = [e for e in episodes if e.overlaps(t0, t1)]
    live = report.setdefault("live", {})
    live["veto_episodes"] = [e.to_dict(origin) for e in hit]
    if not hit:
        live["override"] = False
        return False
    verdict = report["verdict"]
    was = verdict["label"]
    verdict["vetoed"] = True
    verdict["label"] = "risky"
    live["override"] = was != "risky"
    if was != "risky":
        verdict["summary"] = (f"Live safety veto during this segment overrides the panel's '{was}': "
                              + verdict.get("summary", ""))
    named = {v["constraint"] for v in report["violations"]}
    for ep in hit:
        for ev in ep.evidence:
            constraint = _constraint_of(ev)
            t = ev["values"].get("t")
            if constraint is None or constraint in named or (isinstance(t, float) and not t0 <= t <= t1):
                continue  # known already, or seen outside this segment (an episode may span several)
            named.add(constraint)
            value, limit = ev["values"].get("value"), ev["values"].get("limit")
            t_ev = (t if isinstance(t, float) else ep.t_on) - origin
            report["violations"].append({
                "constraint": constraint, "t_start": t_ev, "t_end": t_ev,
                "uavs": _uavs_of(ev), "worst_value": value if isinstance(value, float) else None,
                "limit": limit if isinstance(limit, float) else None, "detail": f"live veto: {ev['message']}",
            })
    return True


def validate(report: dict) -> list[str]:
    """Schema errors of a report (empty when valid), against the package's copy of the contract schema."""
    import jsonschema
    schema = json.loads((Path(__file__).resolve().parents[1] / "report" / "report.schema.json").read_text())
    return [f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}"
            for e in jsonschema.Draft202012Validator(schema).iter_errors(report)]


@dataclass
class PanelSettings:
    """What the worker process needs to evaluate a segment (picklable, no ROS)."""

    backend: str = "rules"
    model: str = ""
    base_url: str = ""
    debate_config: str = ""
    max_layer: int = 3
    max_rounds: int = 0
    max_tokens: int = 0
    token_budget: int = 0
    output_dir: str = "out/live"
    keep_reports: int = 20
    write_files: bool = True
    llm_timeout_s: float = 0.0


@dataclass
class PanelJob:
    settings: PanelSettings
    mission: Any
    traj: Any
    seg_id: str
    t0: float
    t1: float
    reason: str
    episodes: list[VetoEpisode]
    seq: int
    skipped: list[str]
    clock_jumps: int
    forced_fallback: str | None = None  # evaluate with `rules` for this reason (the LLM timed out)


#: Set in the worker process once the LLM backend failed, so later segments go straight to `rules`.
_LLM_DOWN: str | None = None


def debate_config(s: PanelSettings, backend: str):
    """The DebateConfig for one segment: the protocol file, the backend, and the live caps."""
    from uav_debate_eval.debate.config import DebateConfig
    cfg = DebateConfig.from_yaml(s.debate_config) if s.debate_config else DebateConfig()
    cfg.backend = backend
    if backend != "rules":
        from uav_debate_eval.debate.llm.factory import LLMConfig
        llm = cfg.llm if cfg.llm is not None else LLMConfig(backend=backend)
        llm.backend = backend
        if s.model:
            llm.model = cfg.model = s.model
        if s.base_url:
            llm.base_url = s.base_url
        if s.max_tokens > 0:
            llm.max_tokens = s.max_tokens
        cfg.llm = llm
    if s.max_layer < 3:
        t1 = cfg.router_thresholds[0] if s.max_layer == 2 else 2.0
        cfg.router_thresholds = (t1, 2.0)  # complexity is in [0, 1]: layers above max_layer are never chosen
    if s.max_rounds > 0:
        cfg.max_rounds = {k: min(v, s.max_rounds) for k, v in cfg.max_rounds.items()}
    if s.max_tokens > 0:
        cfg.max_tokens = s.max_tokens
    if s.token_budget > 0:
        cfg.token_budget = s.token_budget
    return cfg


def evaluate_segment(job: PanelJob) -> dict:
    """Worker-process side: evaluate, apply the live veto, validate, write the files (rotated).

    Returns {"report": dict | None, "path": str | None, "log": [(level, text)]}.
    """
    from uav_debate_eval.pipeline import evaluate

    global _LLM_DOWN
    s, log = job.settings, []
    origin = job.traj.t0  # stream clock at flight time 0: job times are stream times, the report's flight times
    window = max(job.t1 - origin - job.traj.t_start, 1.0) + 1.0  # one debate context for the whole live segment
    fallback = job.forced_fallback
    evaluation = None
    if s.backend != "rules" and _LLM_DOWN is None and fallback is None:
        try:
            evaluation = evaluate(job.traj, job.mission, debate_config(s, s.backend), segment_mode="window",
                                  window_s=window)
        except Exception as exc:  # the LLM (server, model, bindings) is down: keep evaluating with rules
            _LLM_DOWN = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            log.append(("warning", f"LLM backend {s.backend} unavailable ({_LLM_DOWN}); using the rules backend"))
    if evaluation is None:
        if s.backend != "rules" and fallback is None:
            fallback = f"LLM backend {s.backend} unavailable ({_LLM_DOWN}); rules backend used"
        evaluation = evaluate(job.traj, job.mission, debate_config(s, "rules"), segment_mode="window",
                              window_s=window)
    report = evaluation.report
    # pipeline.evaluate may have fallen back to the rules agents itself (a backend that fails mid-debate)
    fallback = fallback or report["debate"].get("fallback")
    t_lo = job.traj.t_start + origin if not math.isfinite(job.t0) else job.t0
    apply_live_veto(report, job.episodes, t_lo, job.t1, origin)
    report["live"].update({
        "segment": {"id": job.seg_id, "t_start": t_lo - origin, "t_end": job.t1 - origin, "reason": job.reason},
        "llm_fallback": fallback, "skipped_segments": job.skipped, "clock_jumps": job.clock_jumps,
        "eval_s": round(sum(evaluation.timing.values()), 3),
    })
    if fallback and fallback not in report["verdict"]["summary"]:
        report["verdict"]["summary"] = f"[{fallback}] " + report["verdict"]["summary"]
    errors = validate(report)
    if errors:
        log.append(("error", f"segment {job.seg_id}: report does not validate, not published: {errors[:3]}"))
        return {"report": None, "path": None, "log": log}
    path = write_rotated(evaluation, Path(s.output_dir), f"{job.seq:05d}_{job.seg_id}", s.keep_reports) \
        if s.write_files else None
    return {"report": report, "path": str(path) if path else None, "log": log}


def write_rotated(evaluation, out_dir: Path, name: str, keep: int) -> Path:
    """Write one report directory, point `latest` at it, and keep only the newest `keep` directories."""
    from uav_debate_eval.report.writer import write_reports
    out = out_dir / name
    write_reports(evaluation, out)
    latest = out_dir / "latest"
    tmp = out_dir / ".latest.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(out.name)
    tmp.replace(latest)  # atomic: a reader never sees `latest` missing
    for old in sorted(out_dir.glob("[0-9]" * 5 + "_*"))[:-max(1, keep)]:
        shutil.rmtree(old, ignore_errors=True)
    return out


class DebatePanelNode(Node):
    """Runs the evaluation on each closed segment and on /swarm/evaluation/trigger."""

    #: The Trigger service waits for its evaluation; a second executor thread keeps veto, status and segments
    #: flowing meanwhile (used by main() and by `live`).
    EXECUTOR_THREADS = 2

    def __init__(self, builder=None, **kwargs):
        """`builder`: a DslBuilderNode in the same process to share poses and segments with (see `live`)."""
        super().__init__("debate_panel", **kwargs)
        self.mission_file = declare(self, "mission_file", "", "mission YAML (empty: the packaged default mission)")
        d = functools.partial(declare, self)
        self.settings = PanelSettings(
            backend=d("llm_backend", "rules", "panel backend: rules, local or openai"),
            model=d("llm_model", "", "model name or GGUF path (empty: the backend's default)"),
            base_url=d("llm_base_url", "", "OpenAI-compatible server URL (openai backend)"),
            debate_config=d("debate_config", "", "debate protocol YAML (empty: defaults)"),
            max_layer=d("max_layer", 3, "highest debate layer the router may pick (1-3)"),
            max_rounds=d("max_rounds", 0, "cap on rounds per layer (0: the protocol's)"),
            max_tokens=d("max_tokens", 0, "completion tokens per agent turn (0: the protocol's)"),
            token_budget=d("token_budget", 0, "tokens per segment (0: the protocol's)"),
            output_dir=d("output_dir", "out/live", "where report files are written"),
            keep_reports=d("keep_reports", 20, "report directories kept on disk (oldest removed)"),
            write_files=d("write_files", True, "write report.json/md/html and figures per segment"),
            llm_timeout_s=d("llm_timeout_s", 0.0, "an LLM evaluation taking longer is redone with rules (0: wait)"),
        )
        self.backend = self.settings.backend
        self.output_dir = Path(self.settings.output_dir)
        self.max_pending = declare(self, "max_pending", 2, "segments waiting for the panel; more are skipped")
        buffer_s = declare(self, "buffer_s", 90.0, "stream seconds kept per vehicle (must exceed a segment)")
        rate_hint = declare(self, "rate_hint_hz", 50.0, "expected pose rate; sizes the ring buffers")
        clock_jump_s = declare(self, "clock_jump_s", 1.0, "a stamp this much older than the newest resets")

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
        self._seq = self._next_seq()

        self.report_pub = self.create_publisher(String, REPORT_TOPIC, latched())
        if builder is None:  # own buffer, boundaries from /swarm/segment (a process of its own)
            from uav_debate_eval.nodes.pose_input import PoseInput
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
                t = ev["values"].get("t")
                if isinstance(t, float) and ep.t_violating is None:
                    ep.t_on = t  # the verifier's own time of the violation (the Bool veto carries no stamp)
                ep.t_violating = t if isinstance(t, float) else self.swarm.newest_t
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

    def _evaluate_safely(self, seg_id, t0, t1, reason, traj) -> dict | None:
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

    def _evaluate(self, seg_id, t0, t1, reason, traj) -> dict | None:
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
        for level, text in result["log"]:
            getattr(self.get_logger(), level)(text)
        report = result["report"]
        if report is None or not self.context.ok():  # shutting down: nothing to publish to
            return None
        self.report_pub.publish(String(data=json.dumps(report)))
        path = result["path"]
        verdict = report["verdict"]
        self.evaluated.append({"id": seg_id, "label": verdict["label"], "vetoed": verdict["vetoed"],
                               "summary": verdict["summary"], "path": path})
        self.get_logger().info(f"segment {seg_id}: {report['verdict']['label']}"
                               f"{' (vetoed)' if report['verdict']['vetoed'] else ''}, "
                               f"backend {report['debate']['backend']}{f', {path}' if path else ''}")
        return report

    def _next_seq(self) -> int:
        """Continue numbering after the newest directory on disk, so a restarted node never overwrites."""
        dirs = sorted(self.output_dir.glob("[0-9]" * 5 + "_*")) if self.output_dir.is_dir() else []
        return int(dirs[-1].name[:5]) + 1 if dirs else 1

    def destroy_node(self) -> None:
        """Stop at once: a debate still running in the worker process is abandoned (its report never published)."""
        self._closing = True
        stop_pool(self._pool)
        self._worker.shutdown(wait=True, cancel_futures=True)
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    def spin(node: Node) -> None:
        executor = MultiThreadedExecutor(num_threads=DebatePanelNode.EXECUTOR_THREADS)
        executor.add_node(node)
        executor.spin()

    run_node("debate_panel", DebatePanelNode, spin, args)


if __name__ == "__main__":
    main()
