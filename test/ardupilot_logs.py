"""Small ArduPilot logs written by the tests: DataFlash `.bin` (`sim.dataflash.DataFlashWriter`, ArduPilot's own
message formats) and MAVLink `.tlog` (pymavlink's MAVLink classes), for 3 vehicles flown together like a SITL
swarm (--instance N).

The flight (60 s, each vehicle from its own EKF origin 10 m east of the previous one): climb to 10 m, fly north at
3 m/s, hover. sysid1 overspeeds (8 m/s for 5 s with a healthy EKF: a real violation) and has a radio failsafe
at 50-52 s; sysid2's GPS glitches by 25 m for 2 s (the EKF rejects it; ERR GPS 2 then resolved) and its log has a
1.5 s gap; sysid3's EKF fails for 5 s (status flags lose the position, test ratios high, ERR EKFCHECK, LAND for
an EKF failsafe) while its position drifts at 12 m/s, and switches its primary lane from 0 to 1. The .tlog also
carries a pre-arm message (no error) and a companion computer of sysid2 sending a position of its own (not the
vehicle's).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uav_debate_eval.sim.dataflash import (
    GOOD_FLAGS,
    GPS_EPOCH_UTC_S,
    LOST_FLAGS,
    SITL_HOME,
    DataFlashWriter,
    offset_latlon,
)

LAT0, LON0, ALT0 = SITL_HOME
GPS_WEEK, GPS_MS0 = 2400, 200_000_000  # the flight's first sample, GPS week / ms of week
DURATION_S, EKF_HZ, GPS_HZ = 60.0, 10, 5
MISSION_YAML = """\
mission: {name: ardupilot_swarm, type: surveillance}
constraints:
  min_separation_m: 2.0
  max_speed_mps: 5.0
  max_vertical_speed_mps: 3.0
  geofence: {min: [-50.0, -50.0, -5.0], max: [100.0, 200.0, 30.0]}
  stale_timeout_s: 2.0
"""

@dataclass
class Vehicle:
    """One vehicle's flight: EKF truth on the flight clock t (s), faults, and what its autopilot logs."""

    sysid: int
    boot_s: float  # boot time (TimeUS / 1e6) at the flight's first sample
    east0: float  # its EKF origin, metres east of the first one's
    overspeed: bool = False
    glitch: bool = False
    ekf_failure: bool = False
    ekf_lost: tuple[float, float] = (40.0, 45.0)  # when the estimate is lost (flight time)
    gap: bool = False
    week_shift: int = 0  # a later week: a flight on another day
    t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pos: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))  # NED from its origin
    vel: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    def __post_init__(self):
        self.t = np.arange(0.0, DURATION_S, 1.0 / EKF_HZ)
        vn = np.where((self.t >= 10) & (self.t < 40), 3.0, 0.0)
        if self.overspeed:
            vn = np.where((self.t >= 20) & (self.t < 25), 8.0, vn)
        vd = np.where(self.t < 10, -1.0, 0.0)
        if self.ekf_failure:  # the failing estimate runs away north at 12 m/s while its flags say it is lost
            a = self.ekf_lost[0]
            vn = np.where((self.t >= a + 1) & (self.t < a + 3), 12.0, vn)
        self.vel = np.column_stack([vn, np.zeros_like(vn), vd])
        self.pos = np.vstack([np.zeros(3), np.cumsum(self.vel[:-1] / EKF_HZ, axis=0)])
        self.pos[:, 1] += np.sin(self.t / 7.0) * 0.05  # a little noise-free wander: no two samples repeat

    @property
    def origin(self) -> tuple[float, float, float]:
        lat, lon = offset_latlon(LAT0, LON0, 0.0, self.east0)
        return float(lat), float(lon), ALT0

    def ekf_invalid(self, t: float) -> bool:
        return self.ekf_failure and self.ekf_lost[0] <= t < self.ekf_lost[1]

    def lane(self, t: float) -> int:
        return 1 if self.ekf_failure and t >= self.ekf_lost[0] + 2 else 0

    def gps(self) -> tuple[np.ndarray, np.ndarray]:
        """GPS fixes (t, lat/lon/alt): the truth, 25 m east during the glitch."""
        tg = np.arange(0.0, DURATION_S, 1.0 / GPS_HZ)
        p = np.column_stack([np.interp(tg, self.t, self.pos[:, k]) for k in range(3)])
        if self.ekf_failure:  # the GPS tells the truth: no drift
            p[:, 0] = np.interp(tg, self.t, self._truth_north())
        if self.glitch:
            p[(tg >= 30.0) & (tg < 32.0), 1] += 25.0
        lat0, lon0, alt0 = self.origin
        lat, lon = offset_latlon(lat0, lon0, p[:, 0], p[:, 1])
        return tg, np.column_stack([lat, lon, alt0 - p[:, 2]])

    def _truth_north(self) -> np.ndarray:
        vn = np.where((self.t >= 10) & (self.t < 40), 3.0, 0.0)
        return np.concatenate([[0.0], np.cumsum(vn[:-1] / EKF_HZ)])

    def time_us(self, t) -> np.ndarray:
        return np.round((np.asarray(t) + self.boot_s) * 1e6)

    def gps_time(self, t: float) -> tuple[int, int]:
        ms = GPS_MS0 + int(round(t * 1000))
        return GPS_WEEK + self.week_shift + ms // 604_800_000, ms % 604_800_000


