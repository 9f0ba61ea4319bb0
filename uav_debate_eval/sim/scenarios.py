"""Built-in scenarios and `simulate()`: seeded flights with injected faults and their ground truth.

Clean scenarios are safe with margin against their own mission: controllers are limited to 80 % of
the mission's speed limits, spacing is at least 3x the minimum separation (above the 2x proximity
warning) and the geofence leaves a wide margin, so no quantity comes within 10 % of a limit.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Constraints, Geofence, Mission
from uav_debate_eval.core.mission_file import mission_to_yaml
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.sim.dynamics import Limits, Reference, integrate
from uav_debate_eval.sim.faults import (
    FaultSpec,
    Injection,
    PlanInfo,
    Recorded,
    inject,
    measure,
    parse_fault,
    ready,
    span,
)
from uav_debate_eval.sim.paths import Route, TimedWaypoints
from uav_debate_eval.sim.playback import Tick
from uav_debate_eval.sim.truth import TruthFault, truth_to_json
from uav_debate_eval.stl.spec import make_rule

DEFAULT_RATE_HZ = 20.0
START_HOVER_S = 2.0
END_HOVER_S = 3.0
FENCE_MARGIN_M = 12.0  # horizontal; leaves room for fault manoeuvres and > 10 % of the box
CEILING_MARGIN_M = 4.0
SHARP_TURN_DEG = 30.0
MAX_SAMPLES = 30_000_000  # about 2 GB of working arrays


@dataclass
class Plan:
    """A scenario's nominal flight: who flies, the reference they track, and the mission they fly under."""

    uavs: list[str]
    base: Reference
    mission: Mission
    spacing: float
    z_min: float
    corners: list[tuple[float, float, float]] = field(default_factory=list)  # (t_in, t_out, heading change deg)

    @property
    def limits(self) -> Limits:
        speed, vz = self._constraints()[2:4]
        return Limits(0.8 * speed, 0.8 * vz, 2.5)

    def info(self) -> PlanInfo:
        return PlanInfo(self.uavs, self.base, self.spacing, self.z_min, *self._constraints(), self.limits)

    def _constraints(self) -> tuple[float, float, float, float, float]:
        """Ceiling, separation, speed, vertical speed, stale timeout: `_mission` sets all five."""
        c = self.mission.constraints
        assert c.geofence is not None and c.min_separation_m is not None and c.max_speed_mps is not None
        assert c.max_vertical_speed_mps is not None and c.stale_timeout_s is not None
        return (c.geofence.max[2], c.min_separation_m, c.max_speed_mps, c.max_vertical_speed_mps,
                c.stale_timeout_s)


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    description: str
    default_uavs: int
    min_uavs: int
    max_uavs: int
    default_duration_s: float
    constraints: dict
    build: Callable[[int, float, np.random.Generator, dict], Plan]


def _names(n: int) -> list[str]:
    return [f"uav{i + 1}" for i in range(n)]


def _cruise_length(speed: float, duration: float, accel: float = 0.5) -> float:
    """Route length flown in the time between the start and end hovers."""
    return max(speed * (duration - START_HOVER_S - END_HOVER_S - 1.0 - speed / accel), 4.0 * speed)


#: Mission rules (CONTRACT.md §2a) a real mission of each kind states beyond the fixed constraints.
SCENARIO_RULES: dict[str, list[tuple[str, str, str, str]]] = {
    # an outdoor formation keeps a safe height above obstacles and does not climb or sink hard next to a neighbour
    "formation": [("min_altitude", "soft", "each_vehicle", "always (z >= 5.0)"),
                  ("calm_when_close", "soft", "each_pair",
                   "always ((separation < 3.0) -> (abs(a.vz) <= 1.0 and abs(b.vz) <= 1.0))")],
    # a survey holds its altitude band while it sweeps (the sensor's footprint depends on it)
    "surveillance": [("survey_altitude", "soft", "each_vehicle", "always[5, 50] (abs(z - 20.0) <= 1.0)")],
    # crossing through the centre is deconflicted by altitude layers: close vehicles must be a layer apart
    "swap": [("layered_crossing", "hard", "each_pair", "always ((separation < 2.0) -> (abs(a.z - b.z) >= 1.0))")],
    # a large grid starts spread out: every pair at least 2.5 m apart within 10 s of the start
    "grid": [("spread_at_start", "soft", "swarm", "eventually[0, 10] (min_separation >= 2.5)")],
}


