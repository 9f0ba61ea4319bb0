"""Real-time veto (paper eq. 19-20): up while any hard constraint is violated, down after every
margin has been restored for the hold time, so a quantity oscillating around its limit cannot chatter.

Snapshot policy: vehicles report at different stamps, so each update brings every vehicle to the newest stamp in
the snapshot by constant-velocity extrapolation, capped at ``max_extrapolation_s`` (beyond that its last position is
held). Vehicles silent longer than the stale timeout are a ``stale_data`` violation and leave the pairwise/position
checks (their position is unknown). With ``close_on_quiet`` (or after :meth:`SafetyMonitor.end_flight`) a vehicle is
stale only when the others kept reporting for longer than the stale timeout after its last sample: vehicles that go
quiet together with the last one (a replay or simulator that stops) have *ended* their flight, not failed, while one
vehicle silent mid-flight still vetoes.
Velocity missing from a sample (NaN) is the difference of the vehicle's last two samples; for the extrapolation
(not for the speed checks) it is clipped to max_speed_mps, so a position jump cannot carry a vehicle through another.

State lives in preallocated arrays, one row ("slot") per vehicle, so a live node stores each pose in O(1)
(:meth:`SafetyMonitor.observe`) and a check reads the arrays without converting anything.
"""

from __future__ import annotations

import math
from collections import deque
from itertools import chain

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.quality.jumps import STEP_FACTOR, STEP_SPEED_MPS
from uav_debate_eval.rules.monitor import RuleMonitor
from uav_debate_eval.safety.near_index import CellIndex
from uav_debate_eval.safety.parked import LiveParking
from uav_debate_eval.safety.periods import SlotPeriods
from uav_debate_eval.safety.snapshot_checks import check_snapshot
from uav_debate_eval.safety.state import SafetyState

_NAN_ROW = (math.nan,) * 7


