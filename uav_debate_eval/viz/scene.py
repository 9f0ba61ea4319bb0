"""What the Foxglove layout shows, as foxglove-sdk messages and JSON: one function per thing on screen.

Every channel is defined here once (`TOPICS`), so the live view, the MCAP export and the shipped layout
(config/foxglove_layout.json) agree. Positions are in the mission's ENU frame `FRAME`. `latest` maps each
vehicle to its newest sample (t, x, y, z, vx, vy, vz), as the safety monitor keeps it.

A drone show's scene stays light to draw and to record: past DETAIL_MAX_VEHICLES, only the vehicles that matter
(in the active veto, in a drawn close pair or CPA warning) carry a label and a trail; every vehicle keeps its sphere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from foxglove.messages import (
    Color,
    LinePrimitive,
    LinePrimitiveLineType,
    Point3,
    Pose,
    PosesInFrame,
    Quaternion,
    SceneEntity,
    SceneUpdate,
    SpherePrimitive,
    TextPrimitive,
    Timestamp,
    Vector3,
)

from uav_debate_eval.core.mission import Geofence, Mission
from uav_debate_eval.safety.geometry import close_pairs, nearest_pair

FRAME = "map"
TOPICS = {
    "scene": "/swarm/scene",  # foxglove.SceneUpdate: vehicles, trails, geofence, close pairs, CPA warnings
    "poses": "/swarm/poses",  # foxglove.PosesInFrame: every vehicle's position
    "veto": "/swarm/safety/veto",  # JSON: veto, constraint, uavs, value, limit, t
    "status": "/swarm/safety/status",  # JSON: one entry per constraint (level, message, uavs, value, limit)
    "report": "/swarm/evaluation/report",  # JSON: the report (schema v2)
    "verdict": "/swarm/evaluation/verdict",  # JSON: segment, label, vetoed, summary, top findings
    "kinematics": "/swarm/kinematics",  # JSON: t, min_separation, its limit, speed per vehicle, max speed
    "dsl": "/swarm/dsl",  # JSON: {"text"}
    "annotations": "/swarm/annotations",  # foxglove.Log: events and violations at their flight time
}
#: Closest pairs drawn (by distance), within this many times the separation limit.
PAIRS_SHOWN = 10
PAIR_RANGE = 3.0
#: Every vehicle is labelled and trailed up to this many; beyond, only those that matter (a thousand labels and
#: trails are clutter on screen, and were most of the 50 s an MCAP export of 1,024 vehicles x 120 s took).
DETAIL_MAX_VEHICLES = 100
GREEN, AMBER, RED, BLUE, GREY = (Color(r=0.1, g=0.8, b=0.2, a=1.0), Color(r=1.0, g=0.65, b=0.0, a=1.0),
                                 Color(r=0.95, g=0.1, b=0.1, a=1.0), Color(r=0.2, g=0.6, b=1.0, a=0.9),
                                 Color(r=0.7, g=0.7, b=0.7, a=0.8))


def stamp(t_ns: int) -> Timestamp:
    return Timestamp(sec=t_ns // 1_000_000_000, nsec=t_ns % 1_000_000_000)


def _point(p: Sequence[float] | np.ndarray) -> Point3:
    return Point3(x=float(p[0]), y=float(p[1]), z=float(p[2]))


_LEVEL = Quaternion(x=0.0, y=0.0, z=0.0, w=1.0)
_SPHERE = Vector3(x=0.3, y=0.3, z=0.3)
_WHITE = Color(r=1.0, g=1.0, b=1.0, a=1.0)


def _pose(p: Sequence[float] | np.ndarray) -> Pose:
    return Pose(position=Vector3(x=float(p[0]), y=float(p[1]), z=float(p[2])), orientation=_LEVEL)


def margin_level(distance: float, limit: float | None) -> str:
    """red below the limit, amber within twice it, green beyond."""
    if limit is None or distance > 2.0 * limit:
        return "green"
    return "red" if distance < limit else "amber"


COLOURS = {"green": GREEN, "amber": AMBER, "red": RED}


def fence_lines(fence: Geofence) -> LinePrimitive:
    """The geofence box's 12 edges as a line list."""
    lo, hi = fence.min, fence.max
    corners = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
    points = [_point(corners[k]) for a in range(8) for b in range(a + 1, 8)
              if sum(corners[a][i] != corners[b][i] for i in range(3)) == 1 for k in (a, b)]
    return LinePrimitive(type=LinePrimitiveLineType.LineList, thickness=0.05, points=points, color=BLUE,
                         pose=_pose((0, 0, 0)))


def closest_pairs(pos: np.ndarray, limit: float | None) -> list[tuple[int, int, float, str]]:
    """The closest pairs drawn: (i, j, distance, margin level), nearest first, at most PAIRS_SHOWN, within
    PAIR_RANGE x the limit."""
    if len(pos) < 2:
        return []
    i, j, d = close_pairs(pos, PAIR_RANGE * limit if limit else 1e9)
    order = np.argsort(d, kind="stable")[:PAIRS_SHOWN].tolist()
    return [(int(i[k]), int(j[k]), float(d[k]), margin_level(float(d[k]), limit)) for k in order]


def _segment(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, colour: Color,
             thickness: float) -> LinePrimitive:
    return LinePrimitive(type=LinePrimitiveLineType.LineStrip, thickness=thickness, pose=_pose((0, 0, 0)),
                         points=[_point(a), _point(b)], color=colour)


