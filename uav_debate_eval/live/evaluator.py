"""The panel's evaluation service: segments queue for one worker *process* fed by one thread, so the
debate (numpy, the LLM) never holds the node process's GIL and the executor (in `live`, the safety
verifier) keeps its pace. Too many waiting segments are skipped (and named in later reports); a hung
LLM is redone with the rules agents; every report is folded into the flight record. The poses go on the
flight's tape as the segments close; at the end the whole flight is evaluated (live.flight)."""

from __future__ import annotations

import math
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from uav_debate_eval.core.mission import Mission, RouteSoFar
from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.live.flight import FlightJob, FlightRecord, evaluate_flight
from uav_debate_eval.live.segment_job import JobResult, PanelJob, PanelSettings, evaluate_segment, next_seq
from uav_debate_eval.live.tape import FlightTape
from uav_debate_eval.live.veto_history import VetoHistory
from uav_debate_eval.live.workers import stop_pool, worker_pool

Log = Callable[[str, str], None]  # (logger level, text)


class SegmentEvaluator:
    def __init__(self, settings: PanelSettings, mission: Mission, vetoes: VetoHistory, *, max_pending: int,
                 publish: Callable[[dict], None], log: Log, clock_jumps: Callable[[], int], swarm: StreamingSwarm,
                 session: Callable[[], dict] = dict, record: bool = True):
        """`swarm`: the buffered poses (taped as segments close); `session`: the live session's topics, vehicles
        and clock for the flight report; `record`: also write OUT/flight/flight.mcap."""
        self.settings, self.mission, self.vetoes = settings, mission, vetoes
        self.swarm, self._session, self.record = swarm, session, record
        self.max_pending = max_pending
        self._publish, self._log, self._clock_jumps = publish, log, clock_jumps
        self.output_dir = Path(settings.output_dir)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="panel")
        self._pool = worker_pool()
        self._lock = threading.Lock()
        self._closing = False  # set by close: an evaluation cut short then is no error
        self._llm_crashed: str | None = None  # why the LLM backend is no longer tried (its worker died)
        self._pending = 0
        self.skipped: deque[str] = deque(maxlen=100)
        #: The last evaluated segments: id, label, vetoed, summary and report directory (None: not written).
        self.evaluated: deque[dict] = deque(maxlen=50)
        self._seen: deque[str] = deque(maxlen=50)
        self.last_end = -math.inf
        self._seq = next_seq(self.output_dir)
        #: the flight so far: how close to each waypoint, how many passed (segments judge what was due)
        self._route = RouteSoFar()
        #: Every evaluated segment, for the live record of the flight report written by `close_flight`.
        self.flight = FlightRecord()
        self.tape = FlightTape(self.output_dir / "flight" / ".tape" if settings.write_files
                               else Path(tempfile.mkdtemp(prefix="uav_debate_eval_tape_")), mission.source or None)
        if (kept := self.tape.kept) is not None:
            recording = kept / "tape" if (kept / "tape").is_dir() else kept / "rosbag2"
            log("warning", f"the previous session in {self.output_dir} ended without its flight report: its poses "
                           f"are kept in {kept} (uav-debate-eval evaluate {recording})")
        #: The flight report (None until `close_flight` made it) and its folder (None: files are off).
        self.flight_report: dict | None = None
        self._flight_written: Path | None = None
        self._flight_done = False
        self._side_failed = False

    def clock_jumped(self) -> None:
        """After a backwards time jump the last segment end and the route so far mean nothing."""
        self.last_end = -math.inf
        self._route = RouteSoFar()

    @property
    def pending(self) -> int:
        """Evaluations queued or running."""
        return self._pending

    def admit(self, seg_id: str, t0: float) -> bool:
        """Whether a closed segment is evaluated: not seen before (a latched segment after a restart) and
        not too many waiting (then it is skipped, said once and named in later reports). Either way its poses go
        on the flight's tape."""
        if self.tape.take(self.swarm):
            self._keep_side()
        key = f"{seg_id}@{t0:.3f}"
        if key in self._seen:
            return False
        self._seen.append(key)
        if self._pending >= self.max_pending:
            self.skipped.append(seg_id)
            self._log("warning", f"segment {seg_id} skipped: {self._pending} segments still waiting for the panel "
                                 "(the LLM is slower than the segments)")
            return False
        return True

    def submit(self, seg_id: str, t0: float, t1: float, reason: str, traj: SwarmTrajectory) -> Future:
        """Queue one evaluation of [t0, t1]; the future resolves to the published report (or None)."""
        with self._lock:
            self.last_end = max(self.last_end, t1)
            self._pending += 1
        return self._worker.submit(self._evaluate_safely, seg_id, t0, t1, reason, traj)

    def _evaluate_safely(self, seg_id: str, t0: float, t1: float, reason: str, traj: SwarmTrajectory) -> dict | None:
        try:
            return self._evaluate(seg_id, t0, t1, reason, traj)
        except Exception as exc:  # one bad segment (or a dead worker) must not stop the live panel
            if self._closing:
                return None
            self._log("error", f"segment {seg_id}: evaluation failed: {exc!r}")
            if isinstance(exc, BrokenExecutor):
                self._pool = worker_pool()
            return None
        finally:
            with self._lock:
                self._pending -= 1

    def _run(self, job: PanelJob) -> JobResult:
        limit = self.settings.llm_timeout_s if self.settings.backend != "rules" else 0.0
        if self._llm_crashed and job.forced_fallback is None:
            job.forced_fallback = self._llm_crashed
        try:
            return self._pool.submit(evaluate_segment, job).result(timeout=limit or None)
        except FutureTimeout:  # a hung or far too slow LLM counts as down for this segment
            stop_pool(self._pool)
            self._pool = worker_pool()
            job.forced_fallback = (f"LLM backend {self.settings.backend} did not finish within {limit:g} s; "
                                   "rules backend used")
            self._log("warning", f"segment {job.seg_id}: {job.forced_fallback}")
            return self._pool.submit(evaluate_segment, job).result()
        except BrokenExecutor:  # the worker died under the LLM library (a crash, not an error): rules from now on
            self._pool = worker_pool()
            if self.settings.backend == "rules" or job.forced_fallback is not None or self._closing:
                raise
            self._llm_crashed = job.forced_fallback = (f"the worker process died in the {self.settings.backend} "
                                                       "LLM backend; rules backend used")
            self._log("warning", f"segment {job.seg_id}: {job.forced_fallback}")
            return self._pool.submit(evaluate_segment, job).result()

    def _evaluate(self, seg_id: str, t0: float, t1: float, reason: str, traj: SwarmTrajectory) -> dict | None:
        if not traj.uav_ids:
            self._log("warning", f"segment {seg_id}: no buffered poses in [{t0:.2f}, {t1:.2f}] "
                                 "(this panel started later or the buffer is too short)")
            return None
        with self._lock:
            seq = self._seq
            self._seq += 1
        job = PanelJob(self.settings, self.mission, traj, seg_id, t0, t1, reason, self.vetoes.snapshot(), seq,
                       list(self.skipped), self._clock_jumps(), route=self._route)
        result = self._run(job)
        if result.route is not None:
            self._route = result.route
        for level, text in result.log:
            self._log(level, text)
        report, path = result.report, result.path
        if report is None:
            return None
        verdict = report["verdict"]
        with self._lock:
            self.flight.add(report, path)
            self.evaluated.append({"id": seg_id, "label": verdict["label"], "vetoed": verdict["vetoed"],
                                   "summary": verdict["summary"], "path": path})
        if self._closing:
            return None
        self._publish(report)
        self._log("info", f"segment {seg_id}: {verdict['label']}{' (vetoed)' if verdict['vetoed'] else ''}, "
                          f"backend {report['debate']['backend']}{f', {path}' if path else ''}")
        return report

    def end_tape(self) -> None:
        """The flight's last poses onto its tape: later ones are not this flight's (idempotent)."""
        if self.tape.end(self.swarm):
            self._keep_side()

    def _keep_side(self) -> None:
        """The session's side streams so far beside the tape: a killed session's tape reads as the flight report
        would (MAVROS frames placed by their fixes, the arming, PX4's invalid estimates)."""
        try:
            self.tape.keep_side(self._session)
        except Exception as exc:  # noqa: BLE001  (a full disk, a stream changing under a thread): the poses stand
            if not self._side_failed:
                self._side_failed = True
                self._log("warning", f"flight tape: the side streams are not kept with it ({exc!r})")

    def close_flight(self, stop: threading.Event | None = None) -> Path | None:
        """Evaluate the whole flight (its tape, in the worker process) and write OUTPUT_DIR/flight/ (once; None when
        no pose was received or files are off; the report is kept in `flight_report` either way). `stop` set
        meanwhile (a second Ctrl-C) abandons it; the tape stays in OUTPUT_DIR/flight/.tape."""
        if self._flight_done:
            return self._flight_written
        self._flight_done = True
        self.end_tape()
        with self._lock:
            segments = list(self.flight.segments)
        job = FlightJob(self.settings, self.mission, list(self.tape.chunks), list(self.tape.vehicles), segments,
                        self.vetoes.snapshot(), self._session(), self.tape.stats.to_dict(), dict(self.swarm.rejected),
                        list(self.skipped), self._clock_jumps(),
                        self.output_dir / "flight" if self.settings.write_files else None, self.record,
                        lost_before_verifier=dict(self.vetoes.lost_before_verifier),
                        clock_back=dict(self.swarm.clock_back))
        # a worker of its own: a segment whose LLM times out meanwhile stops the segments' worker (and whatever is
        # queued on it), which lost the flight report after a Ctrl-C had skipped that segment (issue 32's soak)
        pool = worker_pool()
        try:
            result = _result_unless(pool.submit(evaluate_flight, job), stop)
            if result is None:
                stop_pool(pool)
                self._log("warning", f"flight report skipped (asked to stop); the poses stay in {self.tape.folder}")
                return None
        except Exception as exc:  # the segment reports stay; say why the flight report is missing
            self._log("error", f"flight report failed: {exc!r}")
            return None
        finally:
            stop_pool(pool)
        for level, text in result.log:
            self._log(level, text)
        self.tape.discard()
        self.flight_report = result.report
        self._flight_written = Path(result.path) if result.path else None
        return self._flight_written

    def close(self) -> Path | None:
        """Stop at once (a debate still running is abandoned, its report never published), then write the
        flight report (its folder, or None)."""
        self._closing = True
        stop_pool(self._pool)
        self._worker.shutdown(wait=True, cancel_futures=True)
        return self.close_flight()


def _result_unless(future: Future, stop: threading.Event | None) -> JobResult | None:
    """The job's result, or None as soon as `stop` is set."""
    while stop is not None and not stop.is_set():
        try:
            return future.result(timeout=0.2)
        except FutureTimeout:
            continue
    return future.result() if stop is None else None
