"""One ArduPilot vehicle's log as read (DataFlash `.bin` or MAVLink `.tlog`), still on its own boot clock.

Both readers fill a `VehicleLog`; `io.ardupilot` places every vehicle in one world frame and on one clock (through
`io.ulog.combine`, as for PX4) and turns its events and spans into flight time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from uav_debate_eval.core.stamps import stray_stamps
from uav_debate_eval.io.ulog import LogTrack

#: GPS time starts 1980-01-06; UTC is behind it by the leap seconds since (18 s since 2017-01-01).
GPS_EPOCH_UNIX_S = 315964800.0
GPS_LEAP_S = 18.0


@dataclass
class LogEvent:
    """Something the autopilot logged (mode change, error, failsafe, event, mission command), boot microseconds."""

    type: str
    t_us: float
    label: str
    t_end_us: float | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class LogSpan:
    """A data-quality span the log itself shows (GPS glitch reported by the autopilot, EKF lane switch, gap)."""

    kind: str
    t_us: float
    t_end_us: float
    detail: str
    affects: list[str] = field(default_factory=list)
    values: dict = field(default_factory=dict)


@dataclass
class VehicleLog:
    """The estimator's track plus what the log says about the flight and about itself."""

    track: LogTrack
    sysid: int | None = None
    gps_t_us: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gps_lla: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))  # lat deg, lon deg, alt m AMSL
    events: list[LogEvent] = field(default_factory=list)
    spans: list[LogSpan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    messages: int = 0  # messages in the file (for the reader's throughput)
    vehicle_class: str = "unknown"  # multirotor, fixed_wing, vtol, rover, underwater (io.vehicle)
    firmware: str = ""
    estimator: str = ""  # the position source the track comes from, and why it was taken
    sitl: bool = False
    #: (boot µs, roll/pitch deg (n, 2), their targets (n, 2), armed in an attitude-controlling mode (n,)) or None
    attitude: tuple | None = None


def gps_utc_offset_us(t_us: np.ndarray, week: np.ndarray, week_ms: np.ndarray) -> float | None:
    """Microseconds to add to the boot clock for UTC, from GPS week / ms-of-week (median over good fixes)."""
    ok = week > 0
    if not ok.any():
        return None
    utc_s = GPS_EPOCH_UNIX_S - GPS_LEAP_S + week[ok] * 604800.0 + week_ms[ok] / 1000.0
    return float(np.median(utc_s * 1e6 - t_us[ok]))


def invalid_reasons(flags_ok: np.ndarray, ratios: np.ndarray, threshold: float) -> np.ndarray:
    """Per status row: the estimate is unusable when its flags deny a position or, as ArduPilot's EKF failsafe
    decides, two of the velocity / position / compass innovation test ratios (columns of `ratios`) reach the
    threshold (FS_EKF_THRESH)."""
    over = (np.nan_to_num(ratios, nan=0.0) >= threshold).sum(axis=1) >= 2
    return ~flags_ok | over


def gaps(t_us: np.ndarray, min_gap_s: float = 0.5, factor: float = 10.0) -> list[tuple[float, float]]:
    """Logging gaps in a stream: intervals longer than max(min_gap_s, factor x the median interval), between stamps
    that are not stray (core.stamps.stray_stamps: the flight leaves those out, so a gap beside one is the stray's, not
    a silence; a real Rover 4.5 tlog's first position, stamped 376.7 s before the rest, made a 376.7-s gap)."""
    stray = stray_stamps(t_us / 1e6) if len(t_us) >= 3 else None
    if stray is not None:
        t_us = t_us[~stray[0]]
    if len(t_us) < 3:
        return []
    dt = np.diff(t_us)
    limit = max(min_gap_s * 1e6, factor * float(np.median(dt)))
    return [(float(t_us[i]), float(t_us[i + 1])) for i in np.flatnonzero(dt > limit)]


def lane_switches(t_us: np.ndarray, lane: np.ndarray) -> list[tuple[float, int, int]]:
    """(time, from lane, to lane) wherever the primary EKF lane changes."""
    change = np.flatnonzero(np.diff(lane) != 0) + 1
    return [(float(t_us[i]), int(lane[i - 1]), int(lane[i])) for i in change]


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) indexes of each run of True."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist(), strict=True))
