"""Fault injection: each fault is a manoeuvre the controller is pushed into (or a comms failure),
plus a measurement of when its effect is visible in the recorded samples (the ground truth).

Kinds and what a checker should report:

=================== ========================= ============== ============================================
kind                constraint                event          how it is produced
=================== ========================= ============== ============================================
near_miss           min_separation            proximity      a vehicle closes on its nearest neighbour
altitude_drop       max_vertical_speed        altitude_rate  a fast commanded descent (~4 m/s), then back
geofence_exit       geofence                  --             a climb through the geofence ceiling
telemetry_dropout   stale_data                --             a vehicle's samples stop, then resume
overspeed           max_speed                 --             a forward dash above the speed limit
sharp_turn          --                        sharp_turn     an abrupt sidestep (> 30 deg course change)
link_loss           --                        link_loss      link_ok = 0 while samples continue
=================== ========================= ============== ============================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.sim.dynamics import Limits, Override, Reference
from uav_debate_eval.sim.paths import Bump
from uav_debate_eval.sim.truth import TruthFault

FAULT_KINDS: dict[str, tuple[str | None, str | None]] = {
    "near_miss": ("min_separation", "proximity"),
    "altitude_drop": ("max_vertical_speed", "altitude_rate"),
    "geofence_exit": ("geofence", None),
    "telemetry_dropout": ("stale_data", None),
    "overspeed": ("max_speed", None),
    "sharp_turn": (None, "sharp_turn"),
    "link_loss": (None, "link_loss"),
}
ALTITUDE_RATE_MPS = 3.0  # contract default event threshold; the drop must clearly exceed it


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    t: float | None = None  # start time in s; None: scheduled by the simulator


def parse_fault(text: str) -> FaultSpec:
    """'near_miss' or 'near_miss@20' -> FaultSpec; unknown kinds are an InputError."""
    kind, _, at = str(text).strip().partition("@")
    kind = kind.strip()
    if kind not in FAULT_KINDS:
        raise InputError(f"unknown fault '{kind}' (known: {', '.join(FAULT_KINDS)})")
    if not at:
        return FaultSpec(kind)
    try:
        t = float(at)
    except ValueError:
        raise InputError(f"fault '{text}': time after '@' must be seconds, got '{at}'") from None
    if not np.isfinite(t) or t < 0:
        raise InputError(f"fault '{text}': time must be >= 0")
    return FaultSpec(kind, t)


@dataclass
class PlanInfo:
    """What fault injection needs to know about a scenario's nominal flight."""

    uavs: list[str]
    base: Reference
    spacing: float  # nominal nearest-neighbour distance, m (inf for one vehicle)
    z_min: float  # lowest nominal altitude, m
    fence_z_max: float
    min_separation: float
    max_speed: float
    max_vertical_speed: float
    stale_timeout: float
    limits: Limits


