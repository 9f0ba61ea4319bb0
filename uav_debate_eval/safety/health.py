"""Whether the live verifier can vouch for the swarm: where the pose stream is, how far behind it the verifier
runs, which poses it never saw, and whether its own check loop stalled. No ROS here.

The checks run in *stream time*: the verifier's clock less the smallest delay seen between a pose's stamp and its
processing (the transport's floor). A stream whose stamps sit behind the verifier's clock (a remote computer's
clock, a simulator that stamped its flight before it was allowed to start, an autopilot's own boot clock mapped
late) would otherwise look silent as a whole: every vehicle "quiet together", the flight taken for over, and no
constraint checked while the poses kept coming. Anything beyond a vehicle's own floor is the verifier's lag: the
poses it processes that late were waiting for it (a stalled executor, a held GIL, a starved CPU).

When the verifier cannot vouch (lag over a bound, poses of a vehicle lost within the stale timeout, its check loop
stalled) it says so as `verifier_degraded` rows, which raise the veto in fail-safe mode (as nav2's collision
monitor and PX4's failsafes do with data they cannot trust) until it has caught up.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field

#: The bound on the verifier's lag behind the pose stream, s of stream time (issue 32's default).
MAX_LAG_S = 0.25
#: A gap between two poses of a vehicle longer than this many of its sample periods lost poses.
LOSS_GAP_PERIODS = 2.5
#: ... and at least this long: at hundreds of Hz (Gazebo's pose topics) a few missing samples change nothing.
LOSS_MIN_GAP_S = 0.05
#: A vehicle's sample period: the median of its last this many intervals (a burst of late poses cannot shrink it).
PERIOD_WINDOW = 15
#: Intervals of a vehicle before its sample period is trusted to count losses.
PERIOD_WARMUP = 4
#: The reason a degraded verifier gives on the veto (contract §5).
DEGRADED = "verifier_degraded"
FAIL_SAFE_MODES = ("veto", "warn")


@dataclass
class _Vehicle:
    last_t: float = math.nan
    intervals: deque[float] = field(default_factory=lambda: deque(maxlen=PERIOD_WINDOW))
    lost_at: float = -math.inf  # stream time of the last loss (the stamp that ended the gap)
    gap_s: float = 0.0  # the last loss's gap
    floor: float = math.inf  # smallest (arrival - stamp) of this vehicle: its clock and transport delay


@dataclass
class HealthReport:
    """What a check finds about the verifier itself: the degraded reasons now, and the counters for the status."""

    reasons: list[dict] = field(default_factory=list)  # one per cause: kind, message, value, limit, uavs
    lag_s: float = 0.0
    lost: dict[str, int] = field(default_factory=dict)
    #: the cost of the recent full checks, ms: wall p50 / p99 and this thread's CPU p99 (see `CheckTimes`)
    check_ms: tuple[float, float, float] | None = None

    @property
    def degraded(self) -> bool:
        return bool(self.reasons)


class CheckTimes:
    """The wall and CPU (this thread's) time of the last `window` full checks: what a tick costs, for the status.

    The CPU time is what the check itself costs; the wall time adds the waits for a core on a loaded machine.
    """

    def __init__(self, window: int = 500) -> None:
        self._wall: deque[float] = deque(maxlen=window)
        self._cpu: deque[float] = deque(maxlen=window)

    def add(self, wall_s: float, cpu_s: float) -> None:
        self._wall.append(wall_s)
        self._cpu.append(cpu_s)

    def summary(self) -> tuple[float, float, float] | None:
        """(wall p50, wall p99, CPU p99) in ms over the window (None before a check)."""
        if not self._wall:
            return None
        wall = sorted(self._wall)
        cpu = sorted(self._cpu)

        def pct(xs: list[float], q: float) -> float:
            return 1000.0 * xs[min(len(xs) - 1, math.ceil(q * len(xs)) - 1)]  # nearest rank

        return pct(wall, 0.5), pct(wall, 0.99), pct(cpu, 0.99)


class VerifierHealth:
    """Stream clock, lag, per-vehicle pose losses and check-loop stalls of one live verifier.

    `on_pose(uav, stamp, arrival)` for every pose stored (arrival: the verifier's clock when it processed it);
    `now(clock)` maps the verifier's clock to stream time; `check(now, mono, live)` before every full check.
    """

    def __init__(self, max_lag_s: float = MAX_LAG_S, stale_timeout_s: float | None = None,
                 max_check_gap_s: float | None = None) -> None:
        if not max_lag_s > 0:
            raise ValueError(f"max_lag_s: must be > 0, got {max_lag_s}")
        self.max_lag_s = max_lag_s
        self.stale_timeout_s = stale_timeout_s
        self.max_check_gap_s = max_lag_s if max_check_gap_s is None else max_check_gap_s
        self.lost_total: dict[str, int] = {}  # every pose lost this session (resets keep it)
        self.stalls = 0
        self.reset()

    def reset(self) -> None:
        """A new run of the stream (stamps or the clock jumped back): forget the floor, periods and open causes."""
        self.offset = math.inf  # smallest (arrival - stamp) seen: the transport's floor
        self._vehicles: dict[str, _Vehicle] = {}
        self._lossy: set[str] = set()  # vehicles with a loss not yet older than the hold (a check reads only these)
        self._lag = 0.0  # the newest pose's lag
        self._newest = -math.inf  # the newest stamp seen
        self._lag_at = -math.inf  # stream time of the newest pose over the bound
        self._last_check_mono = math.nan
        self._stall_at = -math.inf  # stream time of the last stall
        self._stall_s = 0.0

    @property
    def started(self) -> bool:
        """A pose of this run was seen (the stream clock is known)."""
        return math.isfinite(self.offset)

    def now(self, clock: float) -> float:
        """Stream time at the verifier's clock `clock` (the clock itself until a pose was seen)."""
        return clock - self.offset if self.started else clock

    def on_pose(self, uav: str, stamp: float, arrival: float) -> None:
        delay = arrival - stamp
        if delay < self.offset:
            self.offset = delay
        v = self._vehicles.get(uav)
        if v is None:
            v = self._vehicles[uav] = _Vehicle()
        if delay < v.floor:
            v.floor = delay
        # against the vehicle's own floor: vehicles on clocks a constant apart (per-instance boot clocks mapped to
        # one, a speeded-up replay's vehicles discovered at different times) are not behind one another
        lag = delay - v.floor
        self._lag = lag
        if lag > self.max_lag_s:
            self._lag_at = stamp
        dt = stamp - v.last_t
        if dt > 0:  # NaN (first pose) is not
            period = statistics.median(v.intervals) if len(v.intervals) >= PERIOD_WARMUP else math.nan
            if dt > LOSS_GAP_PERIODS * period and dt >= LOSS_MIN_GAP_S:  # NaN (warming up) is not
                missed = max(1, round(dt / period) - 1)
                if self.stale_timeout_s is None or dt <= self.stale_timeout_s:
                    v.lost_at, v.gap_s = stamp, dt  # longer: stale_data, a hazard of its own
                    self._lossy.add(uav)
                self.lost_total[uav] = self.lost_total.get(uav, 0) + missed
            else:
                v.intervals.append(dt)
        v.last_t = stamp
        self._newest = max(self._newest, stamp)

    def on_lost(self, uav: str, count: int, at: float | None = None) -> None:
        """`count` poses of `uav` lost on the way (the transport said so): counted, and a loss at stream time `at`
        (default its newest stamp)."""
        if count <= 0:
            return
        v = self._vehicles.get(uav)
        if v is None:
            v = self._vehicles[uav] = _Vehicle()
        self.lost_total[uav] = self.lost_total.get(uav, 0) + count
        v.lost_at = at if at is not None else v.last_t if math.isfinite(v.last_t) else self._newest
        self._lossy.add(uav)
        if v.intervals:
            v.gap_s = max(v.gap_s, count * statistics.median(v.intervals))

    def check(self, now: float, mono: float, live: bool) -> HealthReport:
        """The degraded causes at stream time `now` (`mono`: the monotonic clock of this check; `live`: the flight
        is going on, so a stalled loop left poses unchecked)."""
        gap = mono - self._last_check_mono
        self._last_check_mono = mono
        if live and gap > self.max_check_gap_s:  # NaN (first check) is not
            self._stall_at, self._stall_s = now, gap
            self.stalls += 1
        hold = self.stale_timeout_s if self.stale_timeout_s is not None else 1.0
        reasons = []
        if now - self._lag_at <= self.max_lag_s or self._lag > self.max_lag_s:
            reasons.append({"kind": "lag", "value": self._lag, "limit": self.max_lag_s, "uavs": [],
                            "message": f"behind the pose stream by {self._lag:.2f} s (limit {self.max_lag_s:g} s)"})
        self._lossy = {u for u in self._lossy if not now - self._vehicles[u].lost_at > hold}  # NaN now: kept
        lost = sorted(u for u in self._lossy if now - self._vehicles[u].lost_at <= hold)
        if lost:
            worst = max(self._vehicles[u].gap_s for u in lost)
            reasons.append({"kind": "poses_lost", "value": worst, "limit": hold, "uavs": lost,
                            "message": f"poses of {', '.join(lost[:10])} lost (a gap of {worst:.2f} s) within "
                                       f"the last {hold:g} s"})
        if now - self._stall_at <= self.max_lag_s:
            reasons.append({"kind": "stalled", "value": self._stall_s, "limit": self.max_check_gap_s, "uavs": [],
                            "message": f"check loop stalled for {self._stall_s:.2f} s"})
        return HealthReport(reasons, self._lag, dict(self.lost_total))
