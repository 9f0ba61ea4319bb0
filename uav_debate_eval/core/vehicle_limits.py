"""Limits from the vehicle's own parameters (CONTRACT.md §3): what the checks use when no mission gives limits.

A log that holds the autopilot's parameters says how its owner configured the vehicle: a fence, the speeds it
flies at, how far it may lean. Without a mission these become the hard constraints, each with its source, so a
verdict never rests on nothing checked while the log holds limits.

- A **fence** is a hard limit the autopilot itself enforces: taken as configured, no margin. ArduPilot
  `FENCE_ENABLE` 1 with `FENCE_TYPE` bits 1 (`FENCE_ALT_MAX` above home), 2 (`FENCE_RADIUS` around home), 8
  (`FENCE_ALT_MIN`); PX4 `GF_ACTION` not 0 with `GF_MAX_HOR_DIST` / `GF_MAX_VER_DIST` (0: off). The circle becomes
  the 64-gon drawn around it (its corners stick out by 0.12 % of the radius: no point inside the circle is ever
  called outside). A side the fence leaves open is infinite.
- A **speed target** (ArduPilot `WPNAV_SPEED`, `LOIT_SPEED` (`WPNAV_LOIT_SPEED` before 3.4), `WPNAV_SPEED_UP`/
  `_DN`, a plane's airspeed limit `AIRSPEED_MAX` / `ARSPD_FBW_MAX` (PX4 `FW_AIRSPD_MAX`, for a vehicle its log calls
  a plane or a VTOL), a rover's `WP_SPEED` / `CRUISE_SPEED`) is what
  the autopilot aims for in its automatic and position-holding modes, not a hard limit: overshoot, gusts and wind
  (all of it, for a plane's ground speed against its airspeed) add to it, so the limit is `TARGET_MARGIN` (1.5) times
  the fastest target configured (a PX4 plane's climb and sink targets `FW_T_CLMB_MAX` / `FW_T_SINK_MAX` too). A
  **speed clamp** (PX4 `MPC_XY_VEL_MAX`, `MPC_Z_VEL_MAX_UP`/`_DN`: the controller never asks for more; not a
  plane's) gets `CLAMP_MARGIN` (1.2): only overshoot and gusts add to it. Either way a violation means flight far
  beyond what the vehicle was set up for.
- A **lean limit** (ArduPilot `ANGLE_MAX`, a plane's `LIM_ROLL_CD` / `LIM_PITCH_MAX` / `LIM_PITCH_MIN` or their
  4.5 `*_DEG` names, PX4 `MPC_TILTMAX_AIR`) bounds the attitude the autopilot may ask for. A vehicle set up to
  lean further also swings further from its target in ordinary flight, while a small lean limit says nothing of
  how closely the attitude follows its target (a copter limited to 15° still lags its target by 13° in a brisk
  reversal). So `max_attitude_error_deg` is the larger of the lean limit and the contract's default
  (`DEFAULT_ATTITUDE_ERROR_DEG`, 45°), checked only where the log records attitude targets.

Several vehicles: each constraint is the loosest of their limits (no vehicle is judged by another's), a fence
the box around all of their fences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from uav_debate_eval.core.mission import Constraints, Geofence

TARGET_MARGIN = 1.5
#: CONTRACT.md §2: the attitude error checked without a mission where the log records attitude targets.
DEFAULT_ATTITUDE_ERROR_DEG = 45.0
CLAMP_MARGIN = 1.2
_CIRCLE_SIDES = 64

#: (name, scale to SI, kind): speeds in m/s, angles in degrees.
_ARDU_SPEED = (("WPNAV_SPEED", 0.01), ("LOIT_SPEED", 0.01), ("WPNAV_LOIT_SPEED", 0.01))
_ROVER_SPEED = (("WP_SPEED", 1.0), ("CRUISE_SPEED", 1.0))
_ARDU_VSPEED = (("WPNAV_SPEED_UP", 0.01), ("WPNAV_SPEED_DN", 0.01))
_AIRSPEED = (("AIRSPEED_MAX", 1.0), ("ARSPD_FBW_MAX", 1.0))
_PX4_SPEED = (("MPC_XY_VEL_MAX", 1.0),)
_PX4_AIRSPEED = (("FW_AIRSPD_MAX", 1.0),)
_PX4_VSPEED = (("MPC_Z_VEL_MAX_UP", 1.0), ("MPC_Z_VEL_MAX_DN", 1.0))
_PX4_FW_VSPEED = (("FW_T_CLMB_MAX", 1.0), ("FW_T_SINK_MAX", 1.0))
_ANGLES = (("ANGLE_MAX", 0.01), ("LIM_ROLL_CD", 0.01), ("LIM_PITCH_MAX", 0.01), ("LIM_PITCH_MIN", 0.01),
           ("ROLL_LIMIT_DEG", 1.0), ("PTCH_LIM_MAX_DEG", 1.0), ("PTCH_LIM_MIN_DEG", 1.0), ("MPC_TILTMAX_AIR", 1.0))
_FENCE = ("FENCE_ENABLE", "FENCE_TYPE", "FENCE_ALT_MAX", "FENCE_ALT_MIN", "FENCE_RADIUS", "GF_ACTION",
          "GF_MAX_HOR_DIST", "GF_MAX_VER_DIST")
#: The parameters a reader keeps (the rest of a log's ~1000 parameters are not needed after reading).
LIMIT_PARAMS = frozenset(n for group in (_ARDU_SPEED, _ROVER_SPEED, _ARDU_VSPEED, _AIRSPEED, _PX4_SPEED, _PX4_AIRSPEED,
                                         _PX4_VSPEED, _PX4_FW_VSPEED, _ANGLES) for n, _ in group) | frozenset(_FENCE)


def limit_params(params: dict) -> dict[str, float]:
    """The parameters among a log's that set limits, as floats."""
    return {str(k): float(v) for k, v in params.items() if k in LIMIT_PARAMS}


