"""The mission (CONTRACT.md §2): constraints, thresholds, weights, route, formation, frames and rules.

Read from and written to mission.yaml by `core.mission_file`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from uav_debate_eval.core.records import CONSTRAINT_NAMES
from uav_debate_eval.stl.spec import Rule

DEFAULT_WEIGHTS = {"flight_control": 0.35, "coordination": 0.40, "safety": 0.25}


@dataclass
class Geofence:
    """Axis-aligned box, optionally narrowed by a horizontal polygon (extension beyond the contract)."""

    min: tuple[float, float, float]
    max: tuple[float, float, float]
    polygon: list[tuple[float, float]] | None = None

    def outside_distance(self, pos: np.ndarray) -> np.ndarray:
        """How far each position (..., 3) lies outside the fence in metres; <= 0 means inside."""
        lo, hi = np.asarray(self.min), np.asarray(self.max)
        below, above = lo - pos, pos - hi
        # the largest of the six wall distances, folded in their order (numpy's max over a last axis of six is ~10x
        # slower; the maximum of finite numbers is the same number)
        d = below[..., 0]
        for part in (below[..., 1], below[..., 2], above[..., 0], above[..., 1], above[..., 2]):
            d = np.maximum(d, part)
        if self.polygon:
            d = np.maximum(d, _polygon_outside_distance(pos[..., :2], np.asarray(self.polygon)))
        return d


def _polygon_outside_distance(xy: np.ndarray, poly: np.ndarray) -> np.ndarray:
    """Signed distance to a simple polygon's boundary: positive outside, negative inside."""
    flat = xy.reshape(-1, 2)
    a, b = poly, np.roll(poly, -1, axis=0)
    ab = b - a
    ap = flat[:, None, :] - a[None]
    s = np.clip((ap * ab).sum(-1) / np.maximum((ab * ab).sum(-1), 1e-12), 0.0, 1.0)
    dist = np.linalg.norm(ap - s[..., None] * ab, axis=-1).min(axis=1)
    x, y = flat[:, 0:1], flat[:, 1:2]
    crosses = ((a[:, 1] > y) != (b[:, 1] > y)) & (
        x < (b[:, 0] - a[:, 0]) * (y - a[:, 1]) / np.where(ab[:, 1] == 0, 1e-12, ab[:, 1]) + a[:, 0]
    )
    inside = crosses.sum(axis=1) % 2 == 1
    return np.where(inside, -dist, dist).reshape(xy.shape[:-1])


@dataclass
class Constraints:
    """Hard constraints of the safety verifier; None means "not checked"."""

    min_separation_m: float | None = None
    max_speed_mps: float | None = None
    max_vertical_speed_mps: float | None = None
    geofence: Geofence | None = None
    stale_timeout_s: float | None = None
    max_attitude_error_deg: float | None = None
    attitude_error_hold_s: float = 0.5

    @property
    def checked(self) -> list[str]:
        """The contract names (core.records.CONSTRAINT_NAMES order) of the constraints that are set."""
        limits = (self.min_separation_m, self.max_speed_mps, self.max_vertical_speed_mps, self.geofence,
                  self.stale_timeout_s, self.max_attitude_error_deg)
        return [name for name, v in zip(CONSTRAINT_NAMES, limits, strict=True) if v is not None]


#: Acceleration (m/s^2) a vehicle of the class can really reach, with margin: a position jump that needs more is an
#: artefact (motion-capture swap, estimator reset), not motion. `multirotor` (the default) is the most permissive.
VEHICLE_CLASSES = {"indoor_micro": 30.0, "outdoor_multirotor": 20.0, "multirotor": 30.0, "fixed_wing": 40.0,
                   "vtol": 40.0, "rover": 20.0, "underwater": 10.0}


@dataclass
class FrameOrigin:
    """Where a vehicle's local frame sits in the shared world frame (mission `frames:`)."""

    origin: tuple[float, float, float] = (0.0, 0.0, 0.0)
    yaw_deg: float = 0.0


@dataclass
class Thresholds:
    """Soft thresholds for events and warnings (the project's own keys under ``thresholds:``)."""

    proximity_warning_m: float | None = None  # default: 2 x min_separation_m, else 1.0 m
    sharp_turn_deg: float = 30.0
    altitude_rate_mps: float = 3.0
    prediction_horizon_s: float = 2.0
    veto_hold_s: float = 1.0
    borderline_fraction: float = 0.10
    max_accel_mps2: float | None = None  # default: the vehicle class's (VEHICLE_CLASSES)

    def accel_bound(self, vehicle_class: str) -> float:
        """The plausibility bound on acceleration: a position that needs more is a recording artefact."""
        return self.max_accel_mps2 if self.max_accel_mps2 is not None else VEHICLE_CLASSES[vehicle_class]

    def proximity(self, constraints: Constraints) -> float:
        if self.proximity_warning_m is not None:
            return self.proximity_warning_m
        return 2.0 * constraints.min_separation_m if constraints.min_separation_m else 1.0


@dataclass
class RouteSoFar:
    """A live segment's view of its flight (a window of a flight still going on): how close each vehicle came to
    each of its waypoints before the window, how many of them its route has reached or passed in order, and
    whether the flight ends with the window. A waypoint is judged only once it is due: reached or passed in
    order (a later one reached after the ones before it), or the flight is over."""

    closest: dict[str, list[float]] = field(default_factory=dict)
    passed: dict[str, int] = field(default_factory=dict)
    final: bool = False


@dataclass
class Mission:
    name: str = "unnamed"
    type: str = "unspecified"
    description: str = ""
    constraints: Constraints = field(default_factory=Constraints)
    thresholds: Thresholds = field(default_factory=Thresholds)
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    uavs: list[str] = field(default_factory=list)
    formation_offsets: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    formation_tolerance_m: float = 0.5
    waypoints: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)
    waypoint_tolerance_m: float = 0.5
    #: which pose sources are vehicles (ids or glob patterns against the id, topic or frame); empty: every source
    vehicles: list[str] = field(default_factory=list)
    vehicle_class: str = "multirotor"
    #: `frames: shared` asserts one frame (True); per-vehicle origins place local frames; None: not said
    frames_shared: bool | None = None
    frame_origins: dict[str, FrameOrigin] = field(default_factory=dict)
    #: mission rules in STL (CONTRACT.md §2a), checked offline and live
    rules: list[Rule] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source: str = ""
    #: per constraint name: where its limit came from when not from a mission file (the vehicle's parameters)
    limit_sources: dict[str, str] = field(default_factory=dict)
    #: set by `live` on a segment's mission (None: the trajectory is the whole flight, every waypoint is due)
    route_so_far: RouteSoFar | None = None
