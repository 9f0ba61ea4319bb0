"""The live verifier's per-pose rules without ROS: pre-check, mute, reset on a backwards jump, overdue checks.

The safety_verifier node feeds every pose to `LiveVerifier.on_pose` and calls `check` from its timer; what the node
publishes follows from the `SafetyState` each check returns (`on_check`). Each incoming pose is stored in the
monitor's arrays in O(1) after an O(N) pre-check; a pose that breaks a constraint runs the full kd-tree check at
once, so the veto rises within one message of the breaking pose and a burst of ordinary poses costs no full checks.
A pose arriving when the periodic check is overdue runs it itself, so a timer that fires late cannot hide a silent
vehicle. Checks run in the stream's time and the verifier says when it cannot vouch for the swarm
(`safety.health`): in fail-safe mode `veto` that raises the veto with the reason `verifier_degraded`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.records import CONSTRAINT_NAMES
from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.track import MAX_SPEED_MPS, positions_ok
from uav_debate_eval.safety.health import DEGRADED, FAIL_SAFE_MODES, MAX_LAG_S, CheckTimes, HealthReport, VerifierHealth
from uav_debate_eval.safety.monitor import SafetyMonitor, SafetyState
from uav_debate_eval.safety.status import StatusRow, status_rows, unheard_vehicles

#: After a pre-check the full check did not confirm, that vehicle's poses wait for the periodic check this long.
MUTE_S = 0.1


class LiveVerifier:
    """One live veto: a `SafetyMonitor` fed pose by pose, with the rules that decide when to run its full check.

    `clock()` gives the current (ROS or sim) time; the checks run at its stream time (`VerifierHealth.now`).
    `on_check(state)` sees every check's result (the node publishes on `state.changed`); `warn(text)` reports a
    state reset; `monotonic()` paces the periodic check and times the check loop. `fail_safe`: `veto` raises the
    veto while the verifier is degraded, `warn` only says so on the status.
    """

    def __init__(self, mission: Mission, monitor: SafetyMonitor, check_period_s: float, clock: Callable[[], float],
                 on_check: Callable[[SafetyState], None], warn: Callable[[str], None],
                 monotonic: Callable[[], float] = time.monotonic, fail_safe: str = "veto",
                 max_lag_s: float = MAX_LAG_S) -> None:
        if fail_safe not in FAIL_SAFE_MODES:
            raise ValueError(f"fail_safe: expected one of {', '.join(FAIL_SAFE_MODES)}, got {fail_safe!r}")
        self.fail_safe = fail_safe
        self.health = VerifierHealth(max_lag_s, mission.constraints.stale_timeout_s,
                                     max_check_gap_s=max(max_lag_s, 2 * check_period_s))
        self.health_report = HealthReport()
        self.check_times = CheckTimes()
        self.mission = mission
        self.monitor = monitor
        self.check_period_s = check_period_s
        self.swarm = StreamingSwarm(capacity=4)
        self.poses_received = 0
        self.state: SafetyState | None = None
        self._clock = clock
        self._on_check = on_check
        self._warn = warn
        self._monotonic = monotonic
        self._swarm_resets = 0
        self._clock_back_seen = 0  # swarm.rejected["clock_back"] when last looked at
        self._clock_back_by: dict[str, int] = {}
        self._muted_until: dict[str, float] = {}
        self._check_due = -math.inf  # monotonic time of the next full check (periodic or overdue pose)
        self._first_pose_t = math.inf

    def limit(self, constraint: str) -> object:
        """The mission's limit of one constraint (None: not checked)."""
        c = self.mission.constraints
        return {"min_separation": c.min_separation_m, "max_speed": c.max_speed_mps,
                "max_vertical_speed": c.max_vertical_speed_mps, "geofence": c.geofence,
                "stale_data": c.stale_timeout_s,
                "attitude_control": None}[constraint]  # poses carry no attitude target: checked offline

    def checked(self) -> list[str]:
        return [k for k in CONSTRAINT_NAMES if self.limit(k) is not None]

    def on_pose(self, uav: str, t: float, pos: Sequence[float], vel: Sequence[float] | None) -> None:
        sample = self._store(uav, t, pos, vel, self._clock())
        if sample is None:
            return
        # pre-check against the stored state before storing (a missing velocity comes from the last sample)
        breaking = (not self.monitor.veto and t >= self._muted_until.get(uav, -math.inf)
                    and self.monitor.would_violate(uav, sample))
        self.monitor.observe(uav, sample)
        # a breaking pose not confirmed by the full check (e.g. near the limit) leaves that vehicle to the timer
        if breaking and not self.check().veto:
            self._muted_until[uav] = t + MUTE_S
        elif self._monotonic() >= self._check_due:
            # The check timer is late. rclpy's EventsExecutor (7.1) queues timers behind the poses already
            # waiting, and under use_sim_time it dispatched a timer several times at once, then not at all for
            # up to 2 s of sim time beside a busy pose stream on a loaded machine
            # (benchmarks/bench_timer_ticks.py): long enough to miss a vehicle's silence. The poses of the
            # others keep it checked.
            self.check()

    def on_poses(self, t: float, uavs: Sequence[str], positions: np.ndarray) -> None:
        """Many vehicles at one stamp (a PoseArray): stored in one pass, checked once, then counted. The array is
        one instant: one kd-tree check of it costs less than a pre-check per pose (1,000 at a show), and storing
        it whole before the per-pose bookkeeping puts the veto out ~10 ms sooner."""
        arrival = self._clock()
        newest = self.swarm.newest_t
        if not self.health.started or not newest - self.swarm.clock_jump_s <= t <= newest + self.swarm.clock_jump_s:
            # a run's first poses, stamps jumping back or ahead: pose by pose, as they reset the state or wait
            stored = False
            for uav, pos in zip(uavs, positions.tolist(), strict=True):
                sample = self._store(uav, t, pos, None, arrival)
                if sample is not None:
                    self.monitor.observe(uav, sample)
                    stored = True
            if stored:
                self.check()
            return
        finite = positions_ok(positions)  # what the swarm stores: no NaN, no 1e308
        if self.monitor.observe_many([u for u, ok in zip(uavs, finite.tolist(), strict=True) if ok], t,
                                     positions[finite]):
            self.check()
        for uav, pos in zip(uavs, positions.tolist(), strict=True):
            self._store(uav, t, pos, None, arrival)  # counts, rejections and the verifier's health

    def _store(self, uav: str, t: float, pos: Sequence[float], vel: Sequence[float] | None,
               arrival: float) -> tuple | None:
        """Count and validate one pose (processed at the verifier's clock `arrival`), reset on a new run, feed the
        health: the sample to store (None: rejected)."""
        self.poses_received += 1
        stored = self.swarm.add(uav, t, pos, vel)
        if self.swarm.rejected.get("clock_back", 0) != self._clock_back_seen:
            self._clocks_went_back()
        if not stored and not self.swarm.settled:
            return None  # rejected (NaN, duplicate, out of order) or waiting (a stamp ahead): counted by the swarm
        if self.swarm.resets != self._swarm_resets:  # this pose starts a new run: forget the old one first
            self._swarm_resets = self.swarm.resets
            self.health.reset()  # the monitor too, below: this pose is the new run's first
            self._first_pose_t = math.inf  # the new run starts here
            self._muted_until.clear()
            self._warn("safety verifier: pose stamps jumped backwards (bag loop?): state reset")
        if not self.health.started:
            # a run's first pose: nothing of an earlier run is kept, and the checks move from the verifier's clock
            # to the stream's (no backwards clock jump)
            self.monitor.reset()
        while self.swarm.settled:  # samples that waited for the next one to place them on the stream's clock
            s_uav, s_t, s_x, s_y, s_z, s_vel = self.swarm.settled.popleft()
            self._first_pose_t = min(self._first_pose_t, s_t)
            self.health.on_pose(s_uav, s_t, arrival)
            self.monitor.observe(s_uav, _sample(s_t, (s_x, s_y, s_z), s_vel))
        if not stored:
            return None
        self._first_pose_t = min(self._first_pose_t, t)
        self.health.on_pose(uav, t, arrival)
        return _sample(t, pos, vel)

    def _clocks_went_back(self) -> None:
        """Vehicles whose clocks restarted alone (swarm.clock_back): their poses are not checked; the health counts
        them lost at the stream's clock, so the fail-safe names them for as long as they come."""
        self._clock_back_seen = self.swarm.rejected.get("clock_back", 0)
        for uav, (count, back_s) in self.swarm.clock_back.items():
            new = count - self._clock_back_by.get(uav, 0)
            if new <= 0:
                continue
            self._clock_back_by[uav] = count
            self.health.on_lost(uav, new, at=self.swarm.newest_t)
            if count == new:  # its first: said once
                self._warn(f"safety verifier: {uav}'s pose stamps went back {back_s:.3g} s while the others' went "
                           "on (its clock restarted?): its poses cannot be placed on the stream's clock and are not "
                           "checked")

    def on_lost(self, uav: str, count: int) -> None:
        """The transport lost `count` poses of `uav` before they reached the verifier (DDS sample-lost event)."""
        self.health.on_lost(uav, count)

    def check(self) -> SafetyState:
        """Full check at the stream's current time; `on_check` sees the result (not timed: publishing)."""
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        state = self._check()
        self.check_times.add(time.perf_counter() - wall0, time.thread_time() - cpu0)
        self._on_check(state)
        return state

    def _check(self) -> SafetyState:
        mono = self._monotonic()
        self._check_due = mono + self.check_period_s
        now = self.health.now(self._clock())
        live = self.state is not None and not self.monitor.end_announced and not self.state.ended
        report = self.health.check(now, mono, live and bool(self.swarm.rings))
        self.health_report = report
        unverified = [{"constraint": DEGRADED, "uavs": sorted({u for r in report.reasons for u in r["uavs"]}),
                       "value": report.lag_s, "limit": self.health.max_lag_s, "t": now,
                       "reasons": report.reasons}] if report.degraded and self.fail_safe == "veto" else None
        state = self.monitor.update(now, unverified=unverified)
        if state.clock_reset:
            self.swarm.reset()
            self.health.reset()
            self._first_pose_t = math.inf
            self._muted_until.clear()
            self._warn("safety verifier: clock jumped backwards: state reset")
        self.state = state
        return state

    def status(self, expected: Sequence[str]) -> list[StatusRow]:
        """The status table of the last check (empty before the first); `expected`: vehicles the node listens to."""
        state = self.state
        if state is None:
            return []
        limits = {name: self.limit(name) for name in CONSTRAINT_NAMES}
        self.health_report.check_ms = self.check_times.summary()
        unheard = unheard_vehicles(list(expected), set(self.swarm.rings), state.t - self._first_pose_t,
                                   self.mission.constraints.stale_timeout_s)
        return status_rows(state, limits, {"vehicles": str(len(self.swarm.rings)),
                                           "poses_received": str(self.poses_received),
                                           "rejected": str(dict(self.swarm.rejected))}, unheard,
                           health=self.health_report, fail_safe=self.fail_safe)


def _sample(t: float, pos: Sequence[float], vel: Sequence[float] | None) -> tuple:
    """The monitor's sample of one pose."""
    if vel is None or not all(abs(v) < MAX_SPEED_MPS for v in vel):  # NaN, or 1e308: a flipped exponent bit
        return (t, *pos)  # the monitor takes the velocity from the positions; the tape keeps what was recorded
    return (t, *pos, *vel)