def swarm(overspeed: bool = True) -> list[Vehicle]:
    """The three SITL-like vehicles; boot times differ, as separate processes' do."""
    return [Vehicle(1, 100.0, 0.0, overspeed=overspeed), Vehicle(2, 130.0, 10.0, glitch=True, gap=True),
            Vehicle(3, 90.0, 20.0, ekf_failure=True)]


def write_bin(v: Vehicle, path: Path) -> Path:
    """The vehicle's DataFlash log, messages in time order as the logger writes them."""
    w = DataFlashWriter(path)
    w.write("MSG", v.time_us(-5.0), "ArduCopter V4.5.7 (2a3dc4b7)")
    for name, value in (("SYSID_THISMAV", v.sysid), ("FS_EKF_THRESH", 0.8)):
        w.write("PARM", v.time_us(-5.0), name, value, value)
    w.write("ORGN", v.time_us(-4.0), 0, *v.origin)
    rows: list[tuple[float, str, tuple]] = []
    for i, t in enumerate(v.t):
        if v.gap and 50.0 <= t < 51.5:
            continue
        for core in (0, 1):
            n, e, d = v.pos[i] + (0.3 * core, 0.0, 0.0)
            rows.append((t, "XKF1", (core, 0, 0, 0, *v.vel[i], 0.0, n, e, d, 0, 0, 0, 0)))
            bad = v.ekf_invalid(t)
            flags = LOST_FLAGS if bad else GOOD_FLAGS
            ratios = (1.5, 2.0, 0.5, 1.2) if bad else (0.1, 0.1, 0.1, 0.1)
            rows.append((t, "XKF4", (core, *ratios, 0.0, 0.0, 0, 0, 0x10 if bad else 0, 0, flags, 0, v.lane(t))))
    tg, lla = v.gps()
    for t, (lat, lon, alt) in zip(tg, lla, strict=True):
        week, ms = v.gps_time(t)
        rows.append((t, "GPS", (0, 3, ms, week, 12, 0.8, lat, lon, alt, 0.0, 0.0, 0.0, 0.0, 1)))
    rows += [(-3.0, "MODE", (0, 0, 31)), (-2.0, "EV", (25,)), (0.5, "EV", (10,)), (0.6, "MODE", (4, 4, 2)),
             (9.0, "CMD", (3, 1, 16, 0, 0, 0, 0, *v.origin, 3))]
    rows += [(0.5, "CMD", (3, k, cid, 0, 0, 0, 0, *v.origin, 3)) for k, cid in enumerate((16, 16, 20))]  # at arming
    if v.overspeed:
        rows += [(50.0, "ERR", (5, 1)), (52.0, "ERR", (5, 0))]  # a radio failsafe, resolved
    if v.glitch:
        rows += [(30.0, "ERR", (11, 2)), (32.2, "ERR", (11, 0))]
        rows.append((15.0, "ERR", (10, 3)))  # a change to AUTO refused (its code is the mode; never "resolved")
    if v.ekf_failure:
        a, b = v.ekf_lost
        rows += [(a, "ERR", (16, 2)), (a + 0.8, "MODE", (9, 9, 6)), (a + 2, "ERR", (24, 1)), (b, "ERR", (16, 0))]
    rows.append((59.0, "EV", (18,)))
    for t, name, vals in sorted(rows, key=lambda r: r[0]):
        w.write(name, v.time_us(t), *vals)
    w.close()
    return path


def write_mission(folder: Path) -> Path:
    path = folder / "mission.yaml"
    path.write_text(MISSION_YAML)
    return path


def write_swarm_bins(folder: Path, overspeed: bool = True) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [write_bin(v, folder / f"{v.sysid:02d}.BIN") for v in swarm(overspeed)]