@dataclass
class OwnLimits:
    """The constraints the vehicles' parameters give and, per contract constraint name, where each came from."""

    constraints: Constraints = field(default_factory=Constraints)
    sources: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def own_limits(params: dict[str, dict[str, float]], homes: dict[str, tuple[tuple[float, float, float], str]],
               controlled: bool, classes: dict[str, str] | None = None) -> OwnLimits:
    """The limits of every vehicle's parameters (`params` per vehicle; `homes`: its home in the world frame and
    how it was found). `controlled`: the log records attitude targets while armed, so a lean limit is checked;
    `classes`: each vehicle's class as its log says (a PX4 plane's speed is its airspeed limit's, a VTOL's the
    looser of that and its multicopter clamp)."""
    out = OwnLimits()
    speeds = [_speed(u, p, (classes or {}).get(u, "")) for u, p in params.items()]
    _loosest(out, "max_speed", "max_speed_mps", [s for s in speeds if s], params)
    vspeeds = [_vertical_speed(u, p, (classes or {}).get(u, "")) for u, p in params.items()]
    _loosest(out, "max_vertical_speed", "max_vertical_speed_mps", [s for s in vspeeds if s], params)
    if controlled:
        angles = [_angle(u, p) for u, p in params.items()]
        _loosest(out, "attitude_control", "max_attitude_error_deg", [a for a in angles if a], params)
    fences = [f for f in (_fence(u, p, homes.get(u), out.notes) for u, p in params.items()) if f]
    if fences:
        boxes = [g for g, _ in fences]
        lo = (min(g.min[0] for g in boxes), min(g.min[1] for g in boxes), min(g.min[2] for g in boxes))
        hi = (max(g.max[0] for g in boxes), max(g.max[1] for g in boxes), max(g.max[2] for g in boxes))
        out.constraints.geofence = Geofence(lo, hi, boxes[0].polygon if len(boxes) == 1 else None)
        out.sources["geofence"] = "; ".join(s for _, s in fences)
    return out


def _loosest(out: OwnLimits, name: str, attr: str, found: list[tuple[float, str]], params: dict) -> None:
    if not found:
        return
    limit, source = max(found)
    setattr(out.constraints, attr, limit)
    out.sources[name] = source + (" (the loosest of the vehicles' limits)" if len(params) > 1 else "")


def _first(p: dict[str, float], names) -> list[tuple[float, str]]:
    return [(abs(float(p[n])) * scale, n) for n, scale in names if n in p and float(p[n]) != 0.0]


def _px4(u: str, p: dict[str, float], vehicle_class: str, clamp: tuple, plane: tuple, clamp_what: str,
         plane_what: str) -> tuple[float, str] | None:
    """The looser of a PX4 vehicle's multicopter clamp (`clamp` names; not a plane's) and its plane target (`plane`
    names; a plane's or a VTOL's): a PX4 build holds both modules' parameters, the log's class says which fly."""
    found = []
    if vehicle_class != "fixed_wing" and (clamps := _first(p, clamp)):
        v, n = max(clamps)
        found.append((CLAMP_MARGIN * v, f"{u}: {CLAMP_MARGIN:g} × {n} {v:g} m/s ({clamp_what}vehicle parameters)"))
    if vehicle_class in ("fixed_wing", "vtol") and (targets := _first(p, plane)):
        v, n = max(targets)
        found.append((TARGET_MARGIN * v, f"{u}: {TARGET_MARGIN:g} × {n} {v:g} m/s ({plane_what}vehicle parameters)"))
    return max(found) if found else None