class SafetyMonitor:
    """Stateful live checker: feed samples with :meth:`observe` (or a dict to :meth:`update`), check with update."""

    def __init__(self, mission: Mission, hold_s: float | None = None, max_extrapolation_s: float = 0.1,
                 clock_jump_s: float = 0.5, history: int = 256, predict_period_s: float = 0.0,
                 close_on_quiet: bool = True, rule_period_s: float = 0.02):
        """predict_period_s > 0 recomputes the predictive warnings at most that often (the veto checks run on every
        update); in between, the last warnings are returned. close_on_quiet: every vehicle going quiet together ends
        the flight (else only `end_flight` does). rule_period_s: the grid step of the mission rules' online monitor
        (a hard rule failing is a violation `rule:<id>`, a soft one a warning)."""
        self.rule_period_s, self.close_on_quiet, self.mission = rule_period_s, close_on_quiet, mission
        self.hold_s = mission.thresholds.veto_hold_s if hold_s is None else float(hold_s)
        self.max_extrapolation_s = max_extrapolation_s
        self.clock_jump_s = clock_jump_s
        self.snapshot_policy = f"extrapolate to newest stamp (constant velocity, at most {max_extrapolation_s:g} s)"
        self.history: deque[dict] = deque(maxlen=history)
        self.resets = 0
        self.predict_period_s = predict_period_s
        #: an implied speed between two samples above this is a position jump (a glitch, or a real emergency)
        self.jump_mps = STEP_FACTOR * limit if (limit := mission.constraints.max_speed_mps) else STEP_SPEED_MPS
        separation = mission.constraints.min_separation_m
        #: the stored positions by cell, for the per-pose separation pre-check (None: separation not checked)
        self._near = CellIndex(2 * separation) if separation else None
        self._parking = LiveParking()  # the autopilots' arming and land detectors (safety.parked), kept by a reset
        self.reset()

    def reset(self) -> None:
        """Forget every sample and drop the veto (used on a clock jump backwards)."""
        self.veto = False
        self.end_announced = False
        self.ended: list[str] = []
        self._clear_since: float | None = None
        self._last_now = -math.inf
        self._last_active: list[dict] = []
        self._warnings: list[dict] = []
        self._predicted_at = -math.inf
        self._ids: list[str] = []  # slot -> vehicle
        self._slot: dict[str, int] = {}
        self._keys: list[str] = []  # key order of the last dict given to update, and its slots
        self._take = np.zeros(0, dtype=np.intp)
        self._near_stale = True  # the cell index must be rebuilt from the arrays before it is read
        self._generation = 0  # counts the stores of samples: a check reuses its motion checks while it stands
        self._motion_key: tuple | None = None
        self._motion: tuple[list[dict], dict[str, dict], np.ndarray] = ([], {}, np.zeros((0, 3)))
        self._cur = np.full((0, 7), np.nan)  # newest sample per slot: t, x, y, z, vx, vy, vz (NaN: no velocity)
        self._vel = np.zeros((0, 3))  # velocity the checks use: reported, else derived from the last two samples
        self._live = np.zeros(0, dtype=bool)  # slot holds a vehicle the monitor currently tracks
        self._jump = np.zeros(0, dtype=bool)  # the newest sample jumped from the one before faster than flight
        self._periods = SlotPeriods()  # each slot's typical interval: a burst's step is no speed
        self._parking.clear()
        self.rules = RuleMonitor(self.mission.rules, self.rule_period_s, self.mission.constraints.geofence) \
            if self.mission.rules else None

    def _new_slot(self, uav: str) -> int:
        k = len(self._ids)
        if k == len(self._cur):  # grow geometrically: amortised O(1) per new vehicle
            extra = max(16, k)
            self._cur = np.concatenate([self._cur, np.full((extra, 7), np.nan)])
            self._vel = np.concatenate([self._vel, np.zeros((extra, 3))])
            self._live, self._jump = (np.concatenate([a, np.zeros(extra, bool)]) for a in (self._live, self._jump))
            self._periods.grow(extra)
            self._parking.grow(extra)
        self._ids.append(uav)
        self._slot[uav] = k
        self._parking.place(k, uav)
        return k

    def set_armed(self, uav: str, armed: bool) -> None:
        """A vehicle's arming as its autopilot reports it (two disarmed ones are no pair: safety.parked)."""
        self._generation += self._parking.report(uav, self._slot.get(uav), armed=armed)  # the checks are stale

    def set_landed(self, uav: str, landed: bool) -> None:
        """A vehicle's land detector as its autopilot reports it (armed on its pad it is parked too)."""
        self._generation += self._parking.report(uav, self._slot.get(uav), landed=landed)

    def restart(self, uav: str) -> None:
        """The vehicle's frame moved (placed by its fixes): its next sample is no step from the one before."""
        if (k := self._slot.get(uav)) is not None:
            self._cur[k, 1:4] = np.nan

    def observe(self, uav: str, sample) -> None:
        """Store one vehicle's sample (t, x, y, z[, vx, vy, vz]) in its slot: O(1), for a per-message callback.

        A sample replaces the newest one when its stamp is later, or more than clock_jump_s earlier (a restart).
        """
        k = self._slot.get(uav)
        if k is None:
            k = self._new_slot(uav)
        row = self._cur[k]
        t = float(sample[0])
        last = float(row[0])
        if t <= last and not t < last - self.clock_jump_s:  # NaN (never seen): both False, taken
            return
        lt, lx, ly, lz = row[:4].tolist()
        full = tuple(sample) + _NAN_ROW[len(sample):]
        row[:] = full
        self._live[k] = True
        self._generation += 1
        x, y, z = float(full[1]), float(full[2]), float(full[3])
        if self._near is not None and not self._near_stale:
            self._near.move(k, x, y, z)
        dt = t - lt
        moved = dt > 0 and math.isfinite(lx) and math.isfinite(ly) and math.isfinite(lz)  # NaN lt: dt NaN, not > 0
        if moved:
            dt = self._periods.interval(k, dt)
        implied = ((x - lx) / dt, (y - ly) / dt, (z - lz) / dt) if moved else (0.0, 0.0, 0.0)
        self._jump[k] = math.hypot(*implied) > self.jump_mps
        vx, vy, vz = float(full[4]), float(full[5]), float(full[6])
        self._vel[k] = (vx, vy, vz) if math.isfinite(vx) and math.isfinite(vy) and math.isfinite(vz) else implied

    def observe_many(self, uavs: list[str], t: float, positions: np.ndarray) -> int:
        """:meth:`observe` of many vehicles at one stamp without velocities (a PoseArray), in one vectorised
        pass; returns how many were stored (the others are not newer than what their slot holds)."""
        slots = np.array([self._slot[u] if u in self._slot else self._new_slot(u) for u in uavs], dtype=np.intp)
        last = self._cur[slots, 0]
        newer = ~(t <= last) | (t < last - self.clock_jump_s)  # as observe: NaN (never seen) is newer
        k, pos = slots[newer], positions[newer]
        if not len(k):
            return 0
        prev = self._cur[k, :4]
        self._cur[k] = np.nan
        self._cur[k, 0] = t
        self._cur[k, 1:4] = pos
        self._live[k] = True
        self._generation += 1
        self._near_stale = True
        dt = t - prev[:, 0]
        moved = (dt > 0) & np.isfinite(prev[:, 1:4]).all(axis=1)  # NaN dt (never seen) is not > 0
        dt = self._periods.intervals(k, dt, moved)
        with np.errstate(invalid="ignore", divide="ignore"):
            implied = np.where(moved[:, None], (pos - prev[:, 1:4]) / np.where(moved, dt, 1.0)[:, None], 0.0)
        self._jump[k] = np.sqrt((implied * implied).sum(axis=1)) > self.jump_mps
        self._vel[k] = implied
        return len(k)

    def _ingest(self, latest: dict) -> None:
        """Dict form: the vehicles in `latest` are the swarm (others are forgotten), newer rows replace the old."""
        keys = list(latest)
        if keys != self._keys:
            take = np.array([self._slot[u] if u in self._slot else self._new_slot(u) for u in keys], dtype=np.intp)
            gone = np.ones(len(self._ids), dtype=bool)
            gone[take] = False
            gone &= self._live[:len(self._ids)]
            self._cur[:len(gone)][gone] = np.nan
            self._vel[:len(gone)][gone] = 0.0
            self._live[:len(gone)][gone] = False
            self._keys, self._take = keys, take
        take = self._take
        self._generation += 1
        self._near_stale = True  # many rows change at once: rebuilt when a pre-check next reads it
        try:  # rows of 7 (t, x, y, z, vx, vy, vz): the fast path
            rows = np.fromiter(chain.from_iterable(latest.values()), float, count=7 * len(keys)).reshape(len(keys), 7)
        except ValueError:  # some rows are (t, x, y, z)
            rows = np.array([tuple(r) + _NAN_ROW[len(r):] for r in latest.values()], dtype=float)
        last = self._cur[take, 0]
        # NaN-safe: a vehicle seen for the first time is newer; a stamp far behind its last one is a restart
        newer = ~(rows[:, 0] <= last) | (rows[:, 0] < last - self.clock_jump_s)
        self._live[take] = True
        if not newer.any():
            return
        k, new = take[newer], rows[newer]
        prev = self._cur[k]
        self._cur[k] = new
        dt = new[:, 0] - prev[:, 0]
        moved = (dt > 0) & np.isfinite(prev[:, 1:4]).all(axis=1)  # NaN dt (never seen) is not > 0
        dt = self._periods.intervals(k, dt, moved)
        with np.errstate(invalid="ignore", divide="ignore"):
            implied = np.where(moved[:, None], (new[:, 1:4] - prev[:, 1:4]) / np.where(moved, dt, 1.0)[:, None], 0.0)
        self._jump[k] = np.sqrt((implied * implied).sum(axis=1)) > self.jump_mps
        vel = new[:, 4:7].copy()
        missing = ~np.isfinite(vel).all(axis=1)
        vel[missing] = implied[missing]
        self._vel[k] = vel

    def end_flight(self) -> None:
        """The publisher announced the end of its flight: once every vehicle is quiet, their silence is the
        end of the flight, not stale data (also with close_on_quiet off). A clock reset forgets it."""
        self.end_announced = True

    def latest(self) -> dict[str, np.ndarray]:
        """The newest sample of every tracked vehicle as (t, x, y, z, vx, vy, vz), in slot order."""
        return {u: self._cur[k].copy() for k, u in enumerate(self._ids) if self._live[k]}

    def update(self, now: float, latest: dict | None = None, unverified: list[dict] | None = None) -> SafetyState:
        """Check the stored samples (plus `latest`, uav -> (t, x, y, z[, vx, vy, vz])) at `now`; step the veto.

        `unverified`: rows (constraint `verifier_degraded`) saying the caller cannot vouch for these samples (it
        fell behind the stream, lost poses, stalled); they hold the veto up like a violation (fail-safe)."""
        clock_reset = False
        veto_before = self.veto
        if now < self._last_now - self.clock_jump_s:
            kept = self.latest() if latest is None else latest
            self.reset()
            self.resets += 1
            clock_reset = True
            self.history.append({"t": now, "veto": False, "event": "clock_reset", "evidence": []})
            # samples stamped after the new time belong to the previous run
            latest = {u: r for u, r in kept.items() if r[0] <= now + self.clock_jump_s}
        self._last_now = max(now, self._last_now) if not clock_reset else now
        if latest:
            self._ingest(latest)
        active, warnings, values, stale = self._evaluate(now)
        if unverified:
            active = active + unverified
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
                           self.snapshot_policy, now, values, stale, clock_reset, list(self.ended),
                           self._data_quality(active, now), self.rules.status() if self.rules is not None else [])

    def _data_quality(self, active: list[dict], now: float) -> list[dict]:
        """Vehicles whose newest sample jumped faster than a vehicle flies: named apart, and on the evidence of
        the violations they take part in, so an operator can tell a glitch from a hazard (the veto stays)."""
        n = len(self._ids)
        jumped = np.flatnonzero(self._jump[:n] & self._live[:n])
        if not len(jumped):
            return []
        uavs = sorted(self._ids[k] for k in jumped.tolist())
        for a in active:
            if set(a["uavs"]) & set(uavs):
                a["data_quality"] = "position_jump"
        return [{"kind": "position_jump", "uavs": uavs, "t": now, "limit": self.jump_mps}]

    def _evaluate(self, now: float) -> tuple[list[dict], list[dict], dict, list[str]]:
        """Every hard constraint over the stored slots; the no-violation path has no Python loop over vehicles."""
        c = self.mission.constraints
        ids, n = self._ids, len(self._ids)
        active: list[dict] = []
        predict = now - self._predicted_at >= self.predict_period_s or now < self._predicted_at
        warnings: list[dict] = []
        values: dict[str, dict] = {}
        live = self._live[:n]
        if not live.any():
            self._warnings = []
            return active, warnings, values, []
        all_live = bool(live.all())
        cur = self._cur[:n]
        stamp = cur[:, 0]
        fresh = live
        stale: list[str] = []
        self.ended = []
        if c.stale_timeout_s is not None:
            silence = np.maximum(now - stamp, 0.0)  # NaN in free slots: neither fresh nor stale
            fresh = silence <= c.stale_timeout_s
            values["stale_data"] = {"value": float(silence.max() if all_live else silence[live].max()),
                                    "limit": c.stale_timeout_s}
            if not (all_live and fresh.all()):
                quiet = live & ~fresh & ~self._parking.off[:n]  # a disarmed one's silence loses no flight
                if self.close_on_quiet or self.end_announced:
                    # stale only when the others kept reporting past this vehicle's timeout; quiet vehicles
                    # that stopped with the last one have ended their flight once nobody reports any more
                    left_behind = quiet & (np.nanmax(stamp[live]) - stamp > c.stale_timeout_s)
                    if not (live & fresh).any():
                        self.ended = sorted(ids[k] for k in np.flatnonzero(quiet & ~left_behind).tolist())
                    quiet = left_behind
                silent = np.flatnonzero(quiet)
                if len(silent):
                    stale = sorted(ids[k] for k in silent.tolist())
                    active.append({"constraint": "stale_data", "uavs": stale, "value": float(silence[silent].max()),
                                   "limit": c.stale_timeout_s, "t": now, "count": len(silent)})
        every = all_live and bool(fresh.all())  # the usual case: plain views, no copies
        key = (self._generation, n, True if every else fresh.tobytes())
        if key != self._motion_key or predict:  # new samples, a vehicle turned stale, warnings due: else as before
            self._motion_key = key
            self._motion = self._moving(now, fresh, every, predict)
        moving, moving_values, full = self._motion
        active += [dict(a) for a in moving]
        values.update(moving_values)
        if self.rules is not None:
            hard, soft = self._rules(now, full, fresh & live)
            return active + hard, self._warnings + soft, values, stale
        return active, self._warnings, values, stale

    def _moving(self, now: float, fresh: np.ndarray, every: bool, predict: bool
                ) -> tuple[list[dict], dict[str, dict], np.ndarray]:
        """Speed, fence and separation of the fresh vehicles (extrapolated to the newest stamp), the predictive
        warnings when due, and the positions the rules read. Depends on the samples and `fresh` only: a check
        with neither changed (a 50-Hz check between a show's 10-Hz pose arrays) reuses it."""
        ids, n = self._ids, len(self._ids)
        cur = self._cur[:n]
        stamp = cur[:, 0]
        if every:
            pos, vel, stamps = cur[:, 1:4], self._vel[:n], stamp

            def names(rows: np.ndarray) -> list[str]:
                return [ids[k] for k in rows.tolist()]
        else:
            idx = np.flatnonzero(fresh)
            if not len(idx):
                self._warnings = []
                return [], {}, cur[:, 1:4].copy()
            pos, vel, stamps = cur[idx, 1:4], self._vel[:n][idx], stamp[idx]

            def names(rows: np.ndarray) -> list[str]:
                return [ids[k] for k in idx[rows].tolist()]
        parked = self._parking.parked[:n] if every else self._parking.parked[:n][idx]
        active, warnings, values, pos = check_snapshot(self.mission, pos, vel, stamps, parked, names, predict,
                                                       self.max_extrapolation_s)
        if predict:
            self._warnings, self._predicted_at = warnings, now
        full = cur[:, 1:4].copy()
        full[fresh if not every else slice(None)] = pos
        return active, values, full

    def _rules(self, now: float, pos: np.ndarray, fresh: np.ndarray) -> tuple[list[dict], list[dict]]:
        """The mission rules on this snapshot (RuleMonitor): a hard rule whose newest decided step fails is a
        violation `rule:<id>` (it raises the veto), a soft one a warning; each names its decision delay."""
        assert self.rules is not None
        n = len(self._ids)
        self.rules.update(now, self._ids, pos, self._vel[:n], fresh)
        hard, soft = [], []
        for f in self.rules.failing():
            row = {"constraint": f"rule:{f.rule.id}", "uavs": f.uavs, "value": f.value, "limit": 0.0, "t": f.t,
                   "count": f.count, "delay_s": f.delay_s}
            if f.rule.severity == "hard":
                hard.append(row)
            else:
                soft.append({**row, "kind": f"rule:{f.rule.id}", "t_predicted": f.t})
        return hard, soft

    def would_violate(self, uav: str, sample) -> bool:
        """Cheap pre-check of one new sample against the stored state (speed, fence, separation).

        Lets a node run the full update the moment a breaking pose arrives instead of at the next tick;
        scalar maths in plain Python because it runs once per incoming message, and the separation read from
        the neighbouring cells only (`CellIndex`). Call it before :meth:`observe` stores the sample (a missing
        velocity comes from the stored one). A vehicle not tracked yet is judged on what one sample tells (its
        position, a velocity it carries): at a show's start 1,000 vehicles appear at once, and a full check for
        each of them stalled the verifier for seconds.
        """
        c = self.mission.constraints
        t, x, y, z = float(sample[0]), float(sample[1]), float(sample[2]), float(sample[3])
        slot = self._slot.get(uav, -1)
        tracked = slot >= 0 and bool(self._live[slot])
        vx, vy, vz = (float(sample[4]), float(sample[5]), float(sample[6])) if len(sample) >= 7 else (math.nan,) * 3
        known = math.isfinite(vx) and math.isfinite(vy) and math.isfinite(vz)
        if tracked and not known:
            lt, lx, ly, lz = self._cur[slot, :4].tolist()
            dt = t - lt
            vx, vy, vz = ((x - lx) / dt, (y - ly) / dt, (z - lz) / dt) if dt > 0 else (0.0, 0.0, 0.0)
            known = math.isfinite(vx) and math.isfinite(vy) and math.isfinite(vz)
        if known:
            if c.max_speed_mps is not None and math.hypot(vx, vy, vz) > c.max_speed_mps:
                return True
            if c.max_vertical_speed_mps is not None and abs(vz) > c.max_vertical_speed_mps:
                return True
        fence = c.geofence
        if fence is not None:
            lo, hi = fence.min, fence.max
            if not (lo[0] <= x <= hi[0] and lo[1] <= y <= hi[1] and lo[2] <= z <= hi[2]):
                return True
            if fence.polygon and float(fence.outside_distance(np.array([x, y, z]))) > 0:
                return True
        limit = c.min_separation_m
        if self._near is None or limit is None:
            return False
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            return False  # a position that is not a number is no pose (the verifier's swarm rejects it first)
        if self._near_stale:
            self._rebuild_near()
        near = self._near.within(x, y, z, limit, skip=slot)
        if self._parking.parked[slot] if slot >= 0 else self._parking.is_parked(uav):  # (a first pose: known before)
            return any(not self._parking.parked[k] for k in near)
        return next(near, None) is not None

    def _rebuild_near(self) -> None:
        assert self._near is not None
        self._near.clear()
        n = len(self._ids)
        for k, (x, y, z) in enumerate(self._cur[:n, 1:4].tolist()):
            self._near.move(k, x, y, z)
        self._near_stale = False
