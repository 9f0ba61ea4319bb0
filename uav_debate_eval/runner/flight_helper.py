"""The flight's formation errors and raw-token counts, computed by a forked helper on the second core.

Neither needs the safety checker, so a large flight forks the helper as soon as its clean trajectory is known: it
runs beside the checker, whose second core was idle but for the checker's own short second half, rather than beside
the events, the segment child and the figures (four processes on two cores). The results go into memory shared with
this process (anonymous mappings made before the fork); only the formation reference comes through the pipe.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.runner.forked import Forked, shared_array


class FlightHelper:
    """The helper of one flight: `errors` (steps, vehicles) and the tracks' raw-token prefixes, once it is done."""

    def __init__(self, traj: SwarmTrajectory, mission: Mission, errors: np.ndarray | None = None):
        from uav_debate_eval.metrics.swarm import snapshots

        self.snap = snapshots(traj)  # the grid before the fork: the helper and later children inherit it
        self.errors = shared_array(self.snap.valid.shape) if errors is None else errors
        self._lengths = [len(tr) + 1 for tr in traj.tracks.values()]  # a track's prefix starts at 0
        self._counts = shared_array((sum(self._lengths),), np.int64)
        self._forked = Forked(_helper_child, self.snap, mission, self.errors, traj, self._counts)
        self._answer: list[tuple | None] = []  # the helper's, taken once (by whichever thread asks first)
        self._lock = threading.Lock()

    def defer(self, traj: SwarmTrajectory, mission: Mission) -> None:
        """formation_error and raw_tokens of this flight wait for the helper (and compute here should it fail).

        Called after any other child is forked: a child must not inherit the waits (only this process reads the
        helper's answer)."""
        from uav_debate_eval.dsl.tokens import defer_number_prefixes
        from uav_debate_eval.metrics.swarm import defer_formation_error

        bounds = np.cumsum([0, *self._lengths]).tolist()
        cut: list[np.ndarray] = []  # every track's prefix, cut once (each track's Deferred asks)

        def formation() -> tuple[np.ndarray, str | None] | None:
            got = self._reference()
            return None if got is None else (self.errors, got[0])

        def prefixes() -> list[np.ndarray] | None:
            if self._reference() is None:
                return None
            if not cut:
                cut.extend(self._counts[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
            return cut

        defer_formation_error(self.snap, mission, formation)
        defer_number_prefixes(traj, prefixes)

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


def _helper_child(inbox: Any, snap: Any, mission: Mission, errors: np.ndarray, traj: SwarmTrajectory,
                  counts: np.ndarray) -> tuple[str | None]:
    """Child side: the flight's formation errors into `errors`, every track's raw-token prefix into `counts` (one
    after the other); returns (the formation reference,)."""
    from uav_debate_eval.dsl.tokens import number_prefixes
    from uav_debate_eval.metrics.swarm import formation_error

    err, ref = formation_error(snap, mission)
    errors[:] = err
    a = 0
    for prefix in number_prefixes(traj):
        counts[a:a + len(prefix)] = prefix
        a += len(prefix)
    return (ref,)