def _speed(u: str, p: dict[str, float], vehicle_class: str = "") -> tuple[float, str] | None:
    if px4 := _px4(u, p, vehicle_class, _PX4_SPEED, _PX4_AIRSPEED, "the controller's clamp; ",
                   "its airspeed limit; wind adds to ground speed; "):
        return px4
    targets = _first(p, _AIRSPEED) or _first(p, _ARDU_SPEED) or _first(p, _ROVER_SPEED)
    if not targets:
        return None
    v, n = max(targets)
    what = "its airspeed limit; wind adds to ground speed" if n in dict(_AIRSPEED) else "its cruise target"
    return TARGET_MARGIN * v, f"{u}: {TARGET_MARGIN:g} × {n} {v:g} m/s ({what}; vehicle parameters)"


def _vertical_speed(u: str, p: dict[str, float], vehicle_class: str = "") -> tuple[float, str] | None:
    if px4 := _px4(u, p, vehicle_class, _PX4_VSPEED, _PX4_FW_VSPEED, "", ""):  # a plane's: its climb and sink targets
        return px4
    targets = _first(p, _ARDU_VSPEED)
    if not targets:
        return None
    v, n = max(targets)
    return TARGET_MARGIN * v, f"{u}: {TARGET_MARGIN:g} × {n} {v:g} m/s (vehicle parameters)"


def _angle(u: str, p: dict[str, float]) -> tuple[float, str] | None:
    found = _first(p, _ANGLES)
    if not found:
        return None
    deg, n = max(found)
    if deg <= DEFAULT_ATTITUDE_ERROR_DEG:
        return None  # the default stands (the caller says so)
    return deg, f"{u}: {n} {deg:g}° (its lean limit, above the {DEFAULT_ATTITUDE_ERROR_DEG:g}° default; vehicle " \
                "parameters)"


def _fence(u: str, p: dict[str, float], home: tuple[tuple[float, float, float], str] | None,
           notes: list[str]) -> tuple[Geofence, str] | None:
    """The vehicle's fence around its home, or None when it has none enabled."""
    if "GF_ACTION" in p:
        on, top, radius, floor = int(p["GF_ACTION"]) != 0, p.get("GF_MAX_VER_DIST", 0.0), \
            p.get("GF_MAX_HOR_DIST", 0.0), None
        names = ("GF_MAX_VER_DIST", "GF_MAX_HOR_DIST", "")
        off = "GF_ACTION 0"
    elif "FENCE_ENABLE" in p:
        kind = int(p.get("FENCE_TYPE", 7))
        on, off = int(p["FENCE_ENABLE"]) != 0, "FENCE_ENABLE 0"
        top = p.get("FENCE_ALT_MAX", 0.0) if kind & 1 else 0.0
        radius = p.get("FENCE_RADIUS", 0.0) if kind & 2 else 0.0
        floor = p.get("FENCE_ALT_MIN") if kind & 8 else None
        names = ("FENCE_ALT_MAX", "FENCE_RADIUS", "FENCE_ALT_MIN")
    else:
        return None
    if not on:
        notes.append(f"{u}: its fence is configured but switched off ({off}): not checked")
        return None
    if home is None or not (top > 0 or radius > 0 or floor is not None):
        return None
    (x, y, z), home_how = home
    inf = math.inf
    reach = radius / math.cos(math.pi / _CIRCLE_SIDES) if radius > 0 else inf
    lo = (x - reach, y - reach, z + floor if floor is not None else -inf)
    hi = (x + reach, y + reach, z + top if top > 0 else inf)
    polygon = [(x + reach * math.cos(2 * math.pi * (k + 0.5) / _CIRCLE_SIDES),
                y + reach * math.sin(2 * math.pi * (k + 0.5) / _CIRCLE_SIDES)) for k in range(_CIRCLE_SIDES)] \
        if radius > 0 else None
    parts = [f"ceiling {top:g} m above home from {names[0]}"] if top > 0 else []
    parts += [f"radius {radius:g} m around home from {names[1]}"] if radius > 0 else []
    parts += [f"floor {floor:g} m from {names[2]}"] if floor is not None else []
    return Geofence(lo, hi, polygon), f"{u}: {', '.join(parts)} (vehicle parameters; home: {home_how})"
