"""The flight's smoothed kinematics, formation errors and raw-token counts, computed by a forked helper on the second
core.

None of them needs the safety checker, so a large flight forks the helper as soon as its clean trajectory is known:
it runs beside the checker, whose second core was idle but for the checker's own short second half, rather than
beside the events, the segment child and the figures (four processes on two cores). The kinematics come first (this
process needs them right after the checker, for the segment child's windows and the events); the results go into
memory shared with this process (anonymous mappings made before the fork); only the formation reference comes
through the pipe, and an event says the kinematics are written.
"""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.runner.forked import Forked, shared_array

#: Floats per grid point of a vehicle's smoothed kinematics in the shared memory: t, pos, vel, acc, jerk, speed,
#: horizontal speed.
KIN_FLOATS = 1 + 3 * 4 + 2
#: How often the wait for the kinematics checks that the helper is still alive (s).
POLL_S = 0.05


class FlightHelper:
    """The helper of one flight: `errors` (steps, vehicles) and the tracks' raw-token prefixes, once it is done; the
    tracks' smoothed kinematics (adopt_kinematics) before those when asked."""

    def __init__(self, traj: SwarmTrajectory, mission: Mission, errors: np.ndarray | None = None,
                 kinematics: bool = False):
        """`kinematics`: the helper smooths the flight's kinematics first, for adopt_kinematics (forked before the
        checker, it has them done before this process gets to them)."""
        from uav_debate_eval.core.track import prime_sample_periods
        from uav_debate_eval.metrics.kinematics import grid_length
        from uav_debate_eval.metrics.swarm import snapshots

        self.snap = snapshots(traj)  # the grid before the fork: the helper and later children inherit it
        self.errors = shared_array(self.snap.valid.shape) if errors is None else errors
        self._lengths = [len(tr) + 1 for tr in traj.tracks.values()]  # a track's prefix starts at 0
        self._counts = shared_array((sum(self._lengths),), np.int64)
        self._kinematics: tuple | None = None  # (points per track, their floats, steps, written) when asked
        if kinematics:
            prime_sample_periods(tuple(traj.tracks.values()))
            points = [grid_length(tr) for tr in traj.tracks.values()]
            self._kinematics = (points, shared_array((KIN_FLOATS * sum(points),)),
                                shared_array((len(points),)), multiprocessing.get_context("fork").Event())
        #: set once the helper has written the formation errors (the events wait for them; its token counts follow)
        self._errors_written = multiprocessing.get_context("fork").Event()
        self._forked = Forked(_helper_child, self.snap, mission, self.errors, traj, self._counts, self._errors_written,
                              self._kinematics)
        self._answer: list[tuple | None] = []  # the helper's, taken once (by whichever thread asks first)
        self._lock = threading.Lock()

    def defer(self, traj: SwarmTrajectory, mission: Mission) -> None:
        """formation_error and raw_tokens of this flight wait for the helper (and compute here should it fail).

        Called after any other child is forked: a child must not inherit the waits (only this process reads the
        helper's answer)."""
        from uav_debate_eval.dsl.tokens import defer_number_prefixes
        from uav_debate_eval.metrics.swarm import defer_formation_error, formation_reference

        bounds = np.cumsum([0, *self._lengths]).tolist()
        cut: list[np.ndarray] = []  # every track's prefix, cut once (each track's Deferred asks)

        def formation() -> tuple[np.ndarray, str | None] | None:
            while not self._errors_written.wait(POLL_S):  # not the whole helper: its token counts come after
                if not self._forked.alive() and not self._errors_written.is_set():
                    return None  # lost before it wrote them: computed here
            return self.errors, formation_reference(mission, self.snap.uav_ids)

        def prefixes() -> list[np.ndarray] | None:
            if self._reference() is None:
                return None
            if not cut:
                cut.extend(self._counts[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
            return cut

        defer_formation_error(self.snap, mission, formation)
        defer_number_prefixes(traj, prefixes)

    def adopt_kinematics(self, traj: SwarmTrajectory) -> None:
        """The flight's smoothed kinematics from the helper kept on its tracks (views of the shared memory), once it
        has written them; nothing when it was not asked for them or is gone (they are computed here then)."""
        from uav_debate_eval.metrics.kinematics import Kinematics, adopt_kinematics

        if self._kinematics is None:
            return
        points, floats, steps, written = self._kinematics
        self._kinematics = None
        while not written.wait(POLL_S):
            if not self._forked.alive():
                return
        grids: dict[int, np.ndarray] = {}  # per stamps array: its tracks' grid, one array as smooth_tracks makes it
        for tr, (t, pos, vel, acc, jerk, speed, hspeed), dt in zip(traj.tracks.values(), _views(points, floats),
                                                                   steps.tolist(), strict=True):
            grid = grids.setdefault(id(tr.t), t)
            if grid is not t and np.array_equal(grid, t):
                t = grid  # the windows' kinematics are then cut from their flight's a block of vehicles at a time
            kin = Kinematics(tr.uav_id, t, pos, vel, acc, jerk, dt)
            kin.__dict__.update(speed=speed, hspeed=hspeed)
            adopt_kinematics(tr, kin)

    def _reference(self) -> tuple | None:
        with self._lock:
            if not self._answer:
                try:
                    self._answer.append(self._forked.result())
                except Exception:  # noqa: BLE001 - computed here instead
                    self._answer.append(None)
            return self._answer[0]

    def cancel(self) -> None:
        """Done (its results were taken) or no longer wanted."""
        self._forked.cancel()


def _views(points: list[int], floats: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """Each track's (t, pos, vel, acc, jerk, speed, hspeed) in the shared floats, one track after the other."""
    out: list[tuple[np.ndarray, ...]] = []
    a = 0
    for n in points:
        t, rest, speeds = np.split(floats[a:a + KIN_FLOATS * n], [n, (KIN_FLOATS - 2) * n])  # 2: the speeds
        pos, vel, acc, jerk = (part.reshape(n, 3) for part in np.split(rest, 4))
        out.append((t, pos, vel, acc, jerk, speeds[:n], speeds[n:]))
        a += KIN_FLOATS * n
    return out


def _write_kinematics(traj: SwarmTrajectory, points: list[int], floats: np.ndarray, steps: np.ndarray,
                      written: Any) -> None:
    """The flight's smoothed kinematics into the shared floats, then `written` set; the helper's own copies let go
    (a show's are GBs, and the helper goes on with the formation errors)."""
    from uav_debate_eval.live.workers import trim_heap
    from uav_debate_eval.metrics.kinematics import forget_kinematics, smooth_tracks

    tracks = list(traj.tracks.values())
    for r, (k, views) in enumerate(zip(smooth_tracks(tracks), _views(points, floats), strict=True)):
        for view, values in zip(views, (k.t, k.pos, k.vel, k.acc, k.jerk, k.speed, k.hspeed), strict=True):
            view[...] = values
        steps[r] = k.dt
    written.set()
    forget_kinematics(tracks)
    trim_heap()  # the freed arrays back to the OS


def _helper_child(inbox: Any, snap: Any, mission: Mission, errors: np.ndarray, traj: SwarmTrajectory,
                  counts: np.ndarray, errors_written: Any, kinematics: tuple | None = None) -> tuple[str | None]:
    """Child side: the flight's smoothed kinematics first if asked (`kinematics`: FlightHelper's), then its
    formation errors into `errors` (`errors_written` set then), every track's raw-token prefix into `counts` (one
    after the other); returns (the formation reference,)."""
    from uav_debate_eval.dsl.tokens import number_prefixes
    from uav_debate_eval.metrics.swarm import formation_error

    if kinematics is not None:
        _write_kinematics(traj, *kinematics)

    err, ref = formation_error(snap, mission)
    errors[:] = err
    errors_written.set()
    a = 0
    for prefix in number_prefixes(traj):
        counts[a:a + len(prefix)] = prefix
        a += len(prefix)
    return (ref,)
