"""The live flight as it was received: every buffered pose, spilled to disk a segment at a time.

The ring buffers hold only the last `buffer_s` of stream time; the flight report evaluates the whole flight,
so each closed segment (and the end of the session) copies the samples newer than what the tape holds into
one `.npy` chunk. Memory stays flat however long the flight; the pose callbacks do nothing more. At the end
`load_tape` turns the chunks into the trajectory `evaluate` would read from the recorded OUT/flight/flight.mcap
(io.flight_mcap.poses_trajectory: same stamps, same samples).

The tape is readable on its own (io.live_tape: a manifest names the vehicles, chunks are written whole, the
mission file and the session's side streams so far are kept beside them): a session that never made its flight
report (killed, a third Ctrl-C) leaves a flight `evaluate` reads, and the next session on the same OUT keeps it
in OUT/unfinished-<time>/ (with the session bag) instead of overwriting it.
"""

from __future__ import annotations

import math
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uav_debate_eval.core.streaming import StreamingSwarm
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.live_tape import (
    chunk_paths,
    is_tape,
    save_chunk,
    save_side,
    tape_columns,
    tape_trajectory,
    write_manifest,
)
from uav_debate_eval.io.rosbag_record import SESSION_BAG

#: The tape's copy of the session's mission file: `evaluate` of the tape finds it inside the folder.
MISSION_COPY = "mission.yaml"


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

    def __init__(self, folder: Path, mission_file: str | Path | None = None):
        """`mission_file`: the session's mission, copied beside the chunks. A previous session's tape in `folder`
        is not this flight: kept aside when it never reached a flight report (`kept`), else removed."""
        self.folder = folder
        self.kept = keep_unfinished(folder)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        if mission_file and Path(mission_file).is_file():
            shutil.copyfile(mission_file, folder / MISSION_COPY)
        write_manifest(folder, [])
        self.vehicles: list[str] = []
        self._index: dict[str, int] = {}
        self.chunks: list[Path] = []
        self.stats = TapeStats()
        self._cursors: dict[str, float] = {}
        self._resets: int | None = None
        self._lock = threading.Lock()
        self._ended = False
        self._side_saved: dict[str, int] = {}  # rows of each side array on disk (io.live_tape.save_side)

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

    def keep_side(self, session: Callable[[], dict]) -> None:
        """The session's side streams so far (io.live_tape.save_side), beside the chunks; `session` is read under the
        tape's lock, so two closes cannot write their snapshots in the other order."""
        with self._lock:
            save_side(self.folder, session(), self._side_saved)

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
        at, joined = 0, False
        for u, block in rows.items():
            cursor = self._cursors.get(u, -math.inf)
            if math.isfinite(cursor) and oldest[u] > cursor:  # the ring overwrote samples not taped yet
                self.stats.lost[u] = self.stats.lost.get(u, 0.0) + float(oldest[u] - cursor)
            if u not in self._index:
                self._index[u] = len(self.vehicles)
                self.vehicles.append(u)
                joined = True
            data[at: at + len(block), 0] = self._index[u]
            data[at: at + len(block), 1:] = block
            at += len(block)
            self._cursors[u] = float(block[-1, 0])
        if joined:  # the manifest names every vehicle of a chunk before the chunk exists
            write_manifest(self.folder, self.vehicles)
        chunk = self.folder / f"{len(self.chunks):05d}.npy"
        save_chunk(chunk, data)
        self.chunks.append(chunk)
        self.stats.samples += len(data)
        return len(data)

    def _restart(self) -> None:
        for chunk in self.chunks:
            chunk.unlink(missing_ok=True)
        self.chunks, self.vehicles, self._index, self._cursors = [], [], {}, {}
        self.stats = TapeStats(restarts=self.stats.restarts + 1)
        write_manifest(self.folder, [])

    def discard(self) -> None:
        """Remove the chunks (the flight is evaluated and recorded)."""
        shutil.rmtree(self.folder, ignore_errors=True)


def load_tape(chunks: list[Path], vehicles: list[str], name: str = "live flight") -> SwarmTrajectory | None:
    """The taped samples as a trajectory (None when the tape is empty); runs in the worker process."""
    columns = tape_columns(chunks, vehicles)
    return None if columns is None else tape_trajectory(columns, name)


def keep_unfinished(tape_folder: Path) -> Path | None:
    """A previous session's records that never reached a flight report, moved to OUT/unfinished-<UTC time of its
    last chunk>/: its tape (with at least one chunk) as `tape/`, the session bag (OUT/flight/rosbag2) beside it, and
    the mission file; returns that folder (None: nothing unfinished). A cut bag alone is unfinished too. Only a
    session's tape folder (its manifest is written first) says a session ran here."""
    if not is_tape(tape_folder):
        return None
    flight = tape_folder.parent
    bag = flight / SESSION_BAG
    chunks = chunk_paths(tape_folder)
    cut_bag = bag.is_dir() and not (bag / "metadata.yaml").is_file()
    if not chunks and not cut_bag:
        return None
    last = max([c.stat().st_mtime for c in chunks] or [bag.stat().st_mtime])
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(last))
    kept = flight.parent / f"unfinished-{stamp}"
    n = 1
    while kept.exists():
        n += 1
        kept = flight.parent / f"unfinished-{stamp}-{n}"
    kept.mkdir(parents=True)
    if chunks:
        tape_folder.rename(kept / "tape")
        if (kept / "tape" / MISSION_COPY).is_file():
            shutil.copyfile(kept / "tape" / MISSION_COPY, kept / MISSION_COPY)
    if bag.is_dir():
        bag.rename(kept / SESSION_BAG)
    return kept
