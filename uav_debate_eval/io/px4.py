"""PX4 over ROS 2 (uXRCE-DDS, px4_msgs): one world frame and one clock for every instance, live and recorded.

The bag reader (io/rosbag/px4.py) and the live pose input (nodes/pose_input.py) both call this module, so a flight
evaluated from its bag and the same flight monitored live place and clock the vehicles the same way:
- Topics: instance 0 publishes `/fmu/out/<topic>`, instance N `/px4_N/fmu/out/<topic>` (PX4 main adds a `_vK`
  suffix to versioned messages). The vehicle is `px4_N` (`px4_0` for the bare namespace).
- Frame: positions are NED metres from each instance's own EKF origin. With a global reference (`xy_global`:
  `ref_lat`/`ref_lon`/`ref_alt`) every origin is placed in the tangent plane at the first referenced vehicle's
  origin (io.ulog.geodetic_to_enu), then NED -> ENU. Without one, the mission's `frames:` origins (the spawn
  offsets) place them; a vehicle with neither stays in its own local frame (offline: frames_misaligned; live: its
  poses are held, said once).
- Clock: `timestamp`/`timestamp_sample` count microseconds since each instance booted. t = timestamp_sample + a
  per-instance offset to the receiving clock (live the node's clock, recorded the bag's receive time): the
  smallest receive - sample difference seen so far, afresh after a reboot; a vehicle's first second of messages
  only sets it (BootClock). One rule, causal, for both
  paths: a bag the live session recorded (io.rosbag_record: the node's receive times) puts every sample at the
  very time the live monitor gave it. The samples keep PX4's own spacing.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from uav_debate_eval.core.arming import LANDING_WORDS, first_and_changes, state_events
from uav_debate_eval.core.frames import yaw_matrix
from uav_debate_eval.core.records import Event
from uav_debate_eval.io.px4_attitude import mode_event
from uav_debate_eval.io.ulog import geodetic_to_enu, ned_to_enu

if TYPE_CHECKING:
    from uav_debate_eval.core.trajectory import SwarmTrajectory

LOCAL_POSITION = "px4_msgs/msg/VehicleLocalPosition"
ODOMETRY = "px4_msgs/msg/VehicleOdometry"
STATUS = "px4_msgs/msg/VehicleStatus"
GLOBAL_POSITION = "px4_msgs/msg/VehicleGlobalPosition"
LAND_DETECTED = "px4_msgs/msg/VehicleLandDetected"
#: Pose message types in the order preferred for one vehicle.
POSE_TYPES = (LOCAL_POSITION, ODOMETRY)
_TOPIC = re.compile(r"^(?:/(?P<ns>[^/]+))?/fmu/out/(?P<name>[a-z_]+?)(?:_v\d+)?$")
#: VehicleOdometry frames (POSE_FRAME_* / VELOCITY_FRAME_*)
FRAME_NED, FRAME_FRD, FRAME_BODY_FRD = 1, 2, 3
VEHICLE_TYPES = {0: "unknown", 1: "rotary wing", 2: "fixed wing", 3: "rover", 4: "airship"}
ARMED = 2
#: vehicle_status.vehicle_type -> the mission's vehicle classes (core.mission.VEHICLE_CLASSES)
_CLASSES = {1: "multirotor", 2: "fixed_wing", 3: "rover"}


def vehicle_class(vehicle_type: int, is_vtol: bool) -> str | None:
    """The vehicle class a vehicle_status names (a VTOL is one in either shape); None when it names none."""
    return "vtol" if is_vtol else _CLASSES.get(vehicle_type)


def px4_topic(topic: str) -> tuple[str, str] | None:
    """`/px4_1/fmu/out/vehicle_local_position` -> (`px4_1`, `vehicle_local_position`); `/fmu/out/x` -> (`px4_0`, `x`);
    None for a topic that is not a PX4 output."""
    m = _TOPIC.match(topic)
    if m is None:
        return None
    return m.group("ns") or "px4_0", m.group("name")


def natural_key(name: str) -> tuple:
    """px4_2 before px4_10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def rotate_frd(q_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Body FRD vectors into the reference frame by PX4's q (w, x, y, z), row by row."""
    q = np.asarray(q_wxyz, dtype=float).reshape(-1, 4)
    w, x, y, z = q[:, 0:1], q[:, 1:2], q[:, 2:3], q[:, 3:4]
    u = np.concatenate([x, y, z], axis=1)
    t = 2.0 * np.cross(u, v)
    return np.asarray(v + w * t + np.cross(u, t))


def odometry_velocity_ned(velocity_frame: np.ndarray, q_wxyz: np.ndarray, vel: np.ndarray) -> np.ndarray:
    """VehicleOdometry velocity in the pose frame: body FRD ones rotated by q; unknown frames NaN."""
    vel = np.asarray(vel, dtype=float).reshape(-1, 3).copy()
    frame = np.asarray(velocity_frame).reshape(-1)
    body = frame == FRAME_BODY_FRD
    if body.any():
        vel[body] = rotate_frd(np.asarray(q_wxyz, dtype=float).reshape(-1, 4)[body], vel[body])
    vel[(frame != FRAME_NED) & (frame != FRAME_FRD) & ~body] = np.nan
    return vel


@dataclass
class Reference:
    """A vehicle's EKF origin (lat deg, lon deg, alt m AMSL), valid when the estimator says so."""

    lat: float
    lon: float
    alt: float


def reference_of(xy_global: bool, z_global: bool, ref_lat: float, ref_lon: float, ref_alt: float
                 ) -> Reference | None:
    """The origin VehicleLocalPosition carries, or None when it has no global reference (yet)."""
    if not xy_global or not (math.isfinite(ref_lat) and math.isfinite(ref_lon)):
        return None
    if abs(ref_lat) < 1e-9 and abs(ref_lon) < 1e-9:
        return None
    return Reference(float(ref_lat), float(ref_lon), float(ref_alt) if z_global and math.isfinite(ref_alt) else 0.0)


@dataclass
class Placement:
    """Where each vehicle's local origin sits in the world frame (ENU metres) and how that was found."""

    anchor: Reference | None = None
    origins: dict[str, np.ndarray] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)
    #: the vehicles placed at the mission's spawn offset (the flight report must not place them again)
    spawned: set[str] = field(default_factory=set)

    def place(self, uav: str, ref: Reference | None, spawn: tuple[float, ...] | None) -> np.ndarray | None:
        """The vehicle's origin (kept once found), from its reference or the mission's spawn offset (x, y, z[, yaw
        deg]: LiveFrames turns the local frame by the yaw); else None."""
        if uav in self.origins:
            return self.origins[uav]
        if ref is not None:
            if self.anchor is None:
                self.anchor = ref
            a = self.anchor
            origin = np.asarray(geodetic_to_enu(ref.lat, ref.lon, ref.alt, a.lat, a.lon, a.alt), dtype=float)
            self.how[uav] = (f"origin at E{origin[0]:+.2f} N{origin[1]:+.2f} U{origin[2]:+.2f} m from its "
                             "ref_lat/ref_lon/ref_alt")
        elif spawn is not None:
            origin = np.asarray(spawn[:3], dtype=float)
            self.how[uav] = f"no global reference; origin at the mission's spawn offset {list(spawn)}"
            self.spawned.add(uav)
        else:
            return None
        self.origins[uav] = origin
        return origin


