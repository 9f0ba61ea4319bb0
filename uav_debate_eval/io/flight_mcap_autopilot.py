"""What an autopilot log gives beside its positions, carried in a flight MCAP (`/autopilot_log`, one JSON message):
the limit parameters, the vehicle class, the attitude and its targets, the GPS fixes, the estimator's invalid
spans, where each log ended and the findings its reader made. The export writes it (`autopilot_message`) and
`io.flight_mcap` reads it back onto the replayed flight (`put_autopilot`), so the replay of a log's flight MCAP
checks what the log's own evaluation checked."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from uav_debate_eval.core.trajectory import SwarmTrajectory


def autopilot_message(traj: SwarmTrajectory) -> bytes | None:
    """What the autopilot log gave beside its positions and events (None when it gave nothing: a pose recording).
    Times are flight times with the flight's origin `t0` beside them (a unix origin added to each would cost them
    their last 0.2 microseconds, and a time on a printed boundary its rounding)."""
    from dataclasses import asdict

    from uav_debate_eval.quality.updates import true_spans

    ing = traj.ingest
    tracks: dict[str, dict] = {}
    for u, tr in traj.tracks.items():
        entry: dict[str, Any] = {name: true_spans(tr.t, ~flags) for name in ("est_valid", "est_z_valid")
                                 if (flags := getattr(tr, name)) is not None}
        if tr.recording_end is not None:
            entry["recording_end"] = tr.recording_end
        if entry:
            tracks[u] = entry
    body = {"params": ing.params, "autopilot": ing.autopilot, "attitude": ing.attitude, "gnss": ing.gnss,
            "tracks": tracks, "findings": [asdict(f) for f in ing.findings],
            "not_evaluable": [asdict(n) for n in ing.not_evaluable]}
    return json.dumps({**body, "t0": traj.t0}, default=plain_json).encode() if any(body.values()) else None


def put_autopilot(traj: SwarmTrajectory, body: dict) -> None:
    """An autopilot log's context read back onto the replayed flight, its times moved onto the replay's origin."""
    from uav_debate_eval.core.records import Finding, NotEvaluable

    if not body:
        return
    shift, ing = float(body["t0"]) - traj.t0, traj.ingest

    def moved(t: float | None) -> float | None:
        return None if t is None else float(t) + shift

    ing.params.update(body.get("params") or {})
    ing.autopilot.update(body.get("autopilot") or {})
    for into, key in ((ing.attitude, "attitude"), (ing.gnss, "gnss")):
        into.update({u: (np.asarray(a[0], dtype=float) + shift, *(np.asarray(x) for x in a[1:]))
                     for u, a in (body.get(key) or {}).items()})
    for u, entry in (body.get("tracks") or {}).items():
        if (tr := traj.tracks.get(u)) is None:
            continue
        for name in ("est_valid", "est_z_valid"):
            if name in entry:
                flags = np.ones(len(tr), dtype=bool)
                for a, b in entry[name]:  # a run of invalid samples, first and last (the same samples here)
                    flags[(tr.t >= a + shift - 1e-6) & (tr.t <= b + shift + 1e-6)] = False
                setattr(tr, name, flags)
        if "recording_end" in entry:
            tr.recording_end = moved(entry["recording_end"])
    ing.findings.extend(Finding(**{**f, "t_start": moved(f["t_start"]), "t_end": moved(f["t_end"])})
                        for f in body.get("findings") or [])
    ing.not_evaluable.extend(NotEvaluable(**{**n, "t_start": moved(n["t_start"]), "t_end": moved(n["t_end"])})
                             for n in body.get("not_evaluable") or [])


def plain_json(value: Any) -> Any:
    """A numpy scalar or array inside an event as JSON takes it."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
