"""Real-time veto (paper eq. 19-20): up while any hard constraint is violated, down after every
margin has been restored for the hold time, so a quantity oscillating around its limit cannot chatter.

Snapshot policy: vehicles report at different stamps, so each update brings every vehicle to the
newest stamp in the snapshot by constant-velocity extrapolation, capped at ``max_extrapolation_s``
(beyond that its last position is held). Vehicles silent longer than the stale timeout are a
``stale_data`` violation and leave the pairwise/position checks (their position is unknown).
Velocity missing from a sample (NaN) is the difference of the vehicle's last two samples; for the
extrapolation (not for the speed checks) it is clipped to max_speed_mps, so a position jump cannot
carry a vehicle through another one.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.safety.geometry import close_pairs, closest_approach, cpa_candidates, time_to_box_exit

#: Separation evidence lists at most this many pairs (the worst first); the count is always exact.
MAX_EVIDENCE_PAIRS = 50


@dataclass
class SafetyState:
    """Result of one update: the veto, whether it just changed, and the evidence behind it."""

    veto: bool
    changed: bool
    active: list[dict]  # one per violated constraint: constraint, uavs, value, limit, t (+ pairs, count)
    warnings: list[dict]  # predictive: cpa / time_to_geofence, never part of the veto
    snapshot_policy: str
    t: float = 0.0
    values: dict[str, dict] = field(default_factory=dict)  # current worst value and limit per checked constraint
    stale: list[str] = field(default_factory=list)
    clock_reset: bool = False


class SafetyMonitor:
    """Stateful live checker; feed it the latest sample of every vehicle at each tick."""

    def __init__(self, mission: Mission, hold_s: float | None = None, max_extrapolation_s: float = 0.1,
                 clock_jump_s: float = 0.5, history: int = 256, predict_period_s: float = 0.0):
        """predict_period_s > 0 recomputes the predictive warnings at most that often (the veto checks run
        on every update); in between, the last warnings are returned."""
        self.mission = mission
        self.hold_s = mission.thresholds.veto_hold_s if hold_s is None else float(hold_s)
        self.max_extrapolation_s = max_extrapolation_s
        self.clock_jump_s = clock_jump_s
        self.snapshot_policy = f"extrapolate to newest stamp (constant velocity, at most {max_extrapolation_s:g} s)"
        self.history: deque[dict] = deque(maxlen=history)
        self.resets = 0
        self.predict_period_s = predict_period_s
        self._ids: list[str] = []
        self._slot: dict[str, int] = {}
        self._clear()

    def _clear(self) -> None:
        self.veto = False
        self._clear_since: float | None = None
        self._last_now = -math.inf
        self._last_active: list[dict] = []
        self._warnings: list[dict] = []
        self._predicted_at = -math.inf
        n = len(self._ids)
        self._cur = np.full((n, 7), np.nan)
        self._prev = np.full((n, 7), np.nan)

    def reset(self) -> None:
        """Forget every sample and drop the veto (used on a clock jump backwards)."""
        self._ids = []
        self._slot = {}
        self._clear()

    def _rows(self, latest: dict) -> np.ndarray:
        ids = list(latest)
        if ids != self._ids:
            old = {u: k for k, u in enumerate(self._ids)}
            take = np.array([old.get(u, -1) for u in ids], dtype=int)
            cur, prev = np.full((len(ids), 7), np.nan), np.full((len(ids), 7), np.nan)
            have = take >= 0
            cur[have], prev[have] = self._cur[take[have]], self._prev[take[have]]
            self._ids, self._cur, self._prev = ids, cur, prev
            self._slot = {u: k for k, u in enumerate(ids)}
        try:  # rows of 7 (t, x, y, z, vx, vy, vz): the fast path
            rows = np.fromiter(chain.from_iterable(latest.values()), float, count=7 * len(ids)).reshape(len(ids), 7)
        except ValueError:  # some rows are (t, x, y, z)
            rows = np.array([tuple(r) + (math.nan,) * (7 - len(r)) for r in latest.values()], dtype=float)
        # NaN-safe: a vehicle seen for the first time is newer; a stamp far behind its last one is a restart
        newer = ~(rows[:, 0] <= self._cur[:, 0]) | (rows[:, 0] < self._cur[:, 0] - self.clock_jump_s)
        self._prev[newer] = self._cur[newer]
        self._cur[newer] = rows[newer]
        return rows

    def update(self, now: float, latest: dict) -> SafetyState:
        """Check the newest samples (uav -> (t, x, y, z[, vx, vy, vz])) at time `now` and step the veto."""
        clock_reset = False
        veto_before = self.veto
        if now < self._last_now - self.clock_jump_s:
            self.reset()
            self.resets += 1
            clock_reset = True
            self.history.append({"t": now, "veto": False, "event": "clock_reset", "evidence": []})
        self._last_now = max(now, self._last_now) if not clock_reset else now
        if clock_reset:  # samples stamped after the new time belong to the previous run
            latest = {u: r for u, r in latest.items() if r[0] <= now + self.clock_jump_s}
        if latest:
            self._rows(latest)
        active, warnings, values, stale = self._evaluate(now)
        if active:
            self._clear_since = None
            self._last_active = active
            if not self.veto:
                self.veto = True
                self.history.append({"t": now, "veto": True, "event": "raised", "evidence": active})
        elif self.veto:
            if self._clear_since is None:
                self._clear_since = now
            if now - self._clear_since >= self.hold_s - 1e-9:
                self.veto = False
                self.history.append({"t": now, "veto": False, "event": "cleared", "evidence": self._last_active,
                                     "restored_since": self._clear_since})
                self._clear_since = None
        return SafetyState(self.veto, self.veto != veto_before, active, warnings,
                           self.snapshot_policy, now, values, stale, clock_reset)

    def _evaluate(self, now: float) -> tuple[list[dict], list[dict], dict, list[str]]:
        c, th = self.mission.constraints, self.mission.thresholds
        ids = self._ids
        active: list[dict] = []
        predict = now - self._predicted_at >= self.predict_period_s or now < self._predicted_at
        warnings: list[dict] = []
        values: dict[str, dict] = {}
        if not ids:
            self._warnings = []
            return active, warnings, values, []
        cur = self._cur
        stamp = cur[:, 0]
        silence = np.maximum(now - stamp, 0.0)
        fresh = np.ones(len(ids), dtype=bool)
        stale: list[str] = []
        if c.stale_timeout_s is not None:
            fresh = silence <= c.stale_timeout_s
            values["stale_data"] = {"value": float(silence.max()), "limit": c.stale_timeout_s}
            if not fresh.all():
                bad = np.flatnonzero(~fresh)
                stale = sorted(ids[k] for k in bad)
                active.append({"constraint": "stale_data", "uavs": stale, "value": float(silence[bad].max()),
                               "limit": c.stale_timeout_s, "t": now, "count": len(bad)})
        idx = np.flatnonzero(fresh)
        if not len(idx):
            self._warnings = []
            return active, warnings, values, stale
        every = len(idx) == len(ids)  # the usual case: plain views, no fancy-index copies
        pos, vel = (cur[:, 1:4], cur[:, 4:7].copy()) if every else (cur[idx, 1:4], cur[idx, 4:7].copy())
        missing = ~np.isfinite(vel).all(axis=1)
        if missing.any():
            prev = self._prev[idx[missing]]
            dt = cur[idx[missing], 0] - prev[:, 0]
            ok = np.isfinite(prev[:, :4]).all(axis=1) & (dt > 0)
            derived = np.zeros((int(missing.sum()), 3))
            derived[ok] = (cur[idx[missing]][ok, 1:4] - prev[ok, 1:4]) / dt[ok, None]
            vel[missing] = derived
        stamps = stamp if every else stamp[idx]
        t_ref = float(stamps.max())
        ahead = np.clip(t_ref - stamps, 0.0, self.max_extrapolation_s)
        speed = np.sqrt(np.einsum("ij,ij->i", vel, vel))
        if ahead.any():
            ext = vel
            if c.max_speed_mps is not None:  # a position jump must not carry a vehicle through another one
                ext = vel * np.minimum(1.0, c.max_speed_mps / np.maximum(speed, 1e-12))[:, None]
            pos = pos + ext * ahead[:, None]
        names = ids if every else [ids[k] for k in idx]

        for name, limit, q in (("max_speed", c.max_speed_mps, lambda: speed),
                               ("max_vertical_speed", c.max_vertical_speed_mps, lambda: np.abs(vel[:, 2]))):
            if limit is None:
                continue
            qv = q()
            values[name] = {"value": float(qv.max()), "limit": limit}
            bad = np.flatnonzero(qv > limit)
            if len(bad):
                active.append({"constraint": name, "uavs": sorted(names[k] for k in bad),
                               "value": float(qv[bad].max()), "limit": limit, "t": t_ref, "count": len(bad)})

        fence = c.geofence
        if fence is not None:
            out = fence.outside_distance(pos)
            values["geofence"] = {"value": float(out.max()), "limit": 0.0}
            bad = np.flatnonzero(out > 0)
            if len(bad):
                active.append({"constraint": "geofence", "uavs": sorted(names[k] for k in bad),
                               "value": float(out[bad].max()), "limit": 0.0, "t": t_ref, "count": len(bad)})
            tte = time_to_box_exit(pos, vel, fence) if predict else np.full(len(pos), np.inf)
            for k in np.flatnonzero((out <= 0) & (tte <= th.prediction_horizon_s)):
                warnings.append({"t": t_ref, "kind": "time_to_geofence", "uavs": [names[k]], "value": float(tte[k]),
                                 "limit": th.prediction_horizon_s, "t_predicted": t_ref + float(tte[k])})

        limit = c.min_separation_m
        if limit is not None and len(idx) >= 2:
            i, j, d = close_pairs(pos, limit)
            if predict:
                ci, cj, cd = cpa_candidates(pos, vel, limit, th.prediction_horizon_s)
            else:
                ci = cj = np.zeros(0, dtype=np.intp)
                cd = np.zeros(0)
            near = np.concatenate([d, cd])
            values["min_separation"] = {"value": float(near.min()) if len(near) else None, "limit": limit}
            bad = d < limit
            if bad.any():
                order = np.argsort(d[bad])
                bi, bj, bd = i[bad][order], j[bad][order], d[bad][order]
                pairs = [sorted((names[a], names[b])) for a, b in zip(bi[:MAX_EVIDENCE_PAIRS],
                                                                      bj[:MAX_EVIDENCE_PAIRS], strict=True)]
                involved = sorted({names[k] for k in np.concatenate([bi, bj])})
                active.append({"constraint": "min_separation", "uavs": involved, "value": float(bd[0]),
                               "limit": limit, "t": t_ref, "count": int(bad.sum()), "pairs": pairs})
            ok = cd >= limit  # pairs already violating are evidence, not predictions
            if ok.any():
                oi, oj = ci[ok], cj[ok]
                tc, dc = closest_approach(pos[oj] - pos[oi], vel[oj] - vel[oi], th.prediction_horizon_s)
                for k in np.flatnonzero(dc < limit):
                    warnings.append({"t": t_ref, "kind": "cpa", "uavs": sorted((names[oi[k]], names[oj[k]])),
                                     "value": float(dc[k]), "limit": limit, "t_predicted": t_ref + float(tc[k])})
        if predict:
            self._warnings, self._predicted_at = warnings, now
        return active, self._warnings, values, stale

    def would_violate(self, uav: str, sample) -> bool:
        """Cheap O(N) pre-check of one new sample against the last snapshot (speed, fence, separation).

        Lets a node run the full update the moment a breaking pose arrives instead of at the next tick;
        scalar maths in plain Python because it runs once per incoming message.
        """
        c = self.mission.constraints
        t, x, y, z = float(sample[0]), float(sample[1]), float(sample[2]), float(sample[3])
        slot = self._slot.get(uav, -1)
        if slot < 0:  # not in the last snapshot yet: only a full update can tell
            return True
        vel = tuple(float(v) for v in sample[4:7]) if len(sample) >= 7 else (math.nan,) * 3
        if not all(math.isfinite(v) for v in vel):
            lt, lx, ly, lz = self._cur[slot, :4].tolist()
            dt = t - lt
            vel = ((x - lx) / dt, (y - ly) / dt, (z - lz) / dt) if dt > 0 else (0.0, 0.0, 0.0)
        if all(math.isfinite(v) for v in vel):
            if c.max_speed_mps is not None and math.hypot(*vel) > c.max_speed_mps:
                return True
            if c.max_vertical_speed_mps is not None and abs(vel[2]) > c.max_vertical_speed_mps:
                return True
        fence = c.geofence
        if fence is not None:
            lo, hi = fence.min, fence.max
            if not (lo[0] <= x <= hi[0] and lo[1] <= y <= hi[1] and lo[2] <= z <= hi[2]):
                return True
            if fence.polygon and float(fence.outside_distance(np.array([x, y, z]))) > 0:
                return True
        limit = c.min_separation_m
        if limit is not None and len(self._ids) > 1:
            diff = self._cur[:, 1:4] - (x, y, z)
            d2 = np.einsum("ij,ij->i", diff, diff)
            d2[slot] = np.inf
            return bool((d2 < limit * limit).any())  # NaN rows (never seen) compare False
        return False