@dataclass
class BootClock:
    """One instance's boot clock moved onto the receiving clock, message by message in receive order: the offset is
    the smallest receive - sample difference seen so far (the least-delayed message), set afresh when the
    instance's own clock goes back by more than `jump_s` (a reboot). Its first `warmup_s` of receive time only set
    the offset (no sample out): a first message that came late in a burst (a busy executor at start) would
    otherwise stamp the vehicle seconds late. After that a sample is dropped (None) when the falling offset stamps
    it at or before the vehicle's previous one, or squeezes it to less than half its spacing from the message
    before, so every vehicle's stamps keep PX4's pace. The recorded path (receive_stamps) runs this very code on
    the bag's receive times."""

    jump_s: float = 1.0
    warmup_s: float = 1.0
    offsets: dict[str, float] = field(default_factory=dict)
    previous: dict[str, tuple[float, float]] = field(default_factory=dict)  # (sample s, stamp) of the last message
    last_t: dict[str, float] = field(default_factory=dict)
    warm_from: dict[str, float] = field(default_factory=dict)

    def to_receive(self, uav: str, sample_us: float, received_s: float) -> float | None:
        sample_s = sample_us * 1e-6
        diff = received_s - sample_s
        off = self.offsets.get(uav)
        before = self.previous.get(uav)
        if off is None or before is None or sample_s < before[0] - self.jump_s:
            self.offsets[uav] = off = diff
            self.last_t.pop(uav, None)
            self.warm_from[uav] = received_s + self.warmup_s
            before = None
        elif diff < off:
            self.offsets[uav] = off = diff
        t = sample_s + off
        self.previous[uav] = (sample_s, t)
        squeezed = before is not None and t - before[1] < 0.5 * (sample_s - before[0])
        if received_s < self.warm_from[uav] or squeezed or t <= self.last_t.get(uav, -math.inf):
            return None
        self.last_t[uav] = t
        return t


