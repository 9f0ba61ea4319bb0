"""GPS glitches: fixes that jump further than the vehicle class can move between two fixes.

Autopilot logs carry the GPS fixes beside the estimate (`traj.ingest.gnss`, world ENU, flight time). A fix that
lands further from where the previous two fixes put the vehicle than the class's acceleration bound allows
(a_max dt^2, plus the receiver's noise) is a jump; jumps less than GLITCH_JOIN_S apart are one glitch. The checks
run on the estimate, so a glitch is a data-quality finding, never a violation: it says the estimate may have
been pulled (the estimator's own validity flags decide what is not evaluable).
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.mission import VEHICLE_CLASSES, Mission
from uav_debate_eval.core.records import Finding
from uav_debate_eval.core.trajectory import SwarmTrajectory

#: Receiver noise (m) a fix may stray from the prediction without being a jump.
GPS_NOISE_M = 1.5
#: Jumps closer together than this (s) are one glitch (out and back).
GLITCH_JOIN_S = 5.0


def jumps(t: np.ndarray, pos: np.ndarray, a_max: float) -> np.ndarray:
    """Indexes of fixes further from the constant-velocity prediction of the two before than a_max allows, that
    moved more than the receiver's noise from the fix before. (A velocity over two fixes logged 20 ms apart at boot
    carries their noise 10x into the next fix's prediction: a real ArduCopter 3.2 log's fix 3 cm from the one before
    was a 'jump'.)"""
    if len(t) < 3:
        return np.zeros(0, dtype=int)
    dt1, dt2 = t[1:-1] - t[:-2], t[2:] - t[1:-1]
    vel = (pos[1:-1] - pos[:-2]) / np.where(dt1 > 0, dt1, np.inf)[:, None]
    miss = np.linalg.norm(pos[2:] - (pos[1:-1] + vel * dt2[:, None]), axis=1)
    allowed = a_max * dt2 * (dt1 + dt2) + GPS_NOISE_M
    step = np.linalg.norm(pos[2:] - pos[1:-1], axis=1)
    return np.flatnonzero((miss > allowed) & (step > GPS_NOISE_M)) + 2


def vehicle_class(traj: SwarmTrajectory, mission: Mission, uav: str) -> str:
    """The class whose reach judges a vehicle's jumps: the mission's when it names one, else the class its
    autopilot log gives (a plane covers in one telemetry gap what a multirotor cannot), else the default."""
    logged = traj.ingest.autopilot.get(uav, {}).get("vehicle_class")
    if mission.vehicle_class == "multirotor" and logged in VEHICLE_CLASSES:
        return str(logged)
    return mission.vehicle_class


def gnss_glitches(traj: SwarmTrajectory, mission: Mission, found: list[Finding]) -> list[Finding]:
    """A gps_glitch finding per run of GPS jumps not already reported (e.g. by the autopilot's own ERR)."""
    out = []
    for u, (t, pos) in traj.ingest.gnss.items():
        if u not in traj.tracks:
            continue
        cls = vehicle_class(traj, mission, u)
        a_max = mission.thresholds.accel_bound(cls)
        idx = jumps(t, pos, a_max)
        if not len(idx):
            continue
        runs = np.split(idx, np.flatnonzero(np.diff(t[idx]) > GLITCH_JOIN_S) + 1)
        for run in runs:
            a, b = float(t[run[0] - 1]), float(t[run[-1]])
            if any(f.kind == "gps_glitch" and u in f.uavs and f.t_start <= b and f.t_end >= a for f in found):
                continue
            step = float(max(np.linalg.norm(pos[i] - pos[i - 1]) for i in run))
            out.append(Finding(
                "gps_glitch", [u], a, b,
                f"{u}'s GPS jumped {step:.1f} m between fixes at {a:.1f}-{b:.1f} s, more than a "
                f"{cls.replace('_', '-')} can move (a_max {a_max:g} m/s^2): a GPS glitch; the checks use the "
                "estimate, which its validity flags vouch for", ["geofence", "max_speed"], {"jump_m": round(step, 2)}))
    return out
