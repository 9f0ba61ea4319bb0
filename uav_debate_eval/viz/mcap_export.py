"""An evaluated flight as an annotated MCAP that opens in Foxglove with config/foxglove_layout.json: the
scene and poses over time, the veto intervals as a topic, every event and violation as an annotation
(a foxglove.Log at its time on /swarm/annotations, and an MCAP metadata record), the DSL and the report, and
every raw sample the flight was evaluated from (io.flight_mcap: `evaluate FILE` replays it to the same report).

Message times are the input clock (flight time + the report's mission.t0), so the timeline matches the
recording; every time inside a message is flight time.
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path

import foxglove
import numpy as np
from foxglove.messages import Log, LogLevel

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io import flight_mcap
from uav_debate_eval.io.flight_mcap_autopilot import autopilot_message
from uav_debate_eval.report.precision import rounded
from uav_debate_eval.runner.pipeline import Evaluation
from uav_debate_eval.viz import scene
from uav_debate_eval.viz.channels import Channels

#: Scene, poses and plots per second of flight.
RATE_HZ = 10.0
TRAIL_STEPS = 25


def write_mcap(evaluation: Evaluation, path: Path, poses: SwarmTrajectory | None = None) -> Path:
    """Write the flight to `path` (replaced if it exists); `poses`: the samples as read (before the data-quality
    pass; default the evaluated trajectory), recorded raw so the file replays to the same evaluation."""
    report, traj, mission = evaluation.report, evaluation.traj, evaluation.mission
    origin = report["mission"].get("t0") or 0.0

    def ns(t: float) -> int:
        return max(0, int(round((origin + t) * 1e9)))

    context = foxglove.Context()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # as --out's folder is made
        writer = foxglove.open_mcap(path, allow_overwrite=True, context=context)
    except OSError as exc:
        why = "a file is in the way of its folder" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        raise InputError(f"{path}: cannot write the MCAP ({why})") from None
    try:
        # the replay's data first: a file cut short (a kill, a full disk) keeps it whatever of the scene it loses
        _log_once(context, flight_mcap.MISSION_TOPIC, flight_mcap.MISSION_SCHEMA,  # the replay's mission
                  flight_mcap.mission_message(mission.source), ns(traj.t_start))
        _raw_poses(context, poses if poses is not None else traj)
        ch = Channels(context)
        snaps = traj.resample(dt=1.0 / RATE_HZ)
        trails: dict[str, deque] = {u: deque(maxlen=TRAIL_STEPS) for u in snaps.uav_ids}
        samples = np.concatenate([np.broadcast_to(snaps.t[:, None, None], (*snaps.pos.shape[:2], 1)), snaps.pos,
                                  snaps.vel], axis=2)  # (step, vehicle, t x y z vx vy vz)
        for k, t in enumerate(snaps.t.tolist()):
            seen = np.flatnonzero(snaps.valid[k])
            latest = {snaps.uav_ids[j]: tuple(row) for j, row in zip(seen.tolist(), samples[k, seen].tolist(),
                                                                     strict=True)}
            for u, row in latest.items():
                trails[u].append(row[1:4])
            if not latest:
                continue
            hot = _vetoed_uavs(report["violations"], t)
            ch.scene.log(scene.scene(ns(t), latest, trails, mission, hot), log_time=ns(t))
            ch.poses.log(scene.poses(ns(t), latest), log_time=ns(t))
            ch.log_json("kinematics", scene.kinematics(t, latest, mission), log_time=ns(t))
        _veto_topic(ch, report, evaluation.safety.veto_intervals, ns, traj.t_start)
        _annotations(ch, writer, report, ns)
        ch.log_json("dsl", {"text": report["dsl"]["text"]}, log_time=ns(traj.t_start))
        shown = rounded(report)  # as report.json shows it; the intervals above are matched at full precision
        ch.log_json("report", shown, log_time=ns(traj.t_end))
        ch.log_json("verdict", scene.verdict(shown), log_time=ns(traj.t_end))
    finally:
        writer.close()
    return path


def _raw_poses(context: foxglove.Context, traj: SwarmTrajectory) -> None:
    """Every sample on its vehicle's pose (or odometry) topic, CDR as a ROS 2 recorder writes it, the autopilot's
    events of the flight, the vehicles' own frames and what an autopilot log gave beside them."""
    schemas: dict[str, foxglove.Schema] = {}
    for topic, msgtype, stamps, rows in flight_mcap.messages(traj):
        if msgtype not in schemas:
            schemas[msgtype] = foxglove.Schema(name=msgtype, encoding="ros2msg",
                                               data=flight_mcap.schema_text(msgtype).encode())
        channel = foxglove.Channel(topic, schema=schemas[msgtype], message_encoding="cdr", context=context)
        for ns_, row in zip(stamps.tolist(), rows, strict=True):
            channel.log(row.tobytes(), log_time=ns_)
    events = foxglove.Channel(flight_mcap.EVENTS_TOPIC, schema=flight_mcap.EVENT_SCHEMA, message_encoding="json",
                              context=context)
    for ns_, msg in flight_mcap.event_messages(traj):
        events.log(msg, log_time=ns_)
    start_ns = max(0, int(flight_mcap.stamp_ns(np.array([traj.t0]))[0]))
    _log_once(context, flight_mcap.FRAMES_TOPIC, flight_mcap.FRAMES_SCHEMA, flight_mcap.frames_message(traj), start_ns)
    _log_once(context, flight_mcap.AUTOPILOT_TOPIC, flight_mcap.AUTOPILOT_SCHEMA,
              autopilot_message(traj), start_ns)