def scene(t_ns: int, latest: Mapping[str, Sequence[float]], trails: Mapping[str, Sequence[Sequence[float]]],
          mission: Mission, vetoed: Sequence[str] = (), cpa: Sequence[tuple[Sequence[float], Sequence[float]]] = ()
          ) -> SceneUpdate:
    """The 3-D scene at one moment: vehicles (red when in the active veto), labels, short trails, the
    geofence, the closest pairs by margin and predicted CPA points (segments from now to the CPA)."""
    ids = sorted(latest)
    pos = np.array([latest[u][1:4] for u in ids], dtype=float).reshape(-1, 3)
    xyz = pos.tolist()
    limit = mission.constraints.min_separation_m
    hot = set(vetoed)
    pairs = closest_pairs(pos, limit)
    detailed = _detailed(ids, hot, pairs, cpa, xyz)
    entities = [SceneEntity(
        timestamp=stamp(t_ns), frame_id=FRAME, id="vehicles",
        spheres=[SpherePrimitive(pose=_pose(p), size=_SPHERE, color=RED if u in hot else GREEN)
                 for u, p in zip(ids, xyz, strict=True)],
        texts=[TextPrimitive(pose=_pose((xyz[k][0], xyz[k][1], xyz[k][2] + 0.4)), billboard=True, font_size=14.0,
                             scale_invariant=True, color=_WHITE, text=ids[k]) for k in detailed],
        lines=[LinePrimitive(type=LinePrimitiveLineType.LineStrip, thickness=0.03, color=GREY, pose=_pose((0, 0, 0)),
                             points=[_point(q) for q in trails[ids[k]]])
               for k in detailed if len(trails.get(ids[k], ())) > 1],
    ), SceneEntity(timestamp=stamp(t_ns), frame_id=FRAME, id="separation",
                   lines=[_segment(pos[i], pos[j], COLOURS[level], 0.04) for i, j, _d, level in pairs]),
        SceneEntity(timestamp=stamp(t_ns), frame_id=FRAME, id="cpa_warnings",
                    lines=[_segment(a, b, AMBER, 0.06) for a, b in cpa])]
    if mission.constraints.geofence is not None:
        entities.append(SceneEntity(timestamp=stamp(t_ns), frame_id=FRAME, id="geofence",
                                    lines=[fence_lines(mission.constraints.geofence)]))
    return SceneUpdate(entities=entities)


def _detailed(ids: list[str], hot: set[str], pairs: list[tuple[int, int, float, str]],
              cpa: Sequence[tuple[Sequence[float], Sequence[float]]], xyz: list[list[float]]) -> list[int]:
    """The vehicles (indices of `ids`) drawn with a label and a trail: all of a swarm up to DETAIL_MAX_VEHICLES,
    else those in the veto, in a drawn pair or at either end of a CPA warning's segment."""
    if len(ids) <= DETAIL_MAX_VEHICLES:
        return list(range(len(ids)))
    keep = {k for k, u in enumerate(ids) if u in hot} | {k for i, j, _d, _level in pairs for k in (i, j)}
    if cpa:
        at = {tuple(p): k for k, p in enumerate(xyz)}
        keep |= {k for ends in cpa for p in ends if (k := at.get(tuple(float(x) for x in p))) is not None}
    return sorted(keep)


def poses(t_ns: int, latest: Mapping[str, Sequence[float]]) -> PosesInFrame:
    return PosesInFrame(timestamp=stamp(t_ns), frame_id=FRAME, poses=[_pose(latest[u][1:4]) for u in sorted(latest)])


def kinematics(t: float, latest: Mapping[str, Sequence[float]], mission: Mission) -> dict:
    """The plot panel's series: minimum separation (and its limit), each vehicle's speed, the speed limit."""
    ids = sorted(latest)
    pos = np.array([latest[u][1:4] for u in ids], dtype=float).reshape(-1, 3)
    d_min = nearest_pair(pos)[0] if len(ids) > 1 else None
    moving = [u for u in ids if len(latest[u]) >= 7]
    vel = np.array([latest[u][4:7] for u in moving], dtype=float).reshape(-1, 3)
    finite = np.isfinite(vel).all(axis=1)
    speeds = dict(zip([u for u, ok in zip(moving, finite.tolist(), strict=True) if ok],
                      np.linalg.norm(vel[finite], axis=1).tolist(), strict=True))
    c = mission.constraints
    return {"t": t, "min_separation": d_min, "min_separation_limit": c.min_separation_m,
            "speeds": speeds, "max_speed": max(speeds.values(), default=None), "max_speed_limit": c.max_speed_mps}


def verdict(report: dict, top: int = 3) -> dict:
    """The indicator/table panels' view of a report: segment, label, vetoed, summary, top findings."""
    found = report.get("findings")
    if found is None:  # reports from before the findings catalogue: the violations
        found = [{"id": f"V{k}", "severity": "hazard", "t_start": v["t_start"], "t_end": v["t_end"],
                  "sentence": f"{v['constraint']} {', '.join(v['uavs'])}"}
                 for k, v in enumerate(report["violations"], 1)]
    seg = report.get("live", {}).get("segment", {})
    return {"segment": seg.get("id"), "t_start": seg.get("t_start"), "t_end": seg.get("t_end"),
            "label": report["verdict"]["label"], "vetoed": report["verdict"]["vetoed"],
            "summary": report["verdict"]["summary"],
            "findings": [{k: f.get(k) for k in ("id", "severity", "t_start", "t_end", "sentence")}
                         for f in found[:top]]}