def receive_stamps(sample_us: np.ndarray, received_ns: np.ndarray, jump_s: float = 1.0
                   ) -> tuple[np.ndarray, np.ndarray, float]:
    """BootClock over one instance's messages in receive order: each sample's stamp on the receiving clock, which
    samples it keeps and its final offset (a recorded flight clocked exactly as the live monitor clocked it)."""
    clock = BootClock(jump_s)
    stamps = [clock.to_receive("", s, r * 1e-9) for s, r in zip(np.asarray(sample_us, dtype=np.float64).tolist(),
                                                               np.asarray(received_ns, dtype=np.int64).tolist(),
                                                               strict=True)]
    keep = np.array([t is not None for t in stamps], dtype=bool)
    return np.array([np.nan if t is None else t for t in stamps], dtype=np.float64), keep, clock.offsets.get("", 0.0)


CLOCK_NOTE = ("clocks: each PX4 instance's timestamp_sample (boot clock, us) moved onto the receive clock by the "
              "smallest receive - sample difference seen so far; its first second of messages only sets that (as "
              "live)")


Sample = tuple[float, tuple[float, float, float], tuple[float, float, float] | None]
#: Invalid samples held per vehicle until it can be placed (LiveFrames.held_invalid): ten minutes of PX4's
#: vehicle_local_position at 100 Hz; a vehicle never placed is never in the flight report.
MAX_HELD = 60_000


