"""The live Foxglove view: a foxglove-sdk WebSocket server (subprotocol foxglove.websocket.v1) fed by the
monitor's poses, veto, status and reports. Pose callbacks only store the newest sample (O(1), on the
verifier's thread); `tick` draws the scene and the plots at a fixed rate on another thread."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Sequence

import foxglove

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.live.veto_history import VetoEvidence
from uav_debate_eval.viz import scene
from uav_debate_eval.viz.channels import Channels
from uav_debate_eval.viz.relay import SubprotocolRelay

#: Trail length (stream seconds) and spacing of its points.
TRAIL_S = 5.0
TRAIL_STEP_S = 0.2


class LiveView:
    """Serves the session on host:port until `close`; the veto, status and reports go out as they arrive."""

    def __init__(self, mission: Mission, port: int, host: str = "127.0.0.1"):
        self.mission = mission
        self.context = foxglove.Context()
        self.channels = Channels(self.context)
        # the SDK serves loopback only; the relay serves host:port under both names of protocol v1
        self.server = foxglove.start_server(name="uav_debate_eval live", host="127.0.0.1", port=0,
                                            context=self.context)
        self.relay = SubprotocolRelay(host, port, self.server.port)
        self.port = self.relay.port
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[float, ...]] = {}
        self._trails: dict[str, deque[tuple[float, float, float]]] = {}
        self._trail_t: dict[str, float] = {}
        self._origin: float | None = None  # stream time at flight time 0
        self._veto_uavs: list[str] = []
        self._cpa: list[tuple[Sequence[float], Sequence[float]]] = []

    def flight_time(self, t: float) -> float:
        if self._origin is None:
            self._origin = t
        return t - self._origin

    def on_pose(self, uav: str, t: float, pos: Sequence[float], vel: Sequence[float] | None = None) -> None:
        v = tuple(vel) if vel is not None else (math.nan,) * 3
        with self._lock:
            if self._origin is None:  # the first pose is flight time 0
                self._origin = t
            self._latest[uav] = (t, *pos, *v)
            if t - self._trail_t.get(uav, -math.inf) >= TRAIL_STEP_S:
                self._trail_t[uav] = t
                trail = self._trails.setdefault(uav, deque(maxlen=int(TRAIL_S / TRAIL_STEP_S)))
                trail.append((float(pos[0]), float(pos[1]), float(pos[2])))

    def on_veto(self, veto: bool, evidence: Sequence[VetoEvidence]) -> None:
        """The verifier's veto with the constraint statuses in error (the first names the constraint)."""
        errors = [e for e in evidence if e.level >= 2 and e.constraint is not None]
        first = errors[0] if errors and veto else None
        self._veto_uavs = sorted({u for e in errors for u in e.uavs}) if veto else []
        t = first.t if first is not None and first.t is not None else self._newest()
        self.channels.log_json("veto", {
            "veto": bool(veto), "constraint": first.constraint if first else None, "uavs": self._veto_uavs,
            "value": first.number("value") if first else None, "limit": first.number("limit") if first else None,
            "t": self.flight_time(t) if t is not None else None})

    def on_status(self, evidence: Sequence[VetoEvidence]) -> None:
        """The status table; predicted CPA warnings are drawn in the scene from their vehicles."""
        t = next((e.t for e in evidence if e.t is not None), None)
        self.channels.log_json("status", {"t": self.flight_time(t) if t is not None else None,
                                          "status": [e.to_dict() for e in evidence]})
        with self._lock:
            self._cpa = []
            for e in evidence:  # the verifier names the first predicted pair of each warning kind
                if e.name.endswith("warning/cpa") and len(e.uavs) == 2 and set(e.uavs) <= set(self._latest):
                    a, b = e.uavs
                    self._cpa.append((self._latest[a][1:4], self._latest[b][1:4]))

    def on_report(self, report: dict) -> None:
        self.channels.log_json("report", report)
        self.channels.log_json("verdict", scene.verdict(report))

    def on_dsl(self, text: str) -> None:
        self.channels.log_json("dsl", {"text": text})

    def _newest(self) -> float | None:
        return max((s[0] for s in self._latest.values()), default=None)

    def tick(self) -> None:
        """Draw the scene and the plots from the newest samples (call at the view's rate)."""
        with self._lock:
            if not self._latest:
                return
            latest = dict(self._latest)
            trails = {u: list(tr) for u, tr in self._trails.items()}
            cpa = list(self._cpa)
        now = time.time_ns()
        self.channels.scene.log(scene.scene(now, latest, trails, self.mission, self._veto_uavs, cpa), log_time=now)
        self.channels.poses.log(scene.poses(now, latest), log_time=now)
        t = self.flight_time(max(s[0] for s in latest.values()))
        self.channels.log_json("kinematics", scene.kinematics(t, latest, self.mission), log_time=now)

    def close(self) -> None:
        self.relay.close()
        self.server.stop()
