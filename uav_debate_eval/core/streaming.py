"""Bounded per-vehicle ring buffers for live use: O(1) append, memory fixed by capacity."""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from uav_debate_eval.core.records import IngestReport
from uav_debate_eval.core.stamps import ON_OLD_CLOCK_ROWS, RESTART_ROWS
from uav_debate_eval.core.track import MAX_COORD_M
from uav_debate_eval.core.trajectory import SwarmTrajectory

#: Most samples of one stray stamp held (a PoseArray of a large show); more are dropped as the held ones will be.
MAX_HELD = 10_000
#: A stamp past the stream's newest by more than clock_jump_s is held only if it is also this many of its vehicle's
#: own last steps past that vehicle's newest stamp (a vehicle sampled every few seconds is not held at each pose).
STRAY_STEPS = 5.0
#: Columns of one stored sample: t, x, y, z, vx, vy, vz (velocity NaN when the source has none).
_COLS = 7


class VehicleRing:
    """Fixed-capacity ring of samples for one vehicle; the oldest sample is overwritten."""

    def __init__(self, capacity: int):
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self._buf = np.full((capacity, _COLS), np.nan)
        self._head = 0  # next write index
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(self, t: float, x: float, y: float, z: float,
               vx: float = math.nan, vy: float = math.nan, vz: float = math.nan) -> None:
        self._buf[self._head] = (t, x, y, z, vx, vy, vz)
        self._head = (self._head + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)

    @property
    def last_t(self) -> float:
        return float(self._buf[(self._head - 1) % self.capacity, 0]) if self._size else -math.inf

    def latest(self) -> np.ndarray:
        """The newest sample as a row (t, x, y, z, vx, vy, vz)."""
        return self._buf[(self._head - 1) % self.capacity].copy()

    def view(self) -> np.ndarray:
        """All stored samples, oldest first (a copy, safe to keep)."""
        if self._size < self.capacity:
            return self._buf[: self._size].copy()
        return np.roll(self._buf, -self._head, axis=0)

    def after(self, t: float) -> np.ndarray:
        """The stored samples stamped after t, oldest first (a copy); the stamps of a ring only grow, so each of its
        two stretches (before and after the write position) is sorted and only the samples taken are copied."""
        if self._size < self.capacity:
            older, newer = self._buf[:0], self._buf[: self._size]
        else:
            older, newer = self._buf[self._head:], self._buf[: self._head]
        if len(newer) and newer[0, 0] <= t:  # all of them in the newer stretch
            return newer[int(np.searchsorted(newer[:, 0], t, side="right")):].copy()
        return np.concatenate([older[int(np.searchsorted(older[:, 0], t, side="right")):], newer])

    @property
    def last_step(self) -> float:
        """The step between the two newest stamps (NaN with fewer than two)."""
        if self._size < 2:
            return math.nan
        return float(self._buf[(self._head - 1) % self.capacity, 0] - self._buf[(self._head - 2) % self.capacity, 0])

    @property
    def first_t(self) -> float:
        return float(self._buf[(self._head - self._size) % self.capacity, 0]) if self._size else math.inf

    def clear(self) -> None:
        self._head = 0
        self._size = 0

    @property
    def nbytes(self) -> int:
        return self._buf.nbytes