def _mission(kind: str, description: str, uavs: list[str], c: dict, lo: np.ndarray, hi: np.ndarray) -> Mission:
    fence = Geofence((float(lo[0] - FENCE_MARGIN_M), float(lo[1] - FENCE_MARGIN_M), 0.0),
                     (float(hi[0] + FENCE_MARGIN_M), float(hi[1] + FENCE_MARGIN_M), float(hi[2] + CEILING_MARGIN_M)))
    constraints = Constraints(c["min_separation_m"], c["max_speed_mps"], c["max_vertical_speed_mps"], fence,
                              c["stale_timeout_s"])
    rules = [make_rule(*r) for r in SCENARIO_RULES.get(kind, [])]
    return Mission(name=kind, type=kind, description=description, constraints=constraints, uavs=list(uavs),
                   waypoint_tolerance_m=1.0, formation_tolerance_m=1.0, rules=rules)


def _route_plan(kind: str, description: str, route: Route, offsets: np.ndarray, c: dict, spacing: float,
                formation: bool) -> Plan:
    """Every vehicle flies the same route shifted by a fixed world-frame offset."""
    uavs = _names(len(offsets))
    pts = route.waypoints
    dense = np.array([route.at(t)[0] for t in np.linspace(route.t_start, route.t_end, 400)])
    lo = np.minimum(dense.min(axis=0), pts.min(axis=0)) + offsets.min(axis=0)
    hi = np.maximum(dense.max(axis=0), pts.max(axis=0)) + offsets.max(axis=0)
    mission = _mission(kind, description, uavs, c, lo, hi)
    mission.waypoints = {u: [_xyz(p + off) for p in pts] for u, off in zip(uavs, offsets, strict=True)}
    if formation:
        mission.formation_offsets = {u: _xyz(off) for u, off in zip(uavs, offsets, strict=True)}

    def base(t: float) -> tuple[np.ndarray, np.ndarray]:
        p, v = route.at(t)
        return p + offsets, np.broadcast_to(v, offsets.shape).copy()

    corners = [(k.t_in, k.t_out, k.angle_deg) for k in route.corners]
    return Plan(uavs, base, mission, spacing, float(dense[:, 2].min() + offsets[:, 2].min()), corners)


def _xyz(p: np.ndarray) -> tuple[float, float, float]:
    return float(p[0]), float(p[1]), float(p[2])


def _min_spacing(offsets: np.ndarray) -> float:
    if len(offsets) < 2:
        return math.inf
    d = np.linalg.norm(offsets[:, None] - offsets[None], axis=-1)
    return float(d[~np.eye(len(offsets), dtype=bool)].min())


def _formation(n: int, duration: float, rng: np.random.Generator, c: dict) -> Plan:
    """V formation (leader ahead, 2 m steps back and sideways) flying a rectangular loop with 90 deg corners."""
    rows = [(0.0, 0.0, 0.0)]
    for k in range(1, n):
        rank, side = (k + 1) // 2, 1.0 if k % 2 else -1.0
        rows.append((-2.0 * rank, side * 2.0 * rank, 0.0))
    offsets = np.array(rows)
    length = _cruise_length(1.2, duration)
    a, b, z = length / 3.0, length / 6.0, 10.0
    wp = np.array([(0, 0, z), (a, 0, z), (a, b, z + 1), (0, b, z + 1), (0, 0, z)], dtype=float)
    route = Route(wp, 1.2, 1.5, START_HOVER_S)
    return _route_plan("formation", f"{n} vehicles in a V formation fly a rectangular loop", route, offsets, c,
                       _min_spacing(offsets), formation=True)


