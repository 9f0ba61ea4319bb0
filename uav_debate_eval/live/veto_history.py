"""Live veto episodes and how they override a segment's report.

The panel records each period the verifier's veto was up (stream time) with the evidence of its
DiagnosticArray status. An episode is a `hazard` (a constraint was violated) or `degraded` (the verifier only
said it could not vouch for the swarm: fail-safe, `verifier_degraded`). A segment that overlaps a hazard
episode is `risky` and `vetoed` whatever the panel concluded, and the report names what the verifier saw; a
degraded episode is listed apart and decides nothing about the flight (its poses are judged as recorded).
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from uav_debate_eval.core.records import CONSTRAINT_NAMES
from uav_debate_eval.safety.health import DEGRADED

#: Evidence kept per veto episode (the first ones: they show what started it).
EVIDENCE_PER_EPISODE = 10


class KeyValueLike(Protocol):
    key: str
    value: str


class StatusLike(Protocol):
    """What `status_evidence` reads of a diagnostic_msgs/DiagnosticStatus (no ROS import here)."""

    name: str
    level: Any  # a ROS `byte`: bytes of length 1 in rclpy
    message: str
    values: list[Any]


def level_of(level: bytes | int) -> int:
    """DiagnosticStatus.level is a ROS `byte` (bytes of length 1 in rclpy)."""
    return level[0] if isinstance(level, bytes) else int(level)


@dataclass(frozen=True)
class VetoEvidence:
    """One status line of the verifier: name (safety/<constraint>), level, message and its key/values."""

    name: str
    level: int
    message: str
    values: dict[str, float | str] = field(default_factory=dict)

    def number(self, key: str) -> float | None:
        value = self.values.get(key)
        return value if isinstance(value, float) else None

    @property
    def t(self) -> float | None:
        """The verifier's stream time of this status."""
        return self.number("t")

    @property
    def constraint(self) -> str | None:
        for text in (str(self.values.get("constraint", "")), self.name.split("/")[-1], self.name):
            # rule:<id>: a hard mission rule (§2a); verifier_degraded: the fail-safe veto (§5)
            if text in CONSTRAINT_NAMES or text.startswith("rule:") or text == DEGRADED:
                return text
        return next((c for c in CONSTRAINT_NAMES if c in self.name), None)

    @property
    def uavs(self) -> list[str]:
        raw = self.values.get("uavs", self.values.get("vehicles", ""))
        return [u for u in str(raw).replace(";", ",").replace(" ", ",").split(",") if u]

    def to_dict(self) -> dict:
        return {"name": self.name, "level": self.level, "message": self.message, "values": dict(self.values)}


def status_evidence(status: StatusLike) -> VetoEvidence:
    """One DiagnosticStatus as a record (numbers parsed)."""
    values: dict[str, float | str] = {}
    for kv in status.values:
        try:
            values[kv.key] = float(kv.value)
        except ValueError:
            values[kv.key] = kv.value
    return VetoEvidence(status.name, level_of(status.level), status.message, values)


@dataclass
class VetoEpisode:
    """One period with the veto up, in stream time; `t_off` is None while it lasts.

    `t_violating` is the last stream time a constraint status was still in error: after it the veto only
    waits out its hold time, so a segment that sees nothing but that tail is not made risky by it.
    `t_raised` is when the raised veto arrived (the newest pose's time then); `t_on` becomes the verifier's own
    time of the violation once its status says so.
    """

    t_on: float
    t_off: float | None = None
    t_violating: float | None = None
    evidence: list[VetoEvidence] = field(default_factory=list)
    t_raised: float | None = None

    @property
    def kind(self) -> str:
        """`degraded` when every piece of evidence is the verifier's own fail-safe, else `hazard` (no evidence
        at all counts as a hazard: the veto was up for a reason nobody said)."""
        named = [ev.constraint for ev in self.evidence]
        return "degraded" if named and all(c == DEGRADED for c in named) else "hazard"

    def overlaps(self, t0: float, t1: float) -> bool:
        end = self.t_violating if self.t_violating is not None else self.t_off
        return self.t_on <= t1 and (end is None or end >= t0)

    def to_dict(self, origin: float = 0.0) -> dict:
        """In flight time: stream times less `origin`, the stream clock at flight time 0."""
        def flight(t: float | None) -> float | None:
            return None if t is None else t - origin
        return {"kind": self.kind, "t_on": flight(self.t_on), "t_off": flight(self.t_off),
                "t_violating_until": flight(self.t_violating), "evidence": [ev.to_dict() for ev in self.evidence]}


