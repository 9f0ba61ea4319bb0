"""The mission segments' evidence (each window's own metrics and DSL), on two cores for a large flight.

A forked child (uav_debate_eval.runner.forked) starts on the windows' metrics as soon as the checker has cut the mission
segments, while this process computes the flight's events, metrics and DSL. The windows' DSL needs the flight's
events (and its metrics, for a window without samples), which the child is sent as soon as each exists. Both
processes then take the remaining segments one at a time from a shared counter, longest first (the child starts
on the longest window, which would otherwise be left for last). Same code on the same data in both: the contexts
are the ones one process would make. Should the child fail, its segments are evaluated here.

The windows are on the flight's grid, so the per-step formation errors they share with the flight are computed
once: right after the fork this process computes the flight's (its metrics need them too) into memory it shares
with the child (an anonymous mapping made before the fork; only "they are there" goes through the pipe); the
child's windows take their rows (metrics.swarm), waiting for them should they come later than the child asks.
While the flight's events are not there yet, the child does the parts of its window's DSL that need none, and
finishes that window before it cuts the next (a show flight's window holds ~1 GB of kinematics and grids); the
flight's raw-token counts follow the events (the child counts them itself should they come after its first DSL).
The flight's smoothed kinematics are made before the fork: a window's are the flight's inside it (metrics.kinematics).
A helper (runner.flight_helper, forked before the checker by start_helper) computes the flight's formation errors and
raw-token counts into shared memory; a thread here tells the segment child once the errors are there. A large flight
that is one segment (a light show moving as one) has no windows to share them with, and its own stages take them from
the helper. A show (HOLD_MIN_SAMPLES) keeps two processes: no helper beside the segment child.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.runner.flight_helper import FlightHelper
from uav_debate_eval.runner.forked import ChildLost, Forked, can_fork, cores, shared_array

#: From this many samples on, a flight's segments are evaluated on two cores (below, a child costs more than it saves).
PARALLEL_MIN_SAMPLES = 50_000
#: From this many samples on, the heap each stage and window frees goes back to the OS at once (a show flight's
#: GBs); below, faulting those pages in again costs more CPU (~10 % of a 100 x 600 s flight) than the memory matters.
TRIM_MIN_SAMPLES = 2_000_000
#: From this many samples (a show: 5,000 vehicles x 300 s at 10 Hz is 15 M) the child cuts no window before this
#: process starts the segments' contexts: its windows beside the flight's events, metrics and DSL here had peaked at
#: 9.5 GB. It costs wall time (the windows no longer overlap the flight's stages); 1,024 x 120 s is 1.2 M.
HOLD_MIN_SAMPLES = 10_000_000
#: A claim waits at most this long for the counter's lock (a child killed while holding it must not hang us).
CLAIM_TIMEOUT_S = 5.0


def segment_context(traj: SwarmTrajectory, mission: Mission, seg: Any, safety: Any, metrics: Any,
                    events: list, budget_tokens: int) -> Any:
    """One mission segment's evidence: its own DSL and metrics, and the flight's safety result.

    The safety result stays whole so every violation keeps its true extent; the segment's DSL only
    cites those that overlap the segment. The flight's events, waypoint status and raw-token counts are
    reused (computed once for the flight); the window is cut once, so its metrics and its DSL share its
    smoothed kinematics, snapshots, formation errors and segmentation (cached on the window).
    """
    if covers_flight(traj, seg):  # the flight's one segment: its window would be the flight (same samples and grid)
        window, seg_metrics = traj, metrics
    else:
        window, seg_metrics = window_metrics(traj, mission, seg, safety)
    seg_metrics, dsl = _evidence(traj, mission, seg, safety, metrics, events, budget_tokens, window, seg_metrics)
    # the context keeps the window's samples (views of the flight's), not the kinematics and grids cached on it while
    # it was evaluated: as a child's segment (a show flight's windows held ~1 GB each; the panel reads none of them)
    return _segment(seg, seg_metrics, dsl, safety, traj.window(seg.t_start, seg.t_end))


def covers_flight(traj: SwarmTrajectory, seg: Any) -> bool:
    """The segment's window holds every sample of the flight: its metrics and kinematics are the flight's own (a
    show's single segment took as long again as the flight's own stages, to the same numbers)."""
    return seg.t_start <= traj.t_start and seg.t_end >= traj.t_end


def window_metrics(traj: SwarmTrajectory, mission: Mission, seg: Any, safety: Any) -> tuple[SwarmTrajectory, Any]:
    """The segment's window and its metrics (None for a window without samples: the flight's are used)."""
    from uav_debate_eval.metrics.compute import compute_metrics

    window = traj.window(seg.t_start, seg.t_end)
    return window, compute_metrics(window, mission, safety) if window.tracks else None


def _evidence(traj: SwarmTrajectory, mission: Mission, seg: Any, safety: Any, metrics: Any, events: list,
              budget_tokens: int, window: SwarmTrajectory, seg_metrics: Any) -> tuple[Any, Any]:
    """(the segment's metrics, its DSL)."""
    from uav_debate_eval.dsl.builder import build_dsl

    seg_metrics = metrics if seg_metrics is None else seg_metrics
    return seg_metrics, build_dsl(traj, mission, seg_metrics, safety, budget_tokens=budget_tokens,
                                  t_range=(seg.t_start, seg.t_end), events=events, part=window)


def _segment(seg: Any, seg_metrics: Any, dsl: Any, safety: Any, window: SwarmTrajectory) -> Any:
    """The panel's SegmentContext (made in the parent only: the child never loads the debate)."""
    from uav_debate_eval.debate.engine import SegmentContext

    return SegmentContext(segment_id=seg.id, t_start=seg.t_start, t_end=seg.t_end, dsl=dsl, metrics=seg_metrics,
                          safety=safety, traj=window)


class SegmentWork:
    """Start with the segments (a child for a large flight), hand over the flight's results, collect the contexts."""

    def __init__(self, traj: SwarmTrajectory, mission: Mission, segments: list, safety: Any, budget_tokens: int,
                 helper: FlightHelper | None = None):
        """`helper`: the flight's, forked early (start_helper); owned from here on."""
        self.args = (traj, mission, segments, safety, budget_tokens)
        #: one segment over the whole flight: its evidence reuses the flight's metrics and kinematics (keep them)
        self.whole_flight = len(segments) == 1 and covers_flight(traj, segments[0])
        #: a show flight: the child waits for the flight's stages, and its windows smooth their own kinematics
        self.hold = traj.n_samples >= HOLD_MIN_SAMPLES
        self.child: Forked | None = None
        self.counter: Any = None
        #: the flight's formation errors and raw-token counts made beside this process, if any
        self.helper = helper
        forward = None  # the formation errors the segment child waits for, told from a thread once they are there
        if traj.n_samples >= PARALLEL_MIN_SAMPLES and len(segments) > 1 and cores() > 1 and can_fork():
            from uav_debate_eval.metrics.kinematics import smooth_tracks
            from uav_debate_eval.metrics.swarm import snapshots

            if not self.hold:  # the flight's kinematics before the fork: the child's windows take theirs inside
                smooth_tracks(list(traj.tracks.values()))
            self.counter = multiprocessing.get_context("fork").Value("i", 0)
            # the grid before the fork (the child inherits it) and the formation errors' memory, shared with it
            snap = snapshots(traj) if len(traj.tracks) > 1 else None
            shared = helper.errors if helper is not None else None if snap is None else shared_array(snap.valid.shape)
            self.child = Forked(_child, *self.args, self.counter, shared, self.hold)
            if snap is not None and shared is not None:
                if helper is None and not self.hold:  # a helper computes them while this process finds the events
                    self.helper = FlightHelper(traj, mission, shared)  # (a show: no third process beside the two)
                forward = snap, mission, shared
        #: a large one-segment flight (a light show): its formation errors computed on the second core meanwhile
        if (self.helper is None and self.whole_flight and traj.n_samples >= PARALLEL_MIN_SAMPLES
                and len(traj.tracks) > 1 and cores() > 1 and can_fork()):
            self.helper = FlightHelper(traj, mission)
        if self.helper is not None:  # after the segment child's fork: it must not inherit the waits
            self.helper.defer(traj, mission)
        if forward is not None:
            if self.helper is None:  # a show: computed here, before the segments begin
                self._share_formation(*forward)
            else:
                threading.Thread(target=self._share_formation, args=forward, name="segment-formation",
                                 daemon=True).start()

    def _share_formation(self, snap: Any, mission: Mission, shared: np.ndarray) -> None:
        """The flight's per-step formation errors, which its windows share: in the memory the child shares (the
        helper wrote them there, or they are computed here and written), and the child told they are there (a few
        bytes through the pipe, not the (T, N) array); told None (compute them) should they fail here."""
        from uav_debate_eval.metrics.swarm import formation_error

        ref = None
        try:
            err, ref = formation_error(snap, mission)
            if err is not shared:
                shared[:] = err
        finally:
            self._send("formation", ref)

    def events_ready(self, events: list) -> None:
        """The flight's events, which every window's DSL cites, to the child at once; then the flight's raw-token
        counts (the flight's DSL needs them too), which spare the child counting them (it does if they come late)."""
        self._send("events", events)
        if self.child is not None:
            from uav_debate_eval.dsl.tokens import number_prefixes

            self._send("prefixes", number_prefixes(self.args[0]))

    def metrics_ready(self, metrics: Any) -> None:
        """The flight's metrics, which a window without samples reports: to the child at once."""
        self._send("metrics", metrics)

    def _send(self, tag: str, value: Any) -> None:
        child = self.child  # once: the thread forwarding the formation errors may send as the segments end
        if child is not None:
            with contextlib.suppress(OSError):  # the child is gone: contexts() makes its segments here
                child.send((tag, value))

    def contexts(self, metrics: Any, events: list, tick: Callable[[int, int], None]) -> list:
        """Every segment's context in segment order; tick(done, total) after each."""
        traj, mission, segments, safety, budget = self.args
        trim_heap = heap_trimmer(traj)
        n = len(segments)
        out: list = [None] * n
        done = 0
        self._send("go", True)  # a held child (HOLD_MIN_SAMPLES) starts its windows now

        def here(i: int) -> None:
            nonlocal done
            out[i] = segment_context(traj, mission, segments[i], safety, metrics, events, budget)
            trim_heap()  # the window's kinematics and grids, freed, go back to the OS before the next window
            done += 1
            tick(done, n)

        if self.child is None:
            for k in range(n):
                here(k)
            self._stop_helper()
            return out
        while (claimed := _claim(self.counter, segments)) is not None:
            here(claimed)
        try:
            theirs = self.child.result()
        except Exception:  # noqa: BLE001 - the child's segments are evaluated below instead
            theirs = []
        finally:
            self.child = None
            self._stop_helper()
        for i, seg_metrics, dsl in theirs:
            seg = segments[i]
            out[i] = _segment(seg, seg_metrics, dsl, safety, traj.window(seg.t_start, seg.t_end))
            done += 1
            tick(done, n)
        for i in range(n):
            if out[i] is None:
                here(i)
        return out

    def cancel(self) -> None:
        if self.child is not None:
            self.child.cancel()
            self.child = None
        self._stop_helper()

    def _stop_helper(self) -> None:
        """The helper, done (its results were taken) or no longer wanted (nothing asked for them); the thread that
        forwards its formation errors ends on its own (a daemon: a cancelled evaluation does not wait for it)."""
        if self.helper is not None:
            self.helper.cancel()
            self.helper = None


def start_helper(traj: SwarmTrajectory, mission: Mission) -> FlightHelper | None:
    """The flight's helper, forked now (before the checker), when SegmentWork will want one: a large flight of two or
    more vehicles on two cores, short of a show (HOLD_MIN_SAMPLES: no third process beside the two)."""
    if (PARALLEL_MIN_SAMPLES <= traj.n_samples < HOLD_MIN_SAMPLES and len(traj.tracks) > 1 and cores() > 1
            and can_fork()):
        return FlightHelper(traj, mission, kinematics=True)
    return None


def heap_trimmer(traj: SwarmTrajectory) -> Callable[[], None]:
    """What hands the freed heap back to the OS for this flight: glibc's malloc_trim for a large one, else nothing."""
    if traj.n_samples < TRIM_MIN_SAMPLES:
        return lambda: None
    from uav_debate_eval.live.workers import trim_heap

    return trim_heap


def _claim(counter: Any, segments: list) -> int | None:
    """The index of the longest segment not yet claimed, or None when all are taken."""
    lock = counter.get_lock()
    if not lock.acquire(timeout=CLAIM_TIMEOUT_S):
        return None
    try:
        k = counter.value
        if k >= len(segments):
            return None
        counter.value = k + 1
        return _longest_first(segments)[k]
    finally:
        lock.release()


def _longest_first(segments: list) -> list[int]:
    return sorted(range(len(segments)), key=lambda i: (-(segments[i].t_end - segments[i].t_start), i))


class _Inbox:
    """The parent's tagged messages, kept by tag as they arrive (each tag is sent once)."""

    def __init__(self, conn: Any):
        self.conn = conn
        self.got: dict[str, Any] = {}

    def has(self, tag: str) -> bool:
        while tag not in self.got and self.conn.poll():
            self._read()
        return tag in self.got

    def wait(self, tag: str) -> Any:
        """The message `tag`, waiting for it; None when the parent is gone before sending it."""
        try:
            while tag not in self.got:
                self._read()
        except (EOFError, OSError):
            return None
        return self.got[tag]

    def _read(self) -> None:
        tag, value = self.conn.recv()
        self.got[tag] = value


def _child(inbox: Any, traj: SwarmTrajectory, mission: Mission, segments: list, safety: Any, budget_tokens: int,
           counter: Any, shared: np.ndarray | None, hold: bool = False) -> list[tuple[int, Any, Any]]:
    """Child side: claim segments; their windows' metrics at once, their DSL once the flight's events came (`hold`:
    no window before the parent says go). Returns (index, metrics, DSL) per segment (the parent cuts the window
    again rather than receive it)."""
    from uav_debate_eval.dsl.lines import prepare_dsl
    from uav_debate_eval.dsl.tokens import adopt_number_prefixes
    from uav_debate_eval.metrics.swarm import defer_formation_error, snapshots

    messages = _Inbox(inbox)
    trim_heap = heap_trimmer(traj)
    if shared is not None:
        def fetch() -> tuple[np.ndarray, str | None] | None:
            ref = messages.wait("formation")
            return None if ref is None else (shared, ref)

        defer_formation_error(snapshots(traj), mission, fetch)
    waiting: list[tuple[int, SwarmTrajectory, Any]] = []
    out: list[tuple[int, Any, Any]] = []
    if hold and messages.wait("go") is None:
        raise ChildLost("the parent ended before the segments began")

    def finish() -> None:
        if messages.has("prefixes"):  # once (taken out); if they come later, the first window's DSL counts them
            adopt_number_prefixes(traj, messages.got.pop("prefixes"))
        for i, window, seg_metrics in waiting:
            flight_metrics = messages.wait("metrics") if seg_metrics is None else None  # an empty window's
            out.append((i, *_evidence(traj, mission, segments[i], safety, flight_metrics, messages.got["events"],
                                      budget_tokens, window, seg_metrics)))
        waiting.clear()
        trim_heap()  # the window's arrays, freed, go back to the OS before the next window

    while True:
        if waiting:  # one window at a time holds its kinematics and grids here: finished before the next is cut
            if messages.wait("events") is None:
                raise ChildLost("the parent ended before sending the flight's events")
            finish()
        if (i := _claim(counter, segments)) is None:
            break
        waiting.append((i, *window_metrics(traj, mission, segments[i], safety)))
        if messages.has("events"):
            finish()
        else:  # the flight's events are still being computed: what the window's DSL needs besides them
            prepare_dsl(waiting[-1][1])
    return out
