"""ArduPilot DataFlash logs (`.bin`) of a simulated flight, one per vehicle, as SITL swarm instances write them
(`simulate --format bin`): each vehicle boots at its own time and logs its EKF3 estimate (XKF1, XKF4 with its
status flags), its EKF origin (ORGN: the simulated world's origin, SITL's home, for every vehicle, so the logs read
back into the simulator's frame and its mission's geofence applies), its GPS (week and ms, 5 Hz), its SYSID_THISMAV
and flight mode. `evaluate` reads them back into the flight the simulator flew.

`DataFlashWriter` writes any message of `FORMATS` (ArduPilot 4.5's definitions): the tests build their own logs
with it.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np

from uav_debate_eval.core.trajectory import SwarmTrajectory

#: name: (type id, DataFlash format, columns), as ArduPilot 4.5 logs them
FORMATS = {
    "PARM": (64, "QNff", "TimeUS,Name,Value,Default"),
    "MSG": (65, "QZ", "TimeUS,Message"),
    "GPS": (66, "QBBIHBcLLeffffB", "TimeUS,I,Status,GMS,GWk,NSats,HDop,Lat,Lng,Alt,Spd,GCrs,VZ,Yaw,U"),
    "XKF1": (67, "QBccCfffffffccce", "TimeUS,C,Roll,Pitch,Yaw,VN,VE,VD,dPD,PN,PE,PD,GX,GY,GZ,OH"),
    "XKF4": (68, "QBcccccfbbHBIHb", "TimeUS,C,SV,SP,SH,SM,SVT,errRP,OFN,OFE,FS,TS,SS,GPS,PI"),
    "ORGN": (69, "QBLLe", "TimeUS,Type,Lat,Lng,Alt"),
    "MODE": (70, "QMBB", "TimeUS,Mode,ModeNum,Rsn"),
    "ERR": (71, "QBB", "TimeUS,Subsys,ECode"),
    "EV": (72, "QB", "TimeUS,Id"),
    "CMD": (73, "QHHHffffLLfB", "TimeUS,CTot,CNum,CId,Prm1,Prm2,Prm3,Prm4,Lat,Lng,Alt,Frame"),
}
#: Older firmware's definitions of the same messages, for `DataFlashWriter(path, formats=...)`: ArduCopter 3.3
#: (boot time TimeMS; GPS writes its ms-of-week as TimeMS, the week as Week and the boot time as T; EKF1/EKF4
#: without a core field; EV and ERR without a time), and ArduPilot 3.5-4.0's EKF2 (NKF1/NKF4).
COPTER33_FORMATS = {
    "PARM": (64, "Nf", "Name,Value"),
    "MSG": (65, "Z", "Message"),
    "GPS": (66, "BIHBcLLeeEefI", "Status,TimeMS,Week,NSats,HDop,Lat,Lng,RelAlt,Alt,Spd,GCrs,VZ,T"),
    "MODE": (70, "IMB", "TimeMS,Mode,ModeNum"),
    "ERR": (71, "BB", "Subsys,ECode"),
    "EV": (72, "B", "Id"),
    "EKF1": (80, "IccCffffffccc", "TimeMS,Roll,Pitch,Yaw,VN,VE,VD,PN,PE,PD,GX,GY,GZ"),
    "EKF4": (81, "IcccccccbbBBH", "TimeMS,SV,SP,SH,SMX,SMY,SMZ,SVT,OFN,EFE,FS,TS,SS"),
    "ATT": (82, "IccccCCCC", "TimeMS,DesRoll,Roll,DesPitch,Pitch,DesYaw,Yaw,ErrRP,ErrYaw"),
}
EKF2_FORMATS = {
    "NKF1": (83, "QccCfffffffccc", "TimeUS,Roll,Pitch,Yaw,VN,VE,VD,dPD,PN,PE,PD,GX,GY,GZ"),
    "NKF4": (84, "QcccccfbbHBHHb", "TimeUS,SV,SP,SH,SM,SVT,errRP,OFN,OFE,FS,TS,SS,GPS,PI"),
    "POS": (85, "QLLeff", "TimeUS,Lat,Lng,Alt,RelHomeAlt,RelOriginAlt"),
    "ATT": (86, "QccccCCCC", "TimeUS,DesRoll,Roll,DesPitch,Pitch,DesYaw,Yaw,ErrRP,ErrYaw"),
}
_STRUCT = {"b": "b", "B": "B", "h": "h", "H": "H", "i": "i", "I": "I", "f": "f", "d": "d", "n": "4s", "N": "16s",
           "Z": "64s", "c": "h", "C": "H", "e": "i", "E": "I", "L": "i", "M": "B", "q": "q", "Q": "Q"}
_SCALE = {"c": 100.0, "C": 100.0, "e": 100.0, "E": 100.0, "L": 1e7}
A_WGS84, E2 = 6378137.0, 6.69437999014e-3
#: ArduPilot SITL's default home (CMAC, Canberra): the simulated world frame's origin.
SITL_HOME = (-35.363261, 149.165230, 584.0)
GPS_EPOCH_UTC_S = 315964800.0 - 18.0  # GPS time 0 in UTC seconds (18 leap seconds since 2017)
#: Flight time 0 of a simulated flight's logs (UTC seconds; the clock of sim.recording's bags).
SIM_EPOCH_UTC = 1_795_462_900.0
#: XKF4 status: attitude, velocities, relative and absolute horizontal and vertical position, using GPS, GPS
#: quality good, initialised; LOST keeps attitude and velocities only.
GOOD_FLAGS = 0b1_1010_0000_0011_1111
LOST_FLAGS = 0b1_0000_0000_0000_0111
GUIDED, RSN_GCS_COMMAND = 4, 2


class DataFlashWriter:
    """Writes DataFlash messages: the header 0xA3 0x95, the type id, the packed fields (each FMT once, first)."""

    def __init__(self, path: Path, formats: dict[str, tuple[int, str, str]] | None = None):
        self.f = open(path, "wb")  # noqa: SIM115 (closed by close(), as a logger's file is)
        self.formats = {**FORMATS, **(formats or {})}  # more messages, or an older firmware's definitions
        self.declared: set[str] = set()

    def _fmt(self, name: str) -> None:
        tid, fmt, cols = self.formats[name]
        length = 3 + struct.calcsize("<" + "".join(_STRUCT[c] for c in fmt))
        body = struct.pack("<BB4s16s64s", tid, length, name.encode(), fmt.encode(), cols.encode())
        self.f.write(bytes([0xA3, 0x95, 0x80]) + body)
        self.declared.add(name)

    def declare(self, name: str) -> None:
        """The message's FMT alone, as a firmware declares every message it might write (EKF3's beside EKF2's)."""
        self._fmt(name)

    def write(self, name: str, *values) -> None:
        """One message; values in the log's units (metres, degrees: scaled here as the format says)."""
        if name not in self.declared:
            self._fmt(name)
        tid, fmt, _ = self.formats[name]
        packed: list = []
        for ch, v in zip(fmt, values, strict=True):
            if ch in "nNZ":
                packed.append(v.encode() if isinstance(v, str) else v)
            elif ch in _SCALE:
                packed.append(int(round(v * _SCALE[ch])))
            elif ch in "fd":
                packed.append(float(v))
            else:
                packed.append(int(v))
        self.f.write(bytes([0xA3, 0x95, tid]) + struct.pack("<" + "".join(_STRUCT[c] for c in fmt), *packed))

    def close(self) -> None:
        self.f.close()


