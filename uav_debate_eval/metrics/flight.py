"""Flight-control metrics: smoothness, altitude stability, speed consistency, energy efficiency.

Each is computed per vehicle on the Savitzky-Golay smoothed kinematics (metrics.kinematics),
mapped to 0..1 with `rational(x, ref, floor)` (metrics.scoring) and averaged over vehicles:

- smoothness: x = RMS |jerk| (m/s^3); floor 0.5, ref 5.0. A constant-speed line has zero jerk: 1.
- altitude stability: x = RMS of z minus its 4 s local quadratic trend (m), i.e. altitude
  oscillation that is not a planned climb/descent; floor 0.05, ref 0.25. Level flight or hover: 1.
- speed consistency: x = std(|v|) / max(mean(|v|), 1 m/s) (coefficient of variation of the speed
  averaged over 2 s, so sensor noise is not a speed change; the 1 m/s guard keeps hover from
  dividing by ~0); floor 0.02, ref 0.25. Constant speed: 1.
- energy efficiency: x = integral(|a|·|v| dt) / integral(|v| dt) (m/s^2), the speed-weighted mean
  acceleration: a proxy for the power spent on manoeuvring beyond steady flight; zero for constant
  velocity and for hover; floor 0.1, ref 1.0.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.signal import savgol_filter

from uav_debate_eval.metrics.kinematics import Kinematics
from uav_debate_eval.metrics.scoring import detail, rational
from uav_debate_eval.metrics.vec import norm

SMOOTHNESS = (0.5, 5.0)  # floor, ref (m/s^3)
ALTITUDE = (0.05, 0.25)  # m
SPEED_CV = (0.02, 0.25)
ENERGY = (0.1, 1.0)  # m/s^2
ALT_TREND_S = 4.0
CV_MIN_SPEED = 1.0
SPEED_WINDOW_S = 2.0

FORMULAS = {
    "smoothness": "1/(1+max(0,J-0.5)/5.0), J = RMS |jerk| (2nd derivative of a 2 s Savitzky-Golay quadratic "
                  "fit of velocity)",
    "altitude_stability": "1/(1+max(0,s-0.05)/0.25), s = RMS(z - 4 s local quadratic trend of z)",
    "speed_consistency": "1/(1+max(0,cv-0.02)/0.25), cv = std|v| / max(mean|v|, 1 m/s), |v| averaged over 2 s",
    "energy_efficiency": "1/(1+max(0,e-0.1)/1.0), e = integral(|a||v|dt) / integral(|v|dt)",
}


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x * x))) if x.size else 0.0


def vehicle_values(k: Kinematics) -> dict[str, float]:
    """Raw (unscored) flight-control quantities of one vehicle."""
    jerk = _rms(norm(k.jerk))
    z = k.pos[:, 2]
    w = int(round(ALT_TREND_S / k.dt)) | 1 if k.dt > 0 else 0
    if w >= 5 and len(z) >= w:
        alt = _rms(z - savgol_filter(z, w, 2, mode="interp"))
    else:
        alt = float(np.std(z)) if len(z) else 0.0
    speed = uniform_filter1d(k.speed, max(1, int(round(SPEED_WINDOW_S / k.dt)))) if k.dt > 0 else k.speed
    cv = float(np.std(speed) / max(float(np.mean(speed)), CV_MIN_SPEED)) if len(speed) else 0.0
    dist = float(np.sum(speed)) * k.dt
    energy = float(np.sum(norm(k.acc) * speed)) * k.dt / dist if dist > 1e-9 else 0.0
    return {"smoothness": jerk, "altitude_stability": alt, "speed_consistency": cv, "energy_efficiency": energy}


_PARAMS = {"smoothness": (SMOOTHNESS, "m/s^3"), "altitude_stability": (ALTITUDE, "m"),
           "speed_consistency": (SPEED_CV, "ratio"), "energy_efficiency": (ENERGY, "m/s^2")}


def flight_control(kins: list[Kinematics]) -> dict[str, dict]:
    """Per metric: score = mean over vehicles of the vehicle scores; value = mean raw quantity."""
    per = [vehicle_values(k) for k in kins if len(k.t) >= 2]
    out = {}
    for name, ((floor, ref), unit) in _PARAMS.items():
        if not per:
            out[name] = detail(None, None, unit, FORMULAS[name])
            continue
        values = [p[name] for p in per]
        scores = [rational(v, ref, floor) for v in values]
        out[name] = detail(float(np.mean(scores)), float(np.mean(values)), unit,
                           FORMULAS[name] + "; mean over vehicles")
    return out
