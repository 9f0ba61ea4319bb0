"""The panel's evaluation service: segments queue for one worker *process* fed by one thread, so the
debate (numpy, the LLM) never holds the node process's GIL and the executor (in `live`, the safety
verifier) keeps its pace. Too many waiting segments are skipped (and named in later reports); a hung
LLM is redone with the rules agents; every report is folded into the flight record."""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.live.flight import FlightRecord, write_flight_report
from uav_debate_eval.live.segment_job import JobResult, PanelJob, PanelSettings, evaluate_segment, next_seq
from uav_debate_eval.live.veto_history import VetoHistory
from uav_debate_eval.live.workers import stop_pool, worker_pool

Log = Callable[[str, str], None]  # (logger level, text)


class SegmentEvaluator:
    def __init__(self, settings: PanelSettings, mission: Mission, vetoes: VetoHistory, *, max_pending: int,
                 publish: Callable[[dict], None], log: Log, clock_jumps: Callable[[], int]):
        self.settings, self.mission, self.vetoes = settings, mission, vetoes
        self.max_pending = max_pending
        self._publish, self._log, self._clock_jumps = publish, log, clock_jumps
        self.output_dir = Path(settings.output_dir)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="panel")
        self._pool = worker_pool()
        self._lock = threading.Lock()
        self._closing = False  # set by close: an evaluation cut short then is no error
        self._pending = 0
        self.skipped: deque[str] = deque(maxlen=100)
        #: The last evaluated segments: id, label, vetoed, summary and report directory (None: not written).
        self.evaluated: deque[dict] = deque(maxlen=50)
        self._seen: deque[str] = deque(maxlen=50)
        self.last_end = -math.inf
        self._seq = next_seq(self.output_dir)
        #: Every evaluated segment, folded into the flight-level report written by `close_flight`.
        self.flight = FlightRecord()
        self._flight_written: Path | None = None

    @property
    def pending(self) -> int:
        """Evaluations queued or running."""
        return self._pending

    def admit(self, seg_id: str, t0: float) -> bool:
        """Whether a closed segment is evaluated: not seen before (a latched segment after a restart) and
        not too many waiting (then it is skipped, said once and named in later reports)."""
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
        try:
            return self._pool.submit(evaluate_segment, job).result(timeout=limit or None)
        except FutureTimeout:  # a hung or far too slow LLM counts as down for this segment
            stop_pool(self._pool)
            self._pool = worker_pool()
            job.forced_fallback = (f"LLM backend {self.settings.backend} did not finish within {limit:g} s; "
                                   "rules backend used")
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
                       list(self.skipped), self._clock_jumps())
        result = self._run(job)
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

    def close_flight(self) -> Path | None:
        """Write the flight-level report over every evaluated segment to OUTPUT_DIR/flight/ (once; None when
        no segment was evaluated or files are off)."""
        if self._flight_written is not None or not self.settings.write_files:
            return self._flight_written
        with self._lock:
            report = self.flight.report()
        if report is None:
            return None
        self._flight_written = write_flight_report(report, self.output_dir / "flight")
        return self._flight_written

    def close(self) -> Path | None:
        """Stop at once (a debate still running is abandoned, its report never published), then write the
        flight report (its folder, or None)."""
        self._closing = True
        stop_pool(self._pool)
        self._worker.shutdown(wait=True, cancel_futures=True)
        return self.close_flight()