def offset_latlon(lat0: float, lon0: float, north, east):
    """lat/lon of points north/east metres from (lat0, lon0) (ellipsoid radii of curvature)."""
    s = math.sin(math.radians(lat0))
    m = A_WGS84 * (1 - E2) / (1 - E2 * s * s) ** 1.5
    n = A_WGS84 / math.sqrt(1 - E2 * s * s)
    east_deg = np.degrees(np.asarray(east) / (n * math.cos(math.radians(lat0))))
    return lat0 + np.degrees(np.asarray(north) / m), lon0 + east_deg


def gps_week_ms(utc_s: float) -> tuple[int, int]:
    """GPS week and ms of week of a UTC time."""
    ms = int(round((utc_s - GPS_EPOCH_UTC_S) * 1000))
    return ms // 604_800_000, ms % 604_800_000


def write_dataflash_logs(traj: SwarmTrajectory, out_dir: str | Path, epoch_utc: float,
                         sysid: int | None = None) -> list[Path]:
    """One `<uav>.bin` per vehicle; flight time 0 is `epoch_utc`. Samples with gps_ok = 0 are logged with the EKF's
    status flags lost (an invalid estimate, as the vehicle's estimator would report it). `sysid`: every vehicle's
    SYSID_THISMAV (SITL's default 1, a show's drones left on it); by default each its own (1, 2, ...)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for k, (u, tr) in enumerate(traj.tracks.items()):
        boot = 30.0 + 7.0 * k  # each instance started at its own time
        path = out / f"{u}.bin"
        w = DataFlashWriter(path)

        def us(t: float, boot=boot) -> int:
            return int(round((t + boot) * 1e6))

        w.write("MSG", us(-boot + 1.0), "ArduCopter V4.5.7 (simulated)")
        w.write("PARM", us(-boot + 1.0), "SYSID_THISMAV", k + 1 if sysid is None else sysid, 1)
        w.write("ORGN", us(-1.0), 0, *SITL_HOME)
        w.write("MODE", us(0.0), GUIDED, GUIDED, RSN_GCS_COMMAND)
        ok = np.ones(len(tr), bool) if tr.gps_ok is None else np.nan_to_num(tr.gps_ok, nan=1.0) >= 0.5
        next_fix = float(tr.t[0])
        for i, t in enumerate(tr.t):
            e, n, up = tr.pos[i]
            ve, vn, vu = tr.vel[i]
            w.write("XKF1", us(t), 0, 0, 0, 0, vn, ve, -vu, 0.0, n, e, -up, 0, 0, 0, 0)
            w.write("XKF4", us(t), 0, 0.1, 0.1, 0.1, 0.1, 0.0, 0.0, 0, 0, 0, 0,
                    GOOD_FLAGS if ok[i] else LOST_FLAGS, 0, 0)
            if t >= next_fix:
                week, ms = gps_week_ms(epoch_utc + t)
                lat, lon = offset_latlon(SITL_HOME[0], SITL_HOME[1], tr.pos[i, 1], tr.pos[i, 0])
                w.write("GPS", us(t), 0, 3, ms, week, 12, 0.8, float(lat), float(lon), SITL_HOME[2] + tr.pos[i, 2],
                        0.0, 0.0, 0.0, 0.0, 1)
                next_fix += 0.2
        w.close()
        written.append(path)
    return written
