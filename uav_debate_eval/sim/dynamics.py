"""Vehicle dynamics: a double integrator per vehicle driven by a PD controller with velocity feed-forward.

All vehicles are integrated together as (N, 3) arrays. The net acceleration (controller + wind) is
clipped to the vehicle's acceleration limit, then velocity to its speed and vertical-speed limits, so
motion is always continuous and limited. Wind is a seeded Ornstein-Uhlenbeck acceleration shared by
the swarm plus a smaller per-vehicle part; measurements add a slowly drifting position error (GNSS-like)
and small white noise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

KP = 1.5  # 1/s^2, position gain
KD = 2.4  # 1/s, velocity gain (about critically damped with KP)
PHYSICS_HZ = 50.0  # minimum integration rate; the output rate is subsampled from it

Reference = Callable[[float], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Limits:
    """Controller limits of one vehicle: 3-D speed, vertical speed (m/s) and acceleration (m/s^2)."""

    speed: float
    vertical_speed: float
    accel: float


@dataclass(frozen=True)
class Override:
    """Different limits for one vehicle during [t0, t1) (a fault pushing the controller)."""

    uav: int
    t0: float
    t1: float
    limits: Limits


@dataclass(frozen=True)
class Noise:
    wind_common: float = 0.12  # m/s^2, swarm-wide gust (horizontal; vertical a quarter of it)
    wind_local: float = 0.06  # m/s^2, per vehicle
    wind_tau: float = 3.0  # s
    pos_drift: float = 0.02  # m, slowly varying position error
    pos_drift_tau: float = 5.0  # s
    pos_white: float = 0.002  # m
    vel_white: float = 0.005  # m/s


def integrate(reference: Reference, n: int, t_out: np.ndarray, limits: Limits, overrides: list[Override],
              rng: np.random.Generator, noise: Noise = Noise()) -> tuple[np.ndarray, np.ndarray]:
    """Fly n vehicles after `reference`; returns measured positions and velocities, each (len(t_out), n, 3)."""
    rate = 1.0 / float(t_out[1] - t_out[0]) if len(t_out) > 1 else PHYSICS_HZ
    sub = max(1, int(np.ceil(PHYSICS_HZ / rate - 1e-9)))
    dt = 1.0 / (rate * sub)
    pos, vel = (np.array(a, dtype=float) for a in reference(float(t_out[0])))
    wind_c = np.zeros(3)
    wind_l = np.zeros((n, 3))
    drift = np.zeros((n, 3))
    vscale = np.array([1.0, 1.0, 0.25])
    wk = np.sqrt(2.0 * dt / noise.wind_tau)
    dk = np.sqrt(2.0 / noise.pos_drift_tau / rate)
    v_max = np.full(n, limits.speed)
    vz_max = np.full(n, limits.vertical_speed)
    a_max = np.full(n, limits.accel)
    out_pos = np.empty((len(t_out), n, 3))
    out_vel = np.empty((len(t_out), n, 3))
    t = float(t_out[0])
    for i in range(len(t_out)):
        if i:
            for _ in range(sub):
                _limits_at(t, overrides, limits, v_max, vz_max, a_max)
                ref_pos, ref_vel = reference(t)
                acc = KP * (ref_pos - pos) + KD * (ref_vel - vel) + wind_c + wind_l
                vel = vel + _clip_norm(acc, a_max) * dt
                vel = _clip_norm(vel, v_max)
                vel[:, 2] = np.clip(vel[:, 2], -vz_max, vz_max)
                pos = pos + vel * dt
                t += dt
                wind_c += -wind_c * dt / noise.wind_tau + noise.wind_common * wk * vscale * rng.standard_normal(3)
                wind_l += -wind_l * dt / noise.wind_tau + noise.wind_local * wk * vscale * rng.standard_normal((n, 3))
            t = float(t_out[i])
            drift += -drift / (noise.pos_drift_tau * rate) + noise.pos_drift * dk * rng.standard_normal((n, 3))
        out_pos[i] = pos + drift + noise.pos_white * rng.standard_normal((n, 3))
        out_vel[i] = vel + noise.vel_white * rng.standard_normal((n, 3))
    return out_pos, out_vel


def _limits_at(t: float, overrides: list[Override], base: Limits, v_max, vz_max, a_max) -> None:
    for o in overrides:
        v_max[o.uav], vz_max[o.uav], a_max[o.uav] = base.speed, base.vertical_speed, base.accel
    for o in overrides:
        if o.t0 <= t < o.t1:
            v_max[o.uav], vz_max[o.uav], a_max[o.uav] = o.limits.speed, o.limits.vertical_speed, o.limits.accel


def _clip_norm(v: np.ndarray, limit: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v, axis=1)
    scale = np.minimum(1.0, limit / np.maximum(norm, 1e-12))
    return v * scale[:, None]