def write_tlog(vehicles: list[Vehicle], path: Path, landed_until: float | None = None) -> Path:
    """One ground-station telemetry log holding every vehicle (each under its own MAVLink system id); with
    `landed_until`, EXTENDED_SYS_STATE once a second: undefined in the first second, on the ground until then, in the
    air after."""
    from pymavlink.dialects.v20 import ardupilotmega as mavlink

    rows: list[tuple[float, int, object]] = []
    for v in vehicles:
        mav = mavlink.MAVLink(None, srcSystem=v.sysid, srcComponent=1)
        lat0, lon0, alt0 = v.origin

        def add(t: float, msg, v=v, mav=mav) -> None:
            rows.append((t, v.sysid, msg.pack(mav)))

        add(-1.0, mavlink.MAVLink_gps_global_origin_message(int(lat0 * 1e7), int(lon0 * 1e7), int(alt0 * 1000)))
        for t in np.arange(0.0, DURATION_S, 1.0):
            mode = 9 if v.ekf_failure and t >= v.ekf_lost[0] + 1 else 4
            add(t, mavlink.MAVLink_heartbeat_message(2, 3, 217, mode, 4, 3))
            week, ms = v.gps_time(t)
            unix_us = int(round((GPS_EPOCH_UTC_S + week * 604800 + ms / 1000) * 1e6))
            add(t, mavlink.MAVLink_system_time_message(unix_us, int(round((t + v.boot_s) * 1000))))
            if landed_until is not None:
                landed = 0 if t < 1.0 else 1 if t < landed_until else 2
                add(t, mavlink.MAVLink_extended_sys_state_message(0, landed))
        lat, lon = offset_latlon(lat0, lon0, v.pos[:, 0], v.pos[:, 1])
        for i, t in enumerate(v.t):
            if v.gap and 50.0 <= t < 51.5:
                continue
            boot_ms = int(round((t + v.boot_s) * 1000))
            add(t, mavlink.MAVLink_local_position_ned_message(boot_ms, *v.pos[i], *v.vel[i]))
            add(t, mavlink.MAVLink_global_position_int_message(
                boot_ms, int(round(lat[i] * 1e7)), int(round(lon[i] * 1e7)), int(round((alt0 - v.pos[i, 2]) * 1000)),
                int(round(-v.pos[i, 2] * 1000)), *(int(round(x * 100)) for x in v.vel[i]), 0))
            if i % (EKF_HZ // 2) == 0:
                bad = v.ekf_invalid(t)
                add(t, mavlink.MAVLink_ekf_status_report_message(
                    0x07 if bad else 0x3F, 1.5 if bad else 0.1, 2.0 if bad else 0.1, 0.1, 1.2 if bad else 0.1, 0.0))
        tg, lla = v.gps()
        for t, (la, lo, al) in zip(tg, lla, strict=True):
            add(t, mavlink.MAVLink_gps_raw_int_message(int(round((t + v.boot_s) * 1e6)), 3, int(round(la * 1e7)),
                                                       int(round(lo * 1e7)), int(round(al * 1000)), 80, 100, 0, 0, 12))
        add(1.0, mavlink.MAVLink_statustext_message(2, b"PreArm: Need 3D Fix"))  # before arming: no error
        if v.overspeed:
            add(50.0, mavlink.MAVLink_statustext_message(4, b"Radio Failsafe"))
            add(52.0, mavlink.MAVLink_statustext_message(4, b"Radio Failsafe Cleared"))
        if v.glitch:
            companion = mavlink.MAVLink(None, srcSystem=v.sysid, srcComponent=191)  # its own idea of a position
            rows.append((5.0, v.sysid, mavlink.MAVLink_heartbeat_message(18, 8, 0, 0, 4, 3).pack(companion)))
            rows.append((5.1, v.sysid, mavlink.MAVLink_local_position_ned_message(
                int((5.1 + v.boot_s) * 1000), 500.0, 500.0, 0.0, 0, 0, 0).pack(companion)))
            add(30.0, mavlink.MAVLink_statustext_message(2, b"GPS Glitch"))
            add(32.2, mavlink.MAVLink_statustext_message(2, b"GPS Glitch cleared"))
        if v.ekf_failure:
            add(v.ekf_lost[0], mavlink.MAVLink_statustext_message(2, b"EKF variance"))
            add(v.ekf_lost[0] + 2, mavlink.MAVLink_statustext_message(6, b"EKF3 lane switch 1"))
        add(-0.5, mavlink.MAVLink_mission_item_int_message(255, 190, 1, 3, 16, 0, 1, 0, 0, 0, 0, int(lat0 * 1e7),
                                                             int(lon0 * 1e7), 10.0))  # the vehicle's copy
        add(9.0, mavlink.MAVLink_mission_item_reached_message(1))
    t_unix0 = GPS_EPOCH_UTC_S + GPS_WEEK * 604800 + GPS_MS0 / 1000 + 0.05  # the ground station hears it 50 ms later
    with open(path, "wb") as f:
        for t, _, buf in sorted(rows, key=lambda r: (r[0], r[1])):
            f.write(struct.pack(">Q", int(round((t_unix0 + t) * 1e6))) + buf)
    return path


def evaluate_log(path: Path, out: Path) -> tuple[int, dict]:
    """`evaluate PATH --llm rules` into OUT: its exit code and report.json."""
    from uav_debate_eval.cli import main

    code = main(["evaluate", str(path), "--out", str(out), "--llm", "rules", "--quiet"])
    return code, json.loads((out / "report.json").read_text())