@dataclass
class LiveFrames:
    """Live PX4 messages (duck-typed: rclpy's or rosbags' objects) -> (t, ENU position, ENU velocity) in the world
    frame, or None while the vehicle cannot be placed (no global reference yet and no spawn offset; said once by
    the caller through `unplaced`). `spawn`: the mission's `frames:` origins (x, y, z[, yaw deg]) by vehicle name;
    `shared`: the mission says every local frame is the world frame (`frames: shared`, e.g. one vehicle indoors)."""

    spawn: dict[str, tuple[float, ...]] = field(default_factory=dict)
    shared: bool = False
    placement: Placement = field(default_factory=Placement)
    clock: BootClock = field(default_factory=BootClock)
    unplaced: set[str] = field(default_factory=set)
    #: vehicles whose last pose its estimator flagged invalid (xy_valid or z_valid false; odometry: NaN): not
    #: checked live (the verifier calls them stale after its timeout), an `estimator_invalid` span offline
    invalid: set[str] = field(default_factory=set)
    #: those samples, placed as the valid ones are: (t, x, y, z, vx, vy, vz, altitude valid) rows, flat (8 doubles
    #: each), the flight report holds as the bag reader holds them (Track.est_valid false), so both find the same
    #: estimator_invalid spans; kept only with `keep_invalid` (the panel's input: the verifier checks none of them)
    invalid_rows: dict[str, array] = field(default_factory=dict)
    keep_invalid: bool = True
    #: invalid samples that came before their vehicle could be placed: (t, NED position, NED velocity, altitude
    #: valid), placed with it (an estimator is not valid yet at boot); at most MAX_HELD each
    held_invalid: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    def local_position(self, uav: str, received_s: float, m) -> Sample | None:
        t = self.clock.to_receive(uav, float(m.timestamp_sample or m.timestamp), received_s)  # every message, as
        if t is None:  # the recorded path's receive_stamps
            return None
        if not (m.xy_valid and m.z_valid):
            self.invalid.add(uav)
            altitude_ok = bool(m.z_valid and getattr(m, "v_z_valid", True))  # as the bag reader reads the flags
            self._keep_invalid(uav, (t, (m.x, m.y, m.z), (m.vx, m.vy, m.vz), altitude_ok))
            return None
        self.invalid.discard(uav)
        ref = reference_of(m.xy_global, m.z_global, m.ref_lat, m.ref_lon, m.ref_alt)
        return self._sample(uav, t, ref, (m.x, m.y, m.z), (m.vx, m.vy, m.vz))

    def _keep_invalid(self, uav: str, sample: tuple[Any, ...]) -> None:
        if not self.keep_invalid:
            return
        if uav in self.placement.origins:
            self.invalid_rows.setdefault(uav, array("d")).extend(self._invalid_row(uav, *sample))
        elif len(held := self.held_invalid.setdefault(uav, [])) < MAX_HELD:
            held.append(sample)

    def invalid_arrays(self) -> dict[str, np.ndarray]:
        """`invalid_rows` as (n, 8) arrays (copies), for the flight report."""
        return {u: np.frombuffer(rows[:], dtype=float).reshape(-1, 8) for u, rows in self.invalid_rows.items() if rows}

    def _invalid_row(self, uav: str, t: float, pos_ned, vel_ned, z_ok: bool) -> tuple[float, ...]:
        p, v = self._world(uav, self.placement.origins[uav], pos_ned, vel_ned)
        return (t, *p, *(v if v is not None else (math.nan,) * 3), float(z_ok))

    def odometry(self, uav: str, received_s: float, m) -> Sample | None:
        t = self.clock.to_receive(uav, float(m.timestamp_sample or m.timestamp), received_s)
        if t is None:
            return None
        pos = tuple(float(x) for x in m.position)
        vel = tuple(odometry_velocity_ned(np.array([m.velocity_frame]), np.array([tuple(m.q)], dtype=float),
                                          np.array([tuple(m.velocity)], dtype=float))[0])
        if not all(math.isfinite(x) for x in pos):  # no estimate: the bag reader's invalid sample at 0 (nan_to_num)
            self.invalid.add(uav)
            self._keep_invalid(uav, (t, tuple(x if math.isfinite(x) else 0.0 for x in pos), vel, False))
            return None
        self.invalid.discard(uav)
        return self._sample(uav, t, None, pos, vel)

    def _sample(self, uav: str, t: float, ref: Reference | None, pos_ned, vel_ned) -> Sample | None:
        origin = self.placement.place(uav, ref, self.spawn.get(uav, (0.0, 0.0, 0.0) if self.shared else None))
        if origin is None:
            self.unplaced.add(uav)
            return None
        self.unplaced.discard(uav)
        if held := self.held_invalid.pop(uav, None):  # placed now: so are its invalid samples before
            rows = self.invalid_rows.setdefault(uav, array("d"))
            for sample in held:
                rows.extend(self._invalid_row(uav, *sample))
        return (t, *self._world(uav, origin, pos_ned, vel_ned))

    def _world(self, uav: str, origin: np.ndarray, pos_ned, vel_ned
               ) -> tuple[tuple[float, float, float], tuple[float, float, float] | None]:
        """An instance's NED position and velocity in the world frame (ENU; velocity None when not finite)."""
        p = ned_to_enu(np.asarray(pos_ned, dtype=float).reshape(1, 3))[0]
        v = ned_to_enu(np.asarray(vel_ned, dtype=float).reshape(1, 3))[0]
        if uav in self.placement.spawned and len(spawn := self.spawn.get(uav, ())) == 4:  # the frame's yaw
            rot = yaw_matrix(spawn[3])
            p, v = rot @ p, rot @ v
        p = p + origin
        vel = (float(v[0]), float(v[1]), float(v[2])) if np.isfinite(v).all() else None
        return (float(p[0]), float(p[1]), float(p[2])), vel


