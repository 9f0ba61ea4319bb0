"""Where live segments end: stream time, veto edges, mission phases and the end of the stream."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory

MODES = ("window", "phase", "veto")
#: At the end of a flight or session a segment this long is still evaluated (min_segment_s would merge it
#: into a next one that never comes).
END_MIN_S = 0.5


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

    def reset(self) -> None:
        """After a backwards time jump: forget the open segment (its samples are gone)."""
        self.start = None
        self._veto = False

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
        return self._close(t, reason, min(END_MIN_S, self.min_segment_s) if reason == "end" else None)


def segment_dsl(traj: SwarmTrajectory, mission: Mission, budget_tokens: int) -> tuple[str, int]:
    """A segment's DSL text and token count (safety included so violations appear as events); runs in the
    worker process."""
    from uav_debate_eval.dsl.builder import build_dsl  # the worker's heavy imports, not the node's
    from uav_debate_eval.safety.checker import check_trajectory
    if not traj.uav_ids:
        return "", 0
    doc = build_dsl(traj, mission, safety=check_trajectory(traj, mission), budget_tokens=budget_tokens)
    return doc.text, doc.tokens
