"""MAVROS local frames placed by the vehicles' global fixes (`<ns>/mavros/global_position/global`), one rule for a
bag and for the live session: each vehicle's `local_position` frame starts at its own EKF origin; its first valid
fix and where its local position was at that moment give the offset that moves it into the anchor vehicle's local
frame, the world frame. The anchor is the vehicle whose pose topic sorts first (the bag reader's topic order).
A vehicle's measured velocity (`local_position/velocity_local`) goes on its poses by one rule too (velocity_at).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from uav_debate_eval.io.ulog import geodetic_to_enu

if TYPE_CHECKING:
    from uav_debate_eval.core.trajectory import SwarmTrajectory

Fix = tuple[float, np.ndarray]  #: (stamp s, (lat deg, lon deg, alt m))
#: Poses kept per vehicle until its fix places it (a fix is stamped up to a second or two before it arrives)
RECENT_POSES = 128


def valid_fix(lat: float, lon: float, alt: float) -> bool:
    """A fix that places: finite, and not the 0/0 of a receiver without one."""
    return math.isfinite(lat) and math.isfinite(lon) and math.isfinite(alt) and abs(lat) > 1e-6


def fix_offsets(anchor: str, fixes: dict[str, Fix], local_at: Callable[[str, float], np.ndarray]
                ) -> dict[str, np.ndarray]:
    """Each fixed vehicle's offset (ENU m) from its local frame into the anchor's; `local_at(uav, t)`: its local
    position at stamp t."""
    t0, geo0 = fixes[anchor]
    origin = local_at(anchor, t0)
    return {u: geodetic_to_enu(*geo, *geo0) + origin - local_at(u, t) for u, (t, geo) in fixes.items()}


def track_at(t: np.ndarray, pos: np.ndarray, at: float) -> np.ndarray:
    """A track's position at stamp `at` (interpolated)."""
    return np.array([np.interp(at, t, pos[:, c]) for c in range(3)])


def velocity_at(t: np.ndarray, stamps: np.ndarray, vel: np.ndarray) -> np.ndarray:
    """A measured velocity stream ((n,) stamps s, (n, 3) m/s) at the pose stamps `t`: interpolated between the
    measurements around each pose, held before the first and after the last; the measurements taken in stamp order."""
    order = np.argsort(stamps, kind="stable")
    return np.column_stack([np.interp(t, stamps[order], vel[order, c]) for c in range(3)])


def placed_note(uav: str, anchor: str, offset: np.ndarray) -> str:
    return (f"{uav}: local frame placed in {anchor}'s by the global position fixes (offset "
            f"E{offset[0]:+.2f} N{offset[1]:+.2f} U{offset[2]:+.2f} m)")


class LiveFixes:
    """The live side: each vehicle's first valid fix and its local position at the fix's stamp (interpolated between
    the poses around it, as the bag reader interpolates a recorded track); once two vehicles have both, the offsets
    into the frame of the placed vehicle whose topic sorts first, the bag reader's anchor (a vehicle placed later
    whose topic sorts before moves every frame to its own: the monitor hears of each move). A vehicle not placed yet
    passes as it is."""

    def __init__(self, topic_of: Callable[[str], str], say: Callable[[str], None] = lambda text: None,
                 moved: Callable[[str], None] = lambda uav: None):
        """`topic_of(uav)`: the vehicle's pose topic (the anchor is the fixed vehicle whose topic sorts first);
        `say(text)`: each placement; `moved(uav)`: before the first pose of a vehicle in a frame placed otherwise than
        its last pose's (a step by the change of offset between the two is no motion)."""
        self.topic_of = topic_of
        self.say = say
        self.moved = moved
        self.fixes: dict[str, Fix] = {}
        self.anchor: str | None = None
        self.offsets: dict[str, np.ndarray] = {}
        self._recent: dict[str, deque[tuple[float, np.ndarray]]] = {}  # until placed: the latest poses
        self._at_fix: dict[str, np.ndarray] = {}
        self._sent: dict[str, np.ndarray | None] = {}  # the offset each vehicle's last pose went out with

    def pose(self, uav: str, t: float, pos: tuple[float, float, float]) -> tuple[float, float, float]:
        """A local pose as received (stamp s) -> in the world frame (as it came while the vehicle is not placed)."""
        local = np.asarray(pos, dtype=float)
        if uav not in self._at_fix:
            self._recent.setdefault(uav, deque(maxlen=RECENT_POSES)).append((t, local))
            self._locate(uav)
        offset = self.offsets.get(uav)
        if uav in self._sent:
            last = self._sent[uav]
            if not np.array_equal(np.zeros(3) if last is None else last, np.zeros(3) if offset is None else offset):
                self.moved(uav)
        self._sent[uav] = offset
        if offset is None:
            return pos
        x, y, z = (local + offset).tolist()
        return x, y, z

    def fix(self, uav: str, t: float, lat: float, lon: float, alt: float) -> None:
        """A fix of `uav` (its first valid one counts; the state input passes on only that one)."""
        if uav in self.fixes or not valid_fix(lat, lon, alt):
            return
        self.fixes[uav] = (t, np.array([lat, lon, alt], dtype=float))
        self._locate(uav)

    def _locate(self, uav: str) -> None:
        """The vehicle's local position at its fix's stamp, once a pose at or after it has come."""
        recent = self._recent.get(uav)
        if uav not in self.fixes or not recent or recent[-1][0] < self.fixes[uav][0]:
            return
        stamps = np.array([t for t, _ in recent])
        self._at_fix[uav] = track_at(stamps, np.array([p for _, p in recent]), self.fixes[uav][0])
        del self._recent[uav]
        ready = {u: f for u, f in self.fixes.items() if u in self._at_fix}
        if len(ready) < 2:
            return
        anchor = min(ready, key=self.topic_of)
        before = set(self.offsets) if anchor == self.anchor else set()
        self.anchor = anchor
        self.offsets = fix_offsets(anchor, ready, lambda u, _t: self._at_fix[u])
        for u in sorted(self.offsets.keys() - before, key=self.topic_of):
            self.say(placed_note(u, anchor, self.offsets[u]))


def tape_offsets(traj: SwarmTrajectory, fixes: dict[str, list[float]], anchor: str | None) -> dict[str, np.ndarray]:
    """A live flight's taped local frames placed by the fixes its session received (stamp, lat, lon, alt in the
    input clock), as the bag reader places a recording's: each vehicle's offset ({} when fewer than two place)."""
    fixed = {u: (float(f[0]) - traj.t0, np.asarray(f[1:4], dtype=float)) for u, f in fixes.items() if u in traj.tracks}
    if len(fixed) < 2 or anchor not in fixed:
        return {}
    return fix_offsets(anchor, fixed, lambda u, t: track_at(traj.tracks[u].t, traj.tracks[u].pos, t))