@dataclass
class StreamingSwarm:
    """Live samples of every vehicle. Rejects NaN and stale/out-of-order stamps and counts them.

    A vehicle's stamp more than `clock_jump_s` older than its own newest one is a clock jump backwards. The next
    samples of other vehicles tell what it was: one gone back too, the stream restarted (a looping bag, a restarted
    simulation): all buffers are reset and `resets` is incremented; two going on on the old clock for
    ON_OLD_CLOCK_ROWS samples each (the one other, in a pair), that vehicle's clock restarted alone (its autopilot or
    companion computer rebooted) and its samples, which cannot be placed on the stream's clock, are rejected as
    `clock_back` (counted per vehicle in `clock_back`): one vehicle's reboot used to reset the swarm, dropping a
    standing veto. Vehicles on clocks a constant apart (companion computers without a common time) are not jumps:
    each is compared with its own stamps. A stamp more than `clock_jump_s` past the newest one (and past STRAY_STEPS
    of its vehicle's own steps) is held until another vehicle's sample as far ahead, or RESTART_ROWS of its own,
    confirm the new clock (past `stray_ahead_s`: any later sample near it); the next sample that continues the old
    one drops the held ones as `stray_stamp` (a lone pose stamped ahead, a flipped bit, a few poses of a time-sync
    glitch would otherwise reset the flight when the following pose "jumped back" from them), unless that vehicle's
    next pose is as far ahead again (a vehicle on a clock ahead reporting less often than once a second). Samples
    stored late (held, then confirmed; waiting, then a restart) are listed in `settled` for the verifier.
    Thread-safe: in `live` one thread adds poses while others cut windows (segments, the trigger).
    """

    capacity: int = 3000
    clock_jump_s: float = 1.0
    stray_ahead_s: float = 60.0
    rings: dict[str, VehicleRing] = field(default_factory=dict)
    rejected: dict[str, int] = field(default_factory=dict)
    resets: int = 0
    newest_t: float = -math.inf
    #: the stream clock at flight time 0: the first sample accepted since the last reset
    origin: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    #: samples of one stamp far ahead of the stream's clock, not stored until a later one confirms it
    _held: list[tuple] = field(default_factory=list, repr=False, compare=False)
    _held_at: float = field(default=-math.inf, repr=False, compare=False)  # the stream's newest stamp then
    _held_newest: float = field(default=-math.inf, repr=False, compare=False)  # ... when the last one came
    #: vehicle -> (its samples dropped as strays, how far ahead of the stream the last was, its newest stored stamp
    #: then): a vehicle on a clock ahead that reports less often than held samples wait (its next pose as far ahead,
    #: with none on the stream's clock between, confirms them)
    _dropped: dict[str, tuple[list[tuple], float, float]] = field(default_factory=dict, repr=False, compare=False)
    #: samples of vehicles whose own clock went back, until another vehicle's sample tells whether the stream did
    _back: list[tuple] = field(default_factory=list, repr=False, compare=False)
    #: others seen since, not back: how many of their samples
    _on_old_clock: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    #: vehicles whose clock restarted alone -> their newest stored stamp then (stored samples since: its clock
    #: caught up, and a later jump back is told anew)
    _alone: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    _quorum: int = field(default=1, repr=False, compare=False)  # how many of them tell "its clock alone"
    _votes: int = field(default=0, repr=False, compare=False)  # how many did (ON_OLD_CLOCK_ROWS samples each)
    #: vehicle -> (samples rejected as `clock_back`, how far its clock went back, s)
    clock_back: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: samples stored after they waited (uav, t, x, y, z, vel), oldest first: the verifier checks them
    settled: deque = field(default_factory=lambda: deque(maxlen=MAX_HELD), repr=False, compare=False)

    def add(self, uav: str, t: float, pos, vel=None) -> bool:
        """Append one sample; returns False (and counts why) when it is rejected."""
        x, y, z = (float(v) for v in pos)
        if not (math.isfinite(t) and math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            return self._reject("nan")
        if not (abs(x) < MAX_COORD_M and abs(y) < MAX_COORD_M and abs(z) < MAX_COORD_M):
            return self._reject("out_of_range")  # as ingest drops it: the live flight is the recorded one
        with self._lock:
            return self._add(uav, t, x, y, z, vel)

    def _add_far(self, uav: str, t: float, x: float, y: float, z: float, vel) -> bool:
        """A sample while others wait (held ahead, or gone back), or one stamped well past the newest: settle the
        waiting ones, hold it, or store it."""
        if self._back and uav not in {b[0] for b in self._back} and not self._goes_back(uav, t):
            seen = self._on_old_clock[uav] = self._on_old_clock.get(uav, 0) + 1
            if seen == ON_OLD_CLOCK_ROWS:
                self._votes += 1
                if self._votes >= self._quorum:  # the others go on on the old clock: the waiting vehicles'
                    self._reject_back()  # clocks restarted alone
        if uav in self._dropped and self._steady_ahead(uav, t):  # a sparse vehicle on a clock ahead: its dropped
            for sample in self._dropped.pop(uav)[0]:  # samples were on its clock after all
                if self._put(*sample):
                    self.settled.append(sample)
                    self._unreject("stray_stamp")
            return self._put(uav, t, x, y, z, vel)
        held = self._held
        if held and self._confirms(uav, t):
            self._held = []  # the clock moved forward: the held samples are stored first
            for sample in held:
                if self._put(*sample):
                    self.settled.append(sample)
            return self._put(uav, t, x, y, z, vel)
        if self._stray_ahead(uav, t):
            if held and not self._continues(uav, t):  # a second clock ahead: the first was a stray
                self._drop_held()
            if not self._held:
                self._held_at = self.newest_t
            if len(self._held) >= MAX_HELD:
                return self._reject("stray_stamp")
            self._held.append((uav, t, x, y, z, vel))  # one instant of the swarm (its other vehicles) waits with it
            self._held_newest = self.newest_t
            return False  # not stored (yet): the caller treats it as rejected
        if held and (self.newest_t > self._held_at + self.clock_jump_s or any(h[0] == uav for h in held)):
            self._drop_held()  # the stream went on on its old clock: the held samples were strays
        return self._put(uav, t, x, y, z, vel)

    def _confirms(self, uav: str, t: float) -> bool:
        """Whether `t` puts the held samples on the stream's new clock. Held far ahead (past `stray_ahead_s`): a later
        stamp near them. Held less far: another vehicle's stamp later or as far ahead (a stream resuming after a
        pause: the vehicles of one PoseArray, the next vehicle's topic), or the held vehicle's own clock going on
        ahead for RESTART_ROWS samples (a time-sync glitch of a few poses is followed by its old clock) or by steps
        as long as its jump (within STRAY_STEPS: a vehicle sampled every few seconds, its second sample)."""
        held = self._held
        h_t = held[0][1]
        near = h_t <= self._held_at + self.stray_ahead_s
        if t > h_t and t - h_t <= self.stray_ahead_s:
            if not near:
                return True
            if all(h[0] == uav for h in held):  # its clock went on ahead, or it steps that far (a sparse vehicle)
                ring = self.rings.get(uav)
                jump = h_t - ring.last_t if ring is not None else math.inf
                return len(held) + 1 >= RESTART_ROWS or jump <= STRAY_STEPS * (t - held[-1][1])
            return all(h[0] != uav for h in held)
        return (near and t > self.newest_t + self.clock_jump_s and h_t - t <= self.clock_jump_s
                and all(h[0] != uav for h in held))

    def _steady_ahead(self, uav: str, t: float) -> bool:
        """Whether `t`, the next pose of a vehicle whose samples were dropped as strays, is as far ahead of the
        stream's clock as they were (within `clock_jump_s`): its clock runs ahead of the others', not a glitch (its
        next pose of a glitch is back on the stream's clock)."""
        samples, ahead, stored_then = self._dropped[uav]
        last = samples[-1][1]
        if not last < t <= last + self.stray_ahead_s or self._last_stored(uav) != stored_then:
            if t > last:
                del self._dropped[uav]  # too long ago, or it reported on the stream's clock since: a glitch
            return False
        return abs(t - self.newest_t - ahead) <= self.clock_jump_s

    def _continues(self, uav: str, t: float) -> bool:
        """Whether a sample ahead joins the held ones: the same instant (a PoseArray's vehicles), or the next sample
        of the one vehicle held less than `stray_ahead_s` ahead."""
        held = self._held
        if t == held[0][1]:
            return True
        return (held[0][1] <= self._held_at + self.stray_ahead_s and t > held[-1][1]
                and all(h[0] == uav for h in held))

    def _stray_ahead(self, uav: str, t: float) -> bool:
        """Whether `t` may be a stray: past the stream's newest stamp by more than `clock_jump_s`, and (within
        `stray_ahead_s`) by more than STRAY_STEPS of the vehicle's own last step (a vehicle sampled every few
        seconds is not held at each pose)."""
        if not t > self.newest_t + self.clock_jump_s or not math.isfinite(self.newest_t):
            return False
        ring = self.rings.get(uav)
        if t > self.newest_t + self.stray_ahead_s or ring is None:
            return True
        return not t - ring.last_t <= STRAY_STEPS * ring.last_step  # NaN (fewer than two samples): held

    def _goes_back(self, uav: str, t: float) -> bool:
        ring = self.rings.get(uav)
        return ring is not None and t < ring.last_t - self.clock_jump_s

    def _went_back(self, uav: str, t: float, x: float, y: float, z: float, vel) -> bool:
        """A vehicle's own stamp went back: the stream restarted (a bag loop, a simulation reset: every vehicle's
        clock goes back) or this vehicle's clock alone did (its autopilot or companion computer rebooted, the others
        fly on). The next samples of the other vehicles tell which: one gone back too, or two going on on the old clock
        for ON_OLD_CLOCK_ROWS samples each (the one other, in a pair: the last poses of a bag's run, a topic each,
        delivered after the first of the next run are not votes for "alone"); until then this one waits. Once its
        clock restarted alone, its later samples behind its old clock are rejected at once, until its clock has
        caught up (a sample stored again)."""
        if uav in self._alone and self._alone[uav] == self._last_stored(uav):
            self._count_back(uav, t)
            return self._reject("clock_back")
        if self._back:
            restart = (uav not in {b[0] for b in self._back} or len(self._back) >= MAX_HELD
                       or t - self._back[0][1] > self.clock_jump_s)  # the others quiet meanwhile
        else:
            self._on_old_clock = {}
            self._votes = 0
            self._quorum = min(2, sum(1 for u, r in self.rings.items() if u != uav and len(r)))
            restart = self._quorum == 0  # no other vehicle to ask
        if restart:
            back = self._back  # a restart of the stream: the waiting samples start the new run with this one
            self._clear()
            self.resets += 1
            for b in back:
                if self._put(*b):
                    self.settled.append(b)
            return self._put(uav, t, x, y, z, vel)
        self._back.append((uav, t, x, y, z, vel))
        return False  # not stored (yet): the caller treats it as rejected

    def _reject_back(self) -> None:
        """The waiting samples' vehicles restarted their clocks alone: their new stamps cannot be placed on the
        stream's clock (counted per vehicle in `clock_back`, for the verifier to say it cannot check them)."""
        for uav, t, *_ in self._back:
            self._count_back(uav, t)
            self._alone[uav] = self._last_stored(uav)
        self._reject("clock_back", len(self._back))
        self._back = []

    def _count_back(self, uav: str, t: float) -> None:
        """One more sample of `uav` (a vehicle with stored samples) rejected as `clock_back`; how far its clock went
        back is said at the first."""
        count, back_s = self.clock_back.get(uav, (0, self.rings[uav].last_t - t))
        self.clock_back[uav] = (count + 1, back_s)

    def _last_stored(self, uav: str) -> float:
        """The newest stamp stored of `uav` (-inf: none)."""
        ring = self.rings.get(uav)
        return ring.last_t if ring is not None else -math.inf

    def _drop_held(self) -> None:
        held = self._held
        self._reject("stray_stamp", len(held))
        if held[0][1] <= self._held_at + self.stray_ahead_s and all(h[0] == held[0][0] for h in held):
            uav = held[0][0]  # one vehicle's: kept for its next pose to confirm
            self._dropped[uav] = (held, held[-1][1] - self._held_newest, self._last_stored(uav))
        self._held = []

    def _put(self, uav: str, t: float, x: float, y: float, z: float, vel) -> bool:
        """Store one sample settled as on the stream's clock (a stamp its vehicle's own clock went back to starts a
        new run, unless another vehicle may tell otherwise)."""
        ring = self.rings.get(uav)
        if ring is None:
            ring = self.rings[uav] = VehicleRing(self.capacity)
        last = ring.last_t
        if t < last - self.clock_jump_s:  # its own clock went back: a new run, or its clock alone restarted
            return self._went_back(uav, t, x, y, z, vel)
        if t <= last:
            return self._reject("duplicate" if t == last else "out_of_order")
        if self.origin is None:
            self.origin = t
        if vel is None:
            ring.append(t, x, y, z)
        else:
            ring.append(t, x, y, z, *(float(v) for v in vel))
        self.newest_t = max(self.newest_t, t)
        return True

    def _add(self, uav: str, t: float, x: float, y: float, z: float, vel) -> bool:
        if self._held or self._back or t > self.newest_t + self.clock_jump_s:  # rare: not on the stream's clock
            return self._add_far(uav, t, x, y, z, vel)
        return self._put(uav, t, x, y, z, vel)

    def _reject(self, reason: str, n: int = 1) -> bool:
        self.rejected[reason] = self.rejected.get(reason, 0) + n
        return False

    def _unreject(self, reason: str) -> None:
        """A sample counted rejected was stored after all."""
        self.rejected[reason] -= 1
        if not self.rejected[reason]:
            del self.rejected[reason]

    def reset(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        for ring in self.rings.values():
            ring.clear()
        self.newest_t = -math.inf
        self.origin = None
        self._held = []
        self._back = []
        self._alone = {}
        self._dropped = {}

    def rows_after(self, cursors: dict[str, float]) -> tuple[dict[str, np.ndarray], dict[str, float], int]:
        """Per vehicle the samples stamped after its cursor (t, x, y, z, vx, vy, vz), the oldest stamp each ring
        still holds (a cursor before it lost samples to the ring) and the number of clock resets so far."""
        with self._lock:
            rows = {u: r.after(cursors.get(u, -math.inf)) for u, r in self.rings.items() if len(r)}
            return rows, {u: r.first_t for u, r in self.rings.items() if len(r)}, self.resets

    def last_seen(self) -> dict[str, float]:
        with self._lock:
            return {u: r.last_t for u, r in self.rings.items() if len(r)}

    def latest(self) -> dict[str, np.ndarray]:
        """Newest sample per vehicle as (t, x, y, z, vx, vy, vz)."""
        with self._lock:
            return {u: r.latest() for u, r in self.rings.items() if len(r)}

    def window(self, t0: float = -math.inf, t1: float = math.inf, name: str = "",
               origin: float | None = None) -> SwarmTrajectory:
        """The buffered samples with t0 <= t <= t1 (stream clock) as a cleaned SwarmTrajectory in flight time
        since `origin` (default the stream's first sample here), so every segment of a session shares one flight
        clock; a node that joined late passes the origin of the node that cut the segment."""
        with self._lock:  # copies of the rings (view() copies), so the rest runs unlocked
            parts = [(u, r.view()) for u, r in self.rings.items() if len(r)]
            origin = self.origin if origin is None else origin
        parts = [(u, a[(a[:, 0] >= t0) & (a[:, 0] <= t1)]) for u, a in parts]
        parts = [(u, a) for u, a in parts if len(a)]
        if not parts:
            return SwarmTrajectory({}, IngestReport(), name, origin or 0.0)
        data = np.concatenate([a for _, a in parts])
        ids = np.concatenate([np.full(len(a), u, dtype=object) for u, a in parts])
        vel = data[:, 4:7]
        traj = SwarmTrajectory.from_columns(data[:, 0], ids, data[:, 1:4],
                                            vel=None if np.isnan(vel).all() else vel, name=name, origin=origin)
        return traj

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.rings.values())
