"""Reference motions the vehicles' controllers track: smooth, feasible, evaluated at any time t.

A route is a 3-D polyline whose corners are replaced by circular arcs (fillets) flown at a constant
cruise speed with trapezoidal speed-up and slow-down, so references never ask for infinite
acceleration. `bump` gives the smooth out-hold-back profiles that fault manoeuvres add on top.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def smoothstep(x: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """3x^2 - 2x^3 on [0, 1] (clamped) and its derivative: zero speed at both ends, peak slope 1.5."""
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x), 6.0 * x * (1.0 - x)


@dataclass(frozen=True)
class Bump:
    """0 -> 1 over `up` s from t0, hold for `hold` s, 1 -> 0 over `down` s: value and time derivative."""

    t0: float
    up: float
    hold: float
    down: float

    @property
    def t_end(self) -> float:
        return self.t0 + self.up + self.hold + self.down

    def __call__(self, t: float) -> tuple[float, float]:
        if t <= self.t0 or t >= self.t_end:
            return 0.0, 0.0
        if t < self.t0 + self.up:
            s, ds = smoothstep((t - self.t0) / self.up)
            return float(s), float(ds) / self.up
        t_down = self.t0 + self.up + self.hold
        if t <= t_down:
            return 1.0, 0.0
        s, ds = smoothstep((t - t_down) / self.down)
        return 1.0 - float(s), -float(ds) / self.down


@dataclass(frozen=True)
class Corner:
    """A filleted route corner: heading change and when the reference enters and leaves the arc."""

    index: int
    angle_deg: float
    t_in: float
    t_out: float


class Route:
    """Filleted polyline flown once from t_start at `speed` (accelerating at `accel`), then hovering at the end."""

    def __init__(self, waypoints: np.ndarray, speed: float, radius: float, t_start: float = 0.0,
                 accel: float = 0.5):
        wp = np.asarray(waypoints, dtype=float)
        self.waypoints = wp
        self.speed = speed
        self.t_start = t_start
        self.accel = accel
        pts, corner_s = _fillet(wp, radius)
        seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
        keep = np.concatenate([[True], seg > 1e-9])
        self._pts = pts[keep]
        self._s = np.concatenate([[0.0], np.cumsum(seg[seg > 1e-9])])
        self.length = float(self._s[-1])
        # trapezoidal speed profile (triangular when the route is short)
        v = min(speed, np.sqrt(accel * self.length)) if self.length > 0 else 0.0
        self._v = v
        self._t_acc = v / accel if v > 0 else 0.0
        self._d_acc = 0.5 * accel * self._t_acc ** 2
        self._t_cruise = (self.length - 2 * self._d_acc) / v if v > 0 else 0.0
        self.t_end = t_start + 2 * self._t_acc + self._t_cruise
        self.corners = [Corner(k, ang, self._time_at(s0), self._time_at(s1)) for k, (s0, s1, ang) in corner_s]

    def distance(self, t: float) -> tuple[float, float]:
        """Arc length flown by time t and the speed along the route."""
        tau = t - self.t_start
        if tau <= 0 or self._v == 0:
            return 0.0, 0.0
        if tau < self._t_acc:
            return 0.5 * self.accel * tau * tau, self.accel * tau
        tau -= self._t_acc
        if tau < self._t_cruise:
            return self._d_acc + self._v * tau, self._v
        tau -= self._t_cruise
        if tau < self._t_acc:
            return self._d_acc + self._v * self._t_cruise + self._v * tau - 0.5 * self.accel * tau * tau, \
                self._v - self.accel * tau
        return self.length, 0.0

    def _time_at(self, s: float) -> float:
        grid = np.linspace(self.t_start, self.t_end, 4001)
        dist = np.array([self.distance(t)[0] for t in grid])
        return float(np.interp(s, dist, grid))

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Reference position (3,) and velocity (3,) at time t."""
        s, v = self.distance(t)
        k = int(np.clip(np.searchsorted(self._s, s, side="right") - 1, 0, len(self._s) - 2))
        d = self._pts[k + 1] - self._pts[k]
        length = self._s[k + 1] - self._s[k]
        pos = self._pts[k] + d * ((s - self._s[k]) / length)
        return pos, d * (v / length)


def _fillet(wp: np.ndarray, radius: float, step_deg: float = 3.0):
    """Polyline through wp with each interior corner replaced by a circular arc of `radius`.

    Returns the dense points and, per corner, (s_in, s_out, heading change in degrees).
    """
    pts = [wp[0]]
    corners = []
    s = 0.0
    for k in range(1, len(wp) - 1):
        a, p, b = wp[k - 1], wp[k], wp[k + 1]
        u1 = (p - a) / np.linalg.norm(p - a)
        u2 = (b - p) / np.linalg.norm(b - p)
        theta = float(np.arccos(np.clip(u1 @ u2, -1.0, 1.0)))
        h1, h2 = u1[:2], u2[:2]
        turn = abs(float(np.degrees(np.arctan2(h1[0] * h2[1] - h1[1] * h2[0], h1 @ h2))))
        if theta < 1e-6 or theta > np.pi - 1e-3:  # straight on, or a reversal (flown as stop-and-turn)
            continue
        d = min(radius * np.tan(theta / 2), 0.45 * np.linalg.norm(p - a), 0.45 * np.linalg.norm(b - p))
        r = d / np.tan(theta / 2)
        start = p - u1 * d
        s += float(np.linalg.norm(start - pts[-1]))
        n = u2 - (u2 @ u1) * u1
        n /= np.linalg.norm(n)
        centre = start + r * n
        phis = np.linspace(0.0, theta, max(2, int(np.ceil(np.degrees(theta) / step_deg)) + 1))
        arc = centre + r * (-np.outer(np.cos(phis), n) + np.outer(np.sin(phis), u1))
        pts.extend(arc)
        corners.append((k, (s, s + r * theta, turn)))
        s += r * theta
    pts.append(wp[-1])
    return np.asarray(pts), corners


class TimedWaypoints:
    """Per-vehicle waypoints reached at shared times, moving between them with smoothstep (rest-to-rest)."""

    def __init__(self, waypoints: np.ndarray, times: np.ndarray):
        self.wp = np.asarray(waypoints, dtype=float)  # (N, K, 3)
        self.times = np.asarray(times, dtype=float)  # (K,)

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Positions (N, 3) and velocities (N, 3) at time t."""
        k = int(np.clip(np.searchsorted(self.times, t, side="right") - 1, 0, len(self.times) - 2))
        dt = self.times[k + 1] - self.times[k]
        s, ds = smoothstep((t - self.times[k]) / dt)
        delta = self.wp[:, k + 1] - self.wp[:, k]
        return self.wp[:, k] + s * delta, delta * (ds / dt)
