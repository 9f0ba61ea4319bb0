"""The live flight as it was received: every buffered pose, spilled to disk a segment at a time.

The ring buffers hold only the last `buffer_s` of stream time; the flight report evaluates the whole flight,
so each closed segment (and the end of the session) copies the samples newer than what the tape holds into
one `.npy` chunk. Memory stays flat however long the flight; the pose callbacks do nothing more. At the end
`load_tape` turns the chunks into the trajectory `evaluate` would read from the recorded OUT/flight/flight.mcap
(io.flight_mcap.poses_trajectory: same stamps, same samples).
"""

from __future__ import annotations

import math
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.trajectory import SwarmTrajectory


@dataclass
class TapeStats:
    """What the tape says about itself in the flight report."""

    samples: int = 0
    lost: dict[str, float] = field(default_factory=dict)  # vehicle -> stream seconds the ring lost before taping
    restarts: int = 0  # clock jumps backwards: the tape restarts with the new clock

    def to_dict(self) -> dict:
        return {"samples": self.samples, "lost_s": {u: round(s, 3) for u, s in self.lost.items()},
                "restarts": self.restarts}


class FlightTape:
    """Spills a StreamingSwarm to `folder` (call `take` at each closed segment and at the end)."""

    def __init__(self, folder: Path):
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)  # a previous session's chunks are not this flight
        folder.mkdir(parents=True, exist_ok=True)
        self.vehicles: list[str] = []
        self._index: dict[str, int] = {}
        self.chunks: list[Path] = []
        self.stats = TapeStats()
        self._cursors: dict[str, float] = {}
        self._resets: int | None = None
        self._lock = threading.Lock()
        self._ended = False

    def end(self, swarm: StreamingSwarm) -> int:
        """The last take: later poses are not this flight's (the session bag ended with the same message)."""
        with self._lock:
            taken = 0 if self._ended else self._take(swarm)
            self._ended = True
            return taken

    def take(self, swarm: StreamingSwarm) -> int:
        """Write the samples received since the last take (none once the tape has ended); returns how many."""
        with self._lock:
            return 0 if self._ended else self._take(swarm)

    def _take(self, swarm: StreamingSwarm) -> int:
        rows, oldest, resets = swarm.rows_after(self._cursors)
        if self._resets is not None and resets != self._resets:  # a new clock: a new flight
            self._restart()
            rows, oldest, resets = swarm.rows_after({})
        self._resets = resets
        rows = {u: block for u, block in rows.items() if len(block)}
        if not rows:
            return 0
        data = np.empty((sum(len(b) for b in rows.values()), 8))  # vehicle index, then the ring's 7 columns
        at = 0
        for u, block in rows.items():
            cursor = self._cursors.get(u, -math.inf)
            if math.isfinite(cursor) and oldest[u] > cursor:  # the ring overwrote samples not taped yet
                self.stats.lost[u] = self.stats.lost.get(u, 0.0) + float(oldest[u] - cursor)
            if u not in self._index:
                self._index[u] = len(self.vehicles)
                self.vehicles.append(u)
            data[at: at + len(block), 0] = self._index[u]
            data[at: at + len(block), 1:] = block
            at += len(block)
            self._cursors[u] = float(block[-1, 0])
        chunk = self.folder / f"{len(self.chunks):05d}.npy"
        np.save(chunk, data)
        self.chunks.append(chunk)
        self.stats.samples += len(data)
        return len(data)

    def _restart(self) -> None:
        for chunk in self.chunks:
            chunk.unlink(missing_ok=True)
        self.chunks, self.vehicles, self._index, self._cursors = [], [], {}, {}
        self.stats = TapeStats(restarts=self.stats.restarts + 1)

    def discard(self) -> None:
        """Remove the chunks (the flight is evaluated and recorded)."""
        shutil.rmtree(self.folder, ignore_errors=True)


def load_tape(chunks: list[Path], vehicles: list[str], name: str = "live flight") -> SwarmTrajectory | None:
    """The taped samples as a trajectory (None when the tape is empty); runs in the worker process."""
    columns = tape_columns(chunks, vehicles)
    return None if columns is None else tape_trajectory(columns, name)


def tape_columns(chunks: list[Path], vehicles: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """The taped rows (vehicle index, t, x, y, z, vx, vy, vz) and each row's vehicle; None when the tape is empty."""
    if not chunks:
        return None
    data = np.concatenate([np.load(c) for c in chunks])
    return data, np.asarray(vehicles, dtype=object)[data[:, 0].astype(int)]


def put_measured_velocity(columns: tuple[np.ndarray, np.ndarray], measured: dict[str, np.ndarray]) -> list[str]:
    """Each vehicle's measured velocity ((stamp s, vx, vy, vz) rows as received: MAVROS `velocity_local`) put on its
    taped poses in place, as the bag reader puts a recorded stream on the recorded poses (io.mavros_fixes.velocity_at,
    both stamps read as the tape reads them: core.stamps.tape_seconds); the vehicles it was put on."""
    from uav_debate_eval.core.stamps import stamp_ns, stamp_s
    from uav_debate_eval.io.mavros_fixes import velocity_at

    data, ids = columns
    done = []
    for uav, rows in measured.items():
        mask = ids == uav
        if len(rows) < 2 or not mask.any():
            continue
        data[mask, 5:8] = velocity_at(stamp_s(stamp_ns(data[mask, 1])), stamp_s(stamp_ns(rows[:, 0])), rows[:, 1:4])
        done.append(uav)
    return done


def tape_trajectory(columns: tuple[np.ndarray, np.ndarray], name: str = "live flight",
                    offsets: dict[str, np.ndarray] | None = None) -> SwarmTrajectory:
    """`tape_columns` as a trajectory. `offsets`: vehicles' local frames moved into the world frame (ENU m) before
    the trajectory is made, so its derived velocities are those of the placed samples, as the replay of its MCAP
    derives them."""
    from uav_debate_eval.io.flight_mcap import poses_trajectory, stamp_ns

    data, ids = columns
    pos = data[:, 2:5].copy() if offsets else data[:, 2:5]
    for uav, offset in (offsets or {}).items():
        pos[ids == uav] += offset
    return poses_trajectory(stamp_ns(data[:, 1]), ids, pos, data[:, 5:8], name)  # NaN: not measured