def _surveillance(n: int, duration: float, rng: np.random.Generator, c: dict) -> Plan:
    """Lawnmower coverage: each vehicle sweeps its own strip of lanes 6 m apart, in step with the others."""
    length = _cruise_length(2.0, duration)
    lanes = max(2, round(length / 40.0))
    lane_len = max(6.0, (length - (lanes - 1) * 6.0) / lanes)
    wp = []
    for k in range(lanes):
        y0, y1 = (0.0, lane_len) if k % 2 == 0 else (lane_len, 0.0)
        wp += [(6.0 * k, y0, 20.0), (6.0 * k, y1, 20.0)]
    route = Route(np.array(wp), 2.0, 2.0, START_HOVER_S)
    strip = 6.0 * lanes
    offsets = np.array([(strip * i, 0.0, 0.0) for i in range(n)])
    return _route_plan("surveillance", f"{n} vehicle(s) cover adjacent strips with a lawnmower pattern", route,
                       offsets, c, _min_spacing(offsets), formation=False)


def _tracking(n: int, duration: float, rng: np.random.Generator, c: dict) -> Plan:
    """One vehicle follows a seeded random path of 14-22 m legs with 50-100 deg corners and gentle climbs."""
    length = _cruise_length(2.0, duration)
    wp = [np.array([0.0, 0.0, 12.0])]
    heading, total = 0.0, 0.0
    while total < length:
        leg = min(rng.uniform(14.0, 22.0), max(length - total, 3.0))
        z = float(np.clip(wp[-1][2] + rng.uniform(-0.08, 0.08) * leg, 10.0, 14.0))
        wp.append(wp[-1] + np.array([leg * math.cos(heading), leg * math.sin(heading), z - wp[-1][2]]))
        total += leg
        heading += math.radians(rng.uniform(50.0, 100.0)) * rng.choice([-1.0, 1.0])
    route = Route(np.array(wp), 2.0, 2.0, START_HOVER_S)
    return _route_plan("tracking", "one vehicle follows a path with sharp corners", route, np.zeros((1, 3)), c,
                       math.inf, formation=False)


