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

from uav_debate_eval.core.interp import VEHICLE_BLOCK
from uav_debate_eval.metrics.filters import savgol_filter
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


def vehicle_values(k: Kinematics) -> dict[str, float]:
    """Raw (unscored) flight-control quantities of one vehicle."""
    return _stacked_values([k])[0]


def _stacked_values(kins: list[Kinematics]) -> list[dict[str, float]]:
    """vehicle_values of vehicles on the same grid length and step, computed on stacked (vehicles, steps) arrays.

    Every quantity is a reduction along each row, so a swarm costs a few numpy calls instead of a few per vehicle.
    """
    n, dt = len(kins[0].t), kins[0].dt
    jerk = _rms_rows(_row_norms([k.jerk for k in kins]))
    z = np.stack([k.pos[:, 2] for k in kins])
    w = int(round(ALT_TREND_S / dt)) | 1 if dt > 0 else 0
    if w >= 5 and n >= w:
        alt = _rms_rows(z - savgol_filter(z, w, 2, axis=-1))
    else:
        alt = np.std(z, axis=-1) if n else np.zeros(len(kins))
    speed = np.stack([k.speed for k in kins])
    if dt > 0:
        speed = uniform_filter1d(speed, max(1, int(round(SPEED_WINDOW_S / dt))), axis=-1)
    cv = np.std(speed, axis=-1) / np.maximum(np.mean(speed, axis=-1), CV_MIN_SPEED) if n else np.zeros(len(kins))
    dist = np.sum(speed, axis=-1) * dt
    work = np.sum(_row_norms([k.acc for k in kins]) * speed, axis=-1) * dt
    return [{"smoothness": float(jerk[i]), "altitude_stability": float(alt[i]), "speed_consistency": float(cv[i]),
             "energy_efficiency": float(work[i]) / float(dist[i]) if dist[i] > 1e-9 else 0.0}
            for i in range(len(kins))]


def _row_norms(vectors: list[np.ndarray]) -> np.ndarray:
    """np.stack([norm(v) for v in vectors]) for (steps, 3) arrays of one length, a block of vehicles at a time: the
    same values, without a (vehicles, steps, 3) copy of fresh memory nor a numpy call per vehicle."""
    out = np.empty((len(vectors), len(vectors[0])))
    for a in range(0, len(vectors), VEHICLE_BLOCK):
        out[a:a + VEHICLE_BLOCK] = norm(np.stack(vectors[a:a + VEHICLE_BLOCK]))
    return out


def _rms_rows(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.mean(x * x, axis=-1)) if x.shape[-1] else np.zeros(x.shape[:-1])


def per_vehicle_values(kins: list[Kinematics]) -> list[dict[str, float]]:
    """vehicle_values of every vehicle with >= 2 grid points, in order; vehicles sharing a grid are stacked."""
    kins = [k for k in kins if len(k.t) >= 2]
    groups: dict[tuple[int, float], list[int]] = {}
    for i, k in enumerate(kins):
        groups.setdefault((len(k.t), k.dt), []).append(i)
    out: list[dict[str, float]] = [{}] * len(kins)
    for members in groups.values():
        for i, values in zip(members, _stacked_values([kins[i] for i in members]), strict=True):
            out[i] = values
    return out


_PARAMS = {"smoothness": (SMOOTHNESS, "m/s^3"), "altitude_stability": (ALTITUDE, "m"),
           "speed_consistency": (SPEED_CV, "ratio"), "energy_efficiency": (ENERGY, "m/s^2")}


def flight_control(kins: list[Kinematics]) -> dict[str, dict]:
    """Per metric: score = mean over vehicles of the vehicle scores; value = mean raw quantity."""
    per = per_vehicle_values(kins)
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