class StatusFields(NamedTuple):
    """The vehicle_status fields apply_status reads (what the live PX4 input keeps of each message)."""

    timestamp: int
    arming_state: int
    nav_state: int
    vehicle_type: int
    is_vtol: bool


def keep_status(rows: list[StatusFields], row: StatusFields) -> bool:
    """Append `row` to a vehicle's kept vehicle_status when it says something new (the first, or any field but its
    stamp changed): apply_status reads the same events and class from these as from every message, and a session's
    statuses (2 a second per vehicle) no longer grow with its length. Returns whether the arming state changed."""
    if rows and rows[-1][1:] == row[1:]:
        return False
    rows.append(row)
    return len(rows) == 1 or rows[-2].arming_state != row.arming_state


def apply_status(traj: SwarmTrajectory, uav: str, msgs: list[Any], off_s: float) -> None:
    """vehicle_status messages (rosbags' or rclpy's, in receive order) into the trajectory: arming and navigation-state
    changes as the autopilot's events, the vehicle type as a note and the vehicle class; `off_s`: the instance's
    final BootClock offset (its `timestamp` onto the receive clock). The bag reader and the live flight both call it."""
    if uav not in traj.tracks:
        return
    kinds = {VEHICLE_TYPES.get(int(m.vehicle_type), str(m.vehicle_type)) + (" VTOL" if m.is_vtol else "")
             for m in msgs}
    traj.ingest.notes.append(f"{uav}: vehicle_status vehicle type {', '.join(sorted(kinds))}")
    last = msgs[-1]
    if (cls := vehicle_class(int(last.vehicle_type), bool(last.is_vtol))) is not None:
        traj.ingest.autopilot[uav] = {"vehicle_class": cls, "firmware": "PX4"}
    armed, mode = None, None
    for m in msgs:
        t = max(round(m.timestamp * 1e-6 + off_s - traj.t0, 6), 0.0)
        now_armed = int(m.arming_state) == ARMED
        if now_armed != armed:
            label = "armed" if now_armed else "disarmed"
            traj.ingest.log_events.append(Event("", "autopilot_event", t, [uav], None, None, None,
                                                {"label": label, "source": "vehicle_status",
                                                 **({"initial": True} if armed is None else {})}))
            armed = now_armed
        if int(m.nav_state) != mode:
            traj.ingest.log_events.append(mode_event(uav, t, int(m.nav_state), mode is None))
            mode = int(m.nav_state)


def apply_landing(traj: SwarmTrajectory, uav: str, landed: list[tuple[int, bool]], off_s: float) -> None:
    """vehicle_land_detected ((timestamp µs, landed) of its messages in receive order) as the autopilot's land
    detector events, as the ULog reader gives them (an armed vehicle standing landed is parked: safety.parked);
    `off_s` as for apply_status. The bag reader and the live flight both call it."""
    if uav in traj.tracks and landed:
        at, on = zip(*landed, strict=True)
        state_events(traj.ingest.log_events, uav, first_and_changes([t * 1e-6 + off_s for t in at], on), traj.t0,
                     "vehicle_land_detected", LANDING_WORDS)