def _log_once(context: foxglove.Context, topic: str, schema: dict, message: bytes | None, log_time: int) -> None:
    """A JSON channel of one message (none when there is nothing to say)."""
    if message is not None:
        foxglove.Channel(topic, schema=schema, message_encoding="json", context=context).log(message,
                                                                                          log_time=log_time)


def _vetoed_uavs(violations: list[dict], t: float) -> list[str]:
    return sorted({u for v in violations if v["t_start"] <= t <= v["t_end"] for u in v["uavs"]})


def _veto_topic(ch: Channels, report: dict, intervals: list[tuple[float, float]], ns, t_start: float) -> None:
    """False at the start, then True/False at each veto interval's edges, with the constraint that raised it
    (and the status table of the violations behind it)."""
    ch.log_json("veto", {"veto": False, "constraint": None, "uavs": [], "value": None, "limit": None,
                         "t": t_start}, log_time=ns(t_start))
    for a, b in intervals:
        cause = [v for v in report["violations"] if a - 1e-6 <= v["t_start"] <= b]
        first = min(cause, key=lambda v: v["t_start"]) if cause else None
        ch.log_json("veto", {"veto": True, "constraint": first["constraint"] if first else None,
                             "uavs": sorted({u for v in cause for u in v["uavs"]}),
                             "value": first["worst_value"] if first else None,
                             "limit": first["limit"] if first else None, "t": a}, log_time=ns(a))
        ch.log_json("status", {"t": a, "status": [
            {"name": f"safety/{v['constraint']}", "level": 2, "message": f"violated by {', '.join(v['uavs'])}",
             "values": {"uavs": ",".join(v["uavs"]), "value": v["worst_value"], "limit": v["limit"],
                        "t": v["t_start"]}} for v in cause]}, log_time=ns(a))
        if math.isfinite(b):
            ch.log_json("veto", {"veto": False, "constraint": None, "uavs": [], "value": None, "limit": None,
                                 "t": b}, log_time=ns(b))
            ch.log_json("status", {"t": b, "status": []}, log_time=ns(b))


def _annotations(ch: Channels, writer: foxglove.mcap.MCAPWriter, report: dict, ns) -> None:
    """One annotation per violation (error) and per event (info), in time order."""
    rows = [(v["t_start"], "violation", LogLevel.Error,
             f"violation {v['constraint']} {', '.join(v['uavs'])}: worst {_num(v['worst_value'])} "
             f"(limit {_num(v['limit'])}) t={v['t_start']:.2f}-{v['t_end']:.2f} s",
             {"constraint": v["constraint"], "t_start": str(v["t_start"]), "t_end": str(v["t_end"]),
              "uavs": ",".join(v["uavs"])}) for v in report["violations"]]
    rows += [(e["t"], "event", LogLevel.Info, f"{e['id']} {e['type']} {', '.join(e['uavs'])} t={e['t']:.2f} s",
              {"id": e["id"], "type": e["type"], "t": str(e["t"]), "uavs": ",".join(e["uavs"])})
             for e in report["events"]]
    for k, (t, kind, level, text, meta) in enumerate(sorted(rows, key=lambda r: r[0])):
        ch.annotations.log(Log(timestamp=scene.stamp(ns(t)), level=level, message=text, name=kind),
                           log_time=ns(t))
        writer.write_metadata(f"{kind}:{k}", meta)


def _num(v: float | None) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.3g}"