def apply_live_veto(report: dict, episodes: list[VetoEpisode], t0: float, t1: float, origin: float = 0.0) -> bool:
    """Make the report `risky`/`vetoed` when a live veto episode overlaps [t0, t1]; returns whether it did.

    Episodes and [t0, t1] are in stream time; the report is in flight time (stream time less `origin`).
    Live violations the offline check of the window missed are added from the status evidence, so the
    report always names what the verifier saw.
    """
    overlapping = [e for e in episodes if e.overlaps(t0, t1)]
    hit = [e for e in overlapping if e.kind == "hazard"]
    live = report.setdefault("live", {})
    live["veto_episodes"] = [e.to_dict(origin) for e in hit]
    live["degraded_episodes"] = [e.to_dict(origin) for e in overlapping if e.kind == "degraded"]
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
            constraint, t = ev.constraint, ev.t
            if constraint in (None, DEGRADED) or constraint in named or (t is not None and not t0 <= t <= t1):
                continue  # known already, or seen outside this segment (an episode may span several)
            named.add(constraint)
            t_ev = (t if t is not None else ep.t_on) - origin
            report["violations"].append({
                "constraint": constraint, "t_start": t_ev, "t_end": t_ev, "uavs": ev.uavs,
                "worst_value": ev.number("value"), "limit": ev.number("limit"),
                "detail": f"live veto: {ev.message}",
            })
    return True


class VetoHistory:
    """The veto episodes of a live session (the newest `keep`), from the veto edges and the status evidence.

    Thread-safe: callbacks record, the evaluation thread takes a snapshot.
    """

    def __init__(self, keep: int = 200):
        self._episodes: deque[VetoEpisode] = deque(maxlen=keep)
        self._veto = False
        self._lock = threading.Lock()
        #: poses the verifier never processed, per vehicle (its status row `safety/verifier`), this session
        self.lost_before_verifier: dict[str, int] = {}

    def on_veto(self, veto: bool, t: float) -> None:
        """A veto value at stream time t (the newest pose's: the Bool carries no stamp)."""
        with self._lock:
            if veto and not self._veto:
                self._episodes.append(VetoEpisode(t, t_raised=t))
            elif self._veto and not veto and self._episodes:
                self._episodes[-1].t_off = t
            self._veto = bool(veto)

    def on_status(self, evidence: list[VetoEvidence], t_fallback: float) -> None:
        """The verifier's constraint statuses in error while the veto is up: the episode's evidence, and its
        times by the verifier's own clock (t_fallback when a status has no time)."""
        with self._lock:
            for ev in evidence:
                if ev.name == "safety/verifier" and (lost := str(ev.values.get("poses_lost_by_vehicle", ""))):
                    self.lost_before_verifier = {u: int(n) for u, _, n in (p.partition(":") for p in lost.split(","))}
            if not self._veto or not self._episodes:
                return
            ep = self._episodes[-1]
            for ev in evidence:
                if ev.level < 2 or ev.name.endswith("/veto"):
                    continue
                if ev.t is not None and ep.t_violating is None:
                    ep.t_on = ev.t  # the verifier's own time of the violation
                ep.t_violating = ev.t if ev.t is not None else t_fallback
                if len(ep.evidence) < EVIDENCE_PER_EPISODE:
                    ep.evidence.append(ev)

    def snapshot(self) -> list[VetoEpisode]:
        with self._lock:
            return copy.deepcopy(list(self._episodes))

    def clear(self) -> None:
        """After a backwards time jump the episodes' times mean nothing."""
        with self._lock:
            self._episodes.clear()