def _grid(n: int, duration: float, rng: np.random.Generator, c: dict) -> Plan:
    """N vehicles on a square grid 3 m apart translate together along a route with one 45 deg corner."""
    cols = math.ceil(math.sqrt(n))
    k = np.arange(n)
    offsets = np.column_stack([(k % cols) * 3.0, (k // cols) * 3.0, np.zeros(n)])
    offsets[:, :2] -= offsets[:, :2].mean(axis=0)
    length = _cruise_length(1.0, duration)
    half = length / 2.0
    wp = np.array([(0, 0, 15), (half, 0, 15), (half + half * math.sqrt(0.5), half * math.sqrt(0.5), 16)])
    route = Route(wp, 1.0, 3.0, START_HOVER_S)
    return _route_plan("grid", f"{n} vehicles in a {cols}-column grid translate together", route, offsets, c,
                       3.0 if n > 1 else math.inf, formation=True)


def _swap(n: int, duration: float, rng: np.random.Generator, c: dict) -> Plan:
    """Vehicles on a circle swap to the opposite side through the centre, deconflicted by altitude layers.

    Each climbs or descends to its own layer (1.5 m apart) while still on the circle, crosses straight
    through the centre, returns to the common altitude, pauses, and swaps back while time allows.
    """
    radius = max(6.0, 1.5 / math.sin(math.pi / n))
    ang = 2 * math.pi * np.arange(n) / n
    z0 = 14.0
    home = np.column_stack([radius * np.cos(ang), radius * np.sin(ang), np.full(n, z0)])
    layer = np.column_stack([np.zeros(n), np.zeros(n), (np.arange(n) - (n - 1) / 2.0) * 1.5])
    t_climb = max(3.0, 1.5 * float(np.abs(layer[:, 2]).max()) / (0.5 * c["max_vertical_speed_mps"]))
    t_cross = max(4.0, 1.5 * 2 * radius / (0.5 * c["max_speed_mps"]))
    cycle = 2 * t_climb + t_cross + 2.0
    times, points = [0.0, START_HOVER_S], [home, home]
    here = home
    while times[-1] + cycle <= duration - END_HOVER_S:
        there = here * np.array([-1.0, -1.0, 1.0])
        for dt, p in ((t_climb, here + layer), (t_cross, there + layer), (t_climb, there), (2.0, there)):
            times.append(times[-1] + dt)
            points.append(p)
        here = there
    times.append(max(duration, times[-1]) + 1.0)
    points.append(here)
    ref = TimedWaypoints(np.stack(points, axis=1), np.array(times))
    uavs = _names(n)
    lo = np.array([-radius, -radius, z0 + layer[:, 2].min()])
    hi = np.array([radius, radius, z0 + layer[:, 2].max()])
    mission = _mission("swap", f"{n} vehicles swap sides through the centre on separate altitude layers",
                       uavs, c, lo, hi)
    mission.waypoints = {u: [_xyz(home[i]), _xyz(home[i] * [-1, -1, 1])] for i, u in enumerate(uavs)}
    return Plan(uavs, ref.at, mission, min(1.5, 2 * radius * math.sin(math.pi / n)), float(lo[2]))


def _limits(min_sep: float, speed: float, vz: float, stale: float = 0.5) -> dict:
    return {"min_separation_m": min_sep, "max_speed_mps": speed, "max_vertical_speed_mps": vz,
            "stale_timeout_s": stale}


SCENARIOS: dict[str, ScenarioSpec] = {s.name: s for s in (
    ScenarioSpec("formation", "V formation (3-5 vehicles) flying a rectangular loop with 90 deg corners",
                 5, 3, 5, 60.0, _limits(0.5, 3.0, 2.0), _formation),
    ScenarioSpec("surveillance", "lawnmower coverage of adjacent strips (1-3 vehicles)",
                 2, 1, 3, 60.0, _limits(1.0, 4.0, 2.0), _surveillance),
    ScenarioSpec("tracking", "one vehicle following a path with sharp corners",
                 1, 1, 1, 60.0, _limits(0.5, 4.0, 2.0), _tracking),
    ScenarioSpec("grid", "N vehicles on a 3 m grid translating together (N up to thousands)",
                 16, 1, 10000, 60.0, _limits(0.8, 3.0, 2.0), _grid),
    ScenarioSpec("swap", "vehicles on a circle swapping sides through the centre on separate layers",
                 6, 2, 12, 60.0, _limits(0.5, 3.0, 2.0), _swap),
)}

FORMATS = {"csv": "csv", "mcap": "mcap", "db3": "sqlite3", "sqlite3": "sqlite3", "bag": "ros1", "ros1": "ros1",
           "bin": "dataflash"}
_SUFFIX = {"mcap": ".mcap", "sqlite3": ".db3", "ros1": ".bag"}


@dataclass
class SimResult:
    """A simulated flight: trajectory, the mission it was flown under, and the ground truth of its faults."""

    name: str
    traj: SwarmTrajectory
    mission: Mission
    truth: list[TruthFault]
    seed: int = 0
    rate_hz: float = DEFAULT_RATE_HZ
    duration_s: float = 0.0
    faults: list[str] = field(default_factory=list)

    def meta(self) -> dict:
        return {"scenario": self.name, "seed": self.seed, "uavs": len(self.traj.uav_ids),
                "duration_s": self.duration_s, "rate_hz": self.rate_hz, "faults": list(self.faults)}

    def write(self, out_dir: str | Path, formats: tuple[str, ...] | list[str] = ("csv", "mcap")) -> list[Path]:
        """Write trajectory.{csv,mcap,db3,bag} and ardupilot/<uav>.bin (as asked), mission.yaml and truth.json;
        returns the paths."""
        from uav_debate_eval.io.csv_io import write_csv
        from uav_debate_eval.io.rosbag_write import write_bag

        kinds = []
        for f in formats:
            if f not in FORMATS:
                raise InputError(f"unknown output format '{f}' (known: csv, mcap, db3, bag, bin)")
            kinds.append(FORMATS[f])
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for kind in dict.fromkeys(kinds):
            if kind == "csv":
                written.append(write_csv(self.traj, out / "trajectory.csv"))
                continue
            if kind == "dataflash":
                from uav_debate_eval.sim.dataflash import SIM_EPOCH_UTC, write_dataflash_logs

                written += write_dataflash_logs(self.traj, out / "ardupilot", SIM_EPOCH_UTC)
                continue
            path = out / f"trajectory{_SUFFIX[kind]}"
            if path.is_dir():
                shutil.rmtree(path)
            path.unlink(missing_ok=True)
            written.append(write_bag(self.traj, path, fmt=kind))
        (out / "mission.yaml").write_text(mission_to_yaml(self.mission), encoding="utf-8")
        (out / "truth.json").write_text(truth_to_json(self.truth, self.meta()) + "\n", encoding="utf-8")
        return written + [out / "mission.yaml", out / "truth.json"]

    def ticks(self) -> Iterator[Tick]:
        """Samples grouped by time, in time order, for real-time replay; a silent vehicle is simply absent."""
        tracks = self.traj.tracks
        stamps = np.unique(np.concatenate([tr.t for tr in tracks.values()]))
        cursor = dict.fromkeys(tracks, 0)
        for t in stamps:
            batch = []
            for u, tr in tracks.items():
                k = cursor[u]
                if k < len(tr) and tr.t[k] == t:
                    link = True if tr.link_ok is None else bool(tr.link_ok[k] > 0.5)
                    batch.append((u, tr.pos[k], tr.vel[k], link))
                    cursor[u] = k + 1
            yield float(t), batch


def simulate(name: str, seed: int = 0, n_uavs: int | None = None, duration_s: float | None = None,
             rate_hz: float | None = None, faults: Sequence[str | FaultSpec] | None = None) -> SimResult:
    """Fly scenario `name` with the given faults ("kind" or "kind@t") and return data, mission and truth."""
    spec = SCENARIOS.get(name)
    if spec is None:
        raise InputError(f"unknown scenario '{name}' (known: {', '.join(SCENARIOS)})")
    n = spec.default_uavs if n_uavs is None else int(n_uavs)
    if not spec.min_uavs <= n <= spec.max_uavs:
        allowed = f"exactly {spec.min_uavs}" if spec.min_uavs == spec.max_uavs else f"{spec.min_uavs}-{spec.max_uavs}"
        raise InputError(f"scenario {name} takes {allowed} vehicle(s), got {n}")
    rate = DEFAULT_RATE_HZ if rate_hz is None else float(rate_hz)
    if not 1.0 <= rate <= 200.0:
        raise InputError(f"rate must be 1-200 Hz, got {rate:g}")
    duration = spec.default_duration_s if duration_s is None else float(duration_s)
    if not 10.0 <= duration <= 7200.0:
        raise InputError(f"duration must be 10-7200 s, got {duration:g}")
    specs = [f if isinstance(f, FaultSpec) else parse_fault(f) for f in faults or []]

    def build(length_s: float) -> Plan:
        return spec.build(n, length_s, np.random.default_rng([seed, 1]), spec.constraints)

    plan = build(duration)
    first = math.ceil(2.0 * max(6.0, 0.12 * duration)) / 2.0
    starts, end = _schedule(specs, plan.info(), duration, first)
    while end > duration:  # a longer flight reshapes the route, so schedule again until the faults fit
        if duration_s is not None or end > 7200.0:
            raise InputError(f"the faults need {math.ceil(end)} s but the flight lasts {duration:g} s "
                             "(raise --duration or move the faults)")
        duration = float(math.ceil(end))
        plan = build(duration)
        starts, end = _schedule(specs, plan.info(), duration, first)
    info = plan.info()
    used: set[int] = set()
    injections: list[Injection] = []
    for f, t0 in zip(specs, starts, strict=True):
        inj = inject(f, t0, info, used)
        used.update(inj.uavs)
        injections.append(inj)

    def reference(t: float) -> tuple[np.ndarray, np.ndarray]:
        bp, bv = plan.base(t)
        pos, vel = bp.copy(), bv.copy()
        for inj in injections:
            if inj.modify is not None and inj.t0 <= t <= inj.t1:
                inj.modify(t, bp, bv, pos, vel)
        return pos, vel

    t = np.arange(int(round(duration * rate)) + 1) / rate
    if n * len(t) > MAX_SAMPLES:
        raise InputError(f"{n} vehicles x {len(t)} samples is more than one run holds ({MAX_SAMPLES:,}); "
                         "lower --rate, --duration or --uavs")
    overrides = [o for inj in injections for o in inj.overrides]
    pos, vel = integrate(reference, n, t, plan.limits, overrides, np.random.default_rng([seed, 2]))
    keep = np.ones((len(t), n), dtype=bool)
    link = np.ones((len(t), n))
    for inj in injections:
        if inj.drop:
            i, t0, t1 = inj.drop
            keep[(t > t0) & (t < t1), i] = False
        if inj.link_down:
            i, t0, t1 = inj.link_down
            link[(t >= t0) & (t < t1), i] = 0.0
    battery = _battery(t, pos, np.random.default_rng([seed, 3]))

    rec = Recorded(t, pos, vel, keep, link, lambda times: np.stack([plan.base(float(x))[1] for x in times]))
    fence = plan.mission.constraints.geofence
    truth = [measure(inj, rec, info, fence) for inj in injections]
    truth += [TruthFault("route_turn", list(plan.uavs), round(t_in - 0.5, 6), round(t_out + 0.5, 6), None,
                         "sharp_turn", {"heading_change_deg": round(angle, 1)})
              for t_in, t_out, angle in plan.corners if angle > SHARP_TURN_DEG and t_out < duration]
    truth.sort(key=lambda f: (f.t_start, f.kind))

    mask = keep.ravel()
    ids = np.tile(np.asarray(plan.uavs), len(t))[mask]
    traj = SwarmTrajectory.from_columns(
        np.repeat(t, n)[mask], ids, pos.reshape(-1, 3)[mask], vel=vel.reshape(-1, 3)[mask],
        link_ok=link.ravel()[mask], gps_ok=np.ones(int(mask.sum())), battery_pct=battery.ravel()[mask],
        name=f"{name}-seed{seed}")
    labels = [f"{f.kind}@{s:g}" for f, s in zip(specs, starts, strict=True)]
    mission = plan.mission
    mission.name = f"{name}-seed{seed}" + (f" ({', '.join(labels)})" if labels else "")
    return SimResult(name, traj, mission, truth, seed, rate, duration, labels)


def _schedule(specs: list[FaultSpec], info: PlanInfo, duration: float, first: float) -> tuple[list[float], float]:
    """Start times: explicit ones as given, the rest one after another from `first`, each once it can start."""
    cursor = first
    starts, end = [], 0.0
    for f in specs:
        length = span(f.kind, info)
        if f.t is None:
            while not ready(f.kind, cursor, info) and cursor < duration:
                cursor += 0.5
            start, cursor = cursor, math.ceil(2.0 * (cursor + length + 2.0)) / 2.0
        else:
            start = f.t
        starts.append(round(start, 3))
        end = max(end, start + length + END_HOVER_S)
    return starts, end


def _battery(t: np.ndarray, pos: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """State of charge: a seeded start level minus hover drain and a share per metre flown."""
    start = rng.uniform(96.0, 100.0, pos.shape[1])
    steps = np.linalg.norm(np.diff(pos, axis=0), axis=2)
    flown = np.vstack([np.zeros((1, pos.shape[1])), np.cumsum(steps, axis=0)])
    return np.clip(start - 0.035 * t[:, None] - 0.015 * flown, 0.0, 100.0)
