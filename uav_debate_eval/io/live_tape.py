"""A live session's tape on disk, read as a flight: `evaluate OUT/flight/.tape` (or the `unfinished-*` folder a
later session kept it in) when the session never made its flight report (killed, the machine lost power, a third
Ctrl-C). The tape is the poses as the verifier received them, spilled as each segment closed (live.tape); its
manifest names the vehicles (the chunks hold their indexes), and the session's mission file is kept beside it, so
`evaluate` finds it as it finds a mission.yaml beside any input.

What only the session knew at its end is not on the tape: the poses received after its last closed segment, and
its side streams (MAVROS velocities, fixes and states, PX4 status and estimates flagged invalid); the reading notes
say so. A PX4 or Gazebo session's bag (OUT/flight/rosbag2) holds those messages and is recovered when cut.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.trajectory import SwarmTrajectory

#: The manifest: format, version, the vehicles in index order.
MANIFEST = "tape.json"
FORMAT = "uav_debate_eval live tape"
VERSION = 1


def is_tape(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def write_manifest(folder: Path, vehicles: list[str]) -> None:
    """The vehicles as the chunks index them, replaced whole (a kill leaves the old manifest or the new)."""
    body = json.dumps({"format": FORMAT, "version": VERSION, "vehicles": vehicles}).encode()
    _whole(folder / MANIFEST, lambda fh: fh.write(body))


def save_chunk(path: Path, data: np.ndarray) -> None:
    """One chunk, written whole or not at all."""
    _whole(path, lambda fh: np.save(fh, data))


def _whole(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """`write` into a hidden file beside `path`, then renamed into place."""
    part = path.with_name(f".{path.name}.part")
    with part.open("wb") as fh:
        write(fh)
    os.replace(part, path)


def chunk_paths(folder: Path) -> list[Path]:
    """The chunks in the order they were taped (numbered names)."""
    return sorted(folder.glob("[0-9]*.npy"))


def tape_columns(chunks: list[Path], vehicles: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """The taped rows (vehicle index, t, x, y, z, vx, vy, vz) and each row's vehicle; None when the tape is empty."""
    if not chunks:
        return None
    data = np.concatenate([np.load(c) for c in chunks])
    return data, np.asarray(vehicles, dtype=object)[data[:, 0].astype(int)]


def tape_trajectory(columns: tuple[np.ndarray, np.ndarray], name: str = "live flight",
                    offsets: dict[str, np.ndarray] | None = None,
                    validity: tuple[np.ndarray, np.ndarray] | None = None) -> SwarmTrajectory:
    """`tape_columns` as a trajectory. `offsets`: vehicles' local frames moved into the world frame (ENU m) before
    the trajectory is made, so its derived velocities are those of the placed samples, as the replay of its MCAP
    derives them. `validity`: each row's (position valid, altitude valid) flags (`with_invalid_rows`)."""
    from uav_debate_eval.io.flight_mcap import poses_trajectory, stamp_ns

    data, ids = columns
    pos = data[:, 2:5].copy() if offsets else data[:, 2:5]
    for uav, offset in (offsets or {}).items():
        pos[ids == uav] += offset
    traj = poses_trajectory(stamp_ns(data[:, 1]), ids, pos, data[:, 5:8], name,  # NaN: not measured
                            validity=validity)
    for tr in traj.tracks.values() if validity is not None else ():
        tr.drop_redundant_validity()
    return traj


def with_invalid_rows(columns: tuple[np.ndarray, np.ndarray], invalid: dict[str, list[tuple[float, ...]]]
                      ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray] | None]:
    """The taped rows with the samples an estimator flagged invalid put among them, and each row's (position valid,
    altitude valid) flags, as the bag reader gives a PX4 flight's (io.ulog.combine); (columns, None) without such
    samples. `invalid`: (t, x, y, z, vx, vy, vz, altitude valid) rows per vehicle (io.px4.LiveFrames.invalid_rows:
    never taped, the verifier does not check them). Each vehicle's rows end in time order (a PX4 instance's stamps
    only grow, invalid samples' too); their vehicle index is -1 (not on the tape)."""
    parts = [(u, np.asarray(r, dtype=float).reshape(-1, 8)) for u, r in invalid.items() if len(r)]
    if not parts:
        return columns, None
    data, ids = columns
    extra = np.concatenate([r for _, r in parts])
    rows = np.concatenate([data, np.column_stack([np.full(len(extra), -1.0), extra[:, :7]])])
    names = np.concatenate([ids, np.concatenate([np.full(len(r), u, dtype=object) for u, r in parts])])
    valid = np.concatenate([np.ones(len(data), dtype=bool), np.zeros(len(extra), dtype=bool)])
    altitude = np.concatenate([np.ones(len(data), dtype=bool), extra[:, 7] > 0.5])
    order = np.lexsort((rows[:, 1], np.unique(names.astype(str), return_inverse=True)[1]))  # stable
    return (rows[order], names[order]), (valid[order], altitude[order])


def read_tape(folder: Path) -> SwarmTrajectory:
    """The tape's poses as a flight; a chunk that cannot be read (cut by a kill) costs its own rows, said in a
    note; InputError when the manifest is not a tape's or no chunk holds a pose."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        vehicles = [str(v) for v in manifest["vehicles"]]
        if manifest.get("format") != FORMAT:
            raise ValueError(manifest.get("format"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{folder}: {MANIFEST} is not a live session's tape manifest ({exc})") from None
    good: list[Path] = []
    lost: list[Path] = []
    for chunk in chunk_paths(folder):
        try:
            rows = np.load(chunk)
            ok = rows.ndim == 2 and rows.shape[1] == 8 and bool((rows[:, 0] >= 0).all()) and (
                not len(rows) or int(rows[:, 0].max()) < len(vehicles))
        except (OSError, ValueError, EOFError):
            ok = False
        (good if ok else lost).append(chunk)
    columns = tape_columns(good, vehicles)
    if columns is None or not len(columns[0]):
        raise InputError(f"{folder}: the live tape holds no pose" + (f" ({len(lost)} unreadable chunk(s))"
                                                                      if lost else ""))
    traj = tape_trajectory(columns, name="live tape")
    traj.ingest.notes.append(
        f"a live session's tape ({len(good)} chunk(s), {len(columns[0])} poses of {len(set(columns[1]))} "
        "vehicle(s), taped as its segments closed): the session ended without its flight report, so the poses "
        "after its last closed segment and its side streams (MAVROS velocity, fixes and state, PX4 status and "
        "estimates flagged invalid) are not in this flight")
    if lost:
        traj.ingest.notes.append(f"{len(lost)} tape chunk(s) unreadable (cut when the session was killed) and left "
                                 f"out: {', '.join(c.name for c in lost)}")
    return traj
