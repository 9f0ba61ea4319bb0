"""Where live segments end: stream time, veto edges, mission phases and the end of the stream."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory

MODES = ("window", "phase", "veto")
#: At the end of a flight or session a segment this long is still evaluated (min_segment_s would merge it
#: into a next one that never comes).
END_MIN_S = 0.5
#: Stream time within which an announced end of flight counts as reached (stamps are rounded to ns).
END_TOLERANCE_S = 1e-6


@dataclass
class Segment:
    """A closed mission segment in stream time (pose stamps)."""

    id: str
    t_start: float
    t_end: float
    reason: str  # window | phase | veto | max | idle | end | trigger

    def to_json(self, **extra: object) -> str:
        return json.dumps({**asdict(self), **extra})


class SegmentCutter:
    """Decides where segments end, driven by stream time and veto edges."""

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
        self.end_t: float | None = None  # an announced end of flight the stream has not reached yet

    def on_sample(self, t: float) -> None:
        """A pose stamped t arrived: the first one (of the stream, or after a reset) opens the first segment at its
        own stamp. Waiting for the next on_time would start it wherever the stream is when the node's timer fires,
        and an executor under load can hold a timer back for seconds."""
        if self.start is None:
            self.start = t

    def reset(self) -> None:
        """After a backwards time jump: forget the open segment (its samples are gone)."""
        self.start = None
        self._veto = False
        self.end_t = None

    def on_end(self, t_end: float | None, newest: float) -> Segment | None:
        """The publisher announced the end of its flight at stream time t_end (None: unknown). The announcement
        travels on its own topic and can overtake the last poses, so the segment closes once the stream has
        reached t_end (`end_due`), not at the newest pose received so far."""
        if t_end is None or newest >= t_end - END_TOLERANCE_S:
            return self.on_idle(newest, "end")
        self.end_t = t_end
        return None

    def end_due(self, newest: float) -> bool:
        """Whether the stream has reached an announced end of flight (close with on_idle(newest, 'end'))."""
        return self.end_t is not None and newest >= self.end_t - END_TOLERANCE_S

    def _close(self, t_end: float, reason: str, min_s: float | None = None) -> Segment | None:
        if self.start is None or t_end - self.start < (self.min_segment_s if min_s is None else min_s):
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

    def on_idle(self, t: float, reason: str = "idle") -> Segment | None:
        """The stream went quiet (or the flight was declared over: reason `end`): close what is open so the
        end of a flight is evaluated too."""
        self.end_t = None
        return self._close(t, reason, min(END_MIN_S, self.min_segment_s) if reason == "end" else None)


def end_message(t_end: float) -> str:
    """The simulator's end-of-flight announcement (/swarm/sim/end): the stamp of its last poses."""
    return json.dumps({"t_end": t_end})


def announced_end(text: str) -> float | None:
    """The stream time an end-of-flight announcement names (None when it names none: close at once)."""
    try:
        t_end = float(json.loads(text)["t_end"])
    except (ValueError, TypeError, KeyError):
        return None
    return t_end if math.isfinite(t_end) else None


def segment_dsl(traj: SwarmTrajectory, mission: Mission, budget_tokens: int) -> tuple[str, int]:
    """A segment's DSL text and token count (safety included so violations appear as events); runs in the
    worker process."""
    from uav_debate_eval.dsl.builder import build_dsl  # the worker's heavy imports, not the node's
    from uav_debate_eval.safety.checker import check_trajectory
    if not traj.uav_ids:
        return "", 0
    doc = build_dsl(traj, mission, safety=check_trajectory(traj, mission), budget_tokens=budget_tokens)
    return doc.text, doc.tokens