@dataclass
class Injection:
    kind: str
    uavs: list[int]
    t0: float
    t1: float  # end of the commanded manoeuvre or outage
    modify: Callable[[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None] | None = None
    overrides: list[Override] = field(default_factory=list)
    drop: tuple[int, float, float] | None = None  # vehicle, t0, t1: samples strictly inside are not recorded
    link_down: tuple[int, float, float] | None = None  # vehicle, t0, t1: link_ok = 0 for t0 <= t < t1


def _timing(kind: str, p: PlanInfo) -> Bump:
    """Manoeuvre profile from the scenario's nominal numbers (the same for scheduling and flying)."""
    if kind == "near_miss":
        if not np.isfinite(p.spacing):
            raise InputError("fault near_miss needs at least 2 vehicles")
        up = min(max(4.0, 1.5 * (p.spacing - 0.6 * p.min_separation) / 0.45), 12.0)  # closing at <= ~0.45 m/s
        return Bump(0.0, up, 2.0, up)
    if kind == "altitude_drop":
        d = _drop_depth(p)
        return Bump(0.0, 1.5 * d / 4.2, 2.0, 1.5 * d / (0.5 * p.max_vertical_speed))
    if kind == "geofence_exit":
        up = 1.5 * (p.fence_z_max - p.z_min + 1.5) / (0.7 * p.max_vertical_speed)
        return Bump(0.0, up, 2.0, up)
    if kind == "telemetry_dropout":
        return Bump(0.0, 0.0, max(2.0, 4.0 * p.stale_timeout), 0.0)
    if kind == "overspeed":
        d = 2.0 * p.max_speed
        return Bump(0.0, 1.5 * d / (1.2 * p.max_speed), 0.5, 1.5 * d / (0.3 * p.max_speed))
    if kind == "sharp_turn":
        return Bump(0.0, 2.0, 1.0, 2.0)
    return Bump(0.0, 0.0, 3.0, 0.0)  # link_loss


def _drop_depth(p: PlanInfo) -> float:
    return min(7.0, p.z_min - 2.5)


def span(kind: str, p: PlanInfo) -> float:
    """How long a fault of this kind takes, including a short settling time."""
    return _timing(kind, p).t_end + 1.0


def ready(kind: str, t0: float, p: PlanInfo) -> bool:
    """Whether a fault can start at t0: a sharp turn needs every vehicle cruising (>= 0.5 m/s) throughout."""
    if kind != "sharp_turn":
        return True
    end = t0 + _timing(kind, p).t_end
    return min(np.linalg.norm(p.base(t)[1][:, :2], axis=1).min() for t in np.linspace(t0, end, 11)) >= 0.5


def inject(spec: FaultSpec, t0: float, p: PlanInfo, used: set[int]) -> Injection:
    """Plan one fault starting at t0, preferring vehicles no other fault uses."""
    b = _timing(spec.kind, p)
    bump = Bump(t0, b.up, b.hold, b.down)
    pos0, _ = p.base(t0)
    n = len(p.uavs)
    free = [i for i in range(n) if i not in used] or list(range(n))
    direction = _direction(p, t0)

    if spec.kind == "near_miss":
        a, v = _closest_pair(pos0, free if len(free) >= 2 else list(range(n)))
        close = 0.6 * p.min_separation

        def near(t, bp, bv, pos, vel):
            s, ds = bump(t)
            gap = bp[v] - bp[a]
            target = gap * (close / max(float(np.linalg.norm(gap)), 1e-9)) - gap  # to `close` from a, same side
            pos[v] += s * target
            vel[v] += ds * target + s * (bv[a] - bv[v])

        return Injection("near_miss", [a, v], t0, bump.t_end, near)

    i = free[0]
    if spec.kind == "altitude_drop":
        drop = np.array([0.0, 0.0, -_drop_depth(p)])
        fast = Limits(max(2.0 * p.max_speed, 6.0), 5.0, 6.0)
        return Injection("altitude_drop", [i], t0, bump.t_end, _offset(i, bump, drop),
                         [Override(i, t0, t0 + b.up + b.hold, fast)])
    if spec.kind == "geofence_exit":
        i = max(free, key=lambda k: pos0[k, 2])
        climb = np.array([0.0, 0.0, p.fence_z_max - pos0[i, 2] + 1.5])
        return Injection("geofence_exit", [i], t0, bump.t_end, _offset(i, bump, climb))
    if spec.kind == "overspeed":
        i = max(free, key=lambda k: float(pos0[k] @ direction))
        dash = direction * 2.0 * p.max_speed
        fast = Limits(2.0 * p.max_speed, p.limits.vertical_speed, 6.0)
        return Injection("overspeed", [i], t0, bump.t_end, _offset(i, bump, dash),
                         [Override(i, t0, t0 + b.up + b.hold, fast)])
    if spec.kind == "sharp_turn":
        if not ready("sharp_turn", t0, p):
            raise InputError(f"fault sharp_turn@{t0:g}: needs the vehicles cruising for {bump.t_end - t0:g} s "
                             "from then")
        side = np.array([-direction[1], direction[0], 0.0])
        lateral = (pos0 - pos0.mean(axis=0)) @ side
        i = max(free, key=lambda k: abs(lateral[k]))
        step = side * (2.5 if lateral[i] >= 0 else -2.5)
        agile = Limits(p.limits.speed, p.limits.vertical_speed, 4.0)
        return Injection("sharp_turn", [i], t0, bump.t_end, _offset(i, bump, step),
                         [Override(i, t0, bump.t_end, agile)])
    if spec.kind == "telemetry_dropout":
        return Injection("telemetry_dropout", [i], t0, bump.t_end, drop=(i, t0, bump.t_end))
    return Injection("link_loss", [i], t0, bump.t_end, link_down=(i, t0, bump.t_end))


def _offset(i: int, bump: Bump, displacement: np.ndarray):
    def apply(t, bp, bv, pos, vel):
        s, ds = bump(t)
        pos[i] += s * displacement
        vel[i] += ds * displacement

    return apply


def _direction(p: PlanInfo, t: float) -> np.ndarray:
    """Mean horizontal direction of travel of the swarm at t (+x while hovering)."""
    for dt in (0.0, 1.0, 3.0):
        v = p.base(t + dt)[1][:, :2].mean(axis=0)
        if np.linalg.norm(v) > 0.05:
            v = v / np.linalg.norm(v)
            return np.array([v[0], v[1], 0.0])
    return np.array([1.0, 0.0, 0.0])


def _closest_pair(pos: np.ndarray, candidates: list[int]) -> tuple[int, int]:
    sub = pos[candidates]
    dist, idx = cKDTree(sub).query(sub, k=2)
    j = int(np.argmin(dist[:, 1]))
    return candidates[j], candidates[int(idx[j, 1])]


@dataclass
class Recorded:
    """The samples as recorded (noise included), on the shared output clock."""

    t: np.ndarray  # (T,)
    pos: np.ndarray  # (T, N, 3)
    vel: np.ndarray  # (T, N, 3)
    keep: np.ndarray  # (T, N) bool: sample recorded
    link: np.ndarray  # (T, N) 0/1
    base_vel: Callable[[np.ndarray], np.ndarray]  # times -> nominal reference velocities (T', N, 3)


def measure(inj: Injection, rec: Recorded, p: PlanInfo, fence) -> TruthFault:
    """The fault's interval as visible in the recorded data, with the worst value reached."""
    names = [p.uavs[i] for i in inj.uavs]
    constraint, event = FAULT_KINDS[inj.kind]
    w = np.flatnonzero((rec.t >= inj.t0 - 1.0) & (rec.t <= inj.t1 + 3.0))
    i = inj.uavs[-1]
    detail: dict = {}
    if inj.kind == "telemetry_dropout":
        k = np.flatnonzero(rec.keep[:, i])
        before, after = k[rec.t[k] <= inj.t0], k[rec.t[k] >= inj.t1]
        if not len(before) or not len(after):
            raise InputError(f"fault telemetry_dropout@{inj.t0:g}: the outage must lie inside the flight")
        t0, t1 = float(rec.t[before[-1]]), float(rec.t[after[0]])
        detail["silence_s"] = round(t1 - t0, 6)
        return TruthFault(inj.kind, names, t0, t1, constraint, event, detail)
    if inj.kind == "near_miss":
        a, b = inj.uavs
        ok = rec.keep[w, a] & rec.keep[w, b]
        value = np.where(ok, np.linalg.norm(rec.pos[w, a] - rec.pos[w, b], axis=1), np.inf)
        hit = value < p.min_separation
        detail["min_separation_m"] = round(float(value.min()), 4)
    elif inj.kind == "altitude_drop":
        value = np.abs(rec.vel[w, i, 2])
        hit = value > p.max_vertical_speed
        detail["peak_vertical_speed_mps"] = round(float(value.max()), 4)
    elif inj.kind == "geofence_exit":
        value = fence.outside_distance(rec.pos[w, i])
        hit = value > 0
        detail["max_outside_m"] = round(float(value.max()), 4)
    elif inj.kind == "overspeed":
        value = np.linalg.norm(rec.vel[w, i], axis=1)
        hit = value > p.max_speed
        detail["peak_speed_mps"] = round(float(value.max()), 4)
    elif inj.kind == "sharp_turn":
        nominal = rec.base_vel(rec.t[w])[:, i, :2]
        actual = rec.vel[w, i, :2]
        cross = nominal[:, 0] * actual[:, 1] - nominal[:, 1] * actual[:, 0]
        value = np.degrees(np.abs(np.arctan2(cross, (nominal * actual).sum(axis=1))))
        hit = value > 30.0
        detail["peak_course_change_deg"] = round(float(value.max()), 2)
    else:  # link_loss
        hit = (rec.link[w, i] == 0) & rec.keep[w, i]
    k = w[hit]
    if not len(k):
        raise InputError(f"fault {inj.kind}@{inj.t0:g} had no effect in this scenario (try another time)")
    return TruthFault(inj.kind, names, float(rec.t[k[0]]), float(rec.t[k[-1]]), constraint, event, detail)
