"""A live session's tape on disk, read as a flight: `evaluate OUT/flight/.tape` (or the `unfinished-*` folder a
later session kept it in) when the session never made its flight report (killed, the machine lost power, a third
Ctrl-C). The tape is the poses as the verifier received them, spilled as each segment closed (live.tape); its
manifest names the vehicles (the chunks hold their indexes), and the session's mission file is kept beside it, so
`evaluate` finds it as it finds a mission.yaml beside any input.

What the session received beside the poses (its side streams: PX4 status and estimates flagged invalid, MAVROS
state, fixes and measured velocity, which vehicles report local frames) is kept beside the chunks as each one is
written (`session.npz`; the arrays' rows new since the last in `session-NNNNN.npz`) and put on the taped poses as
the live flight report puts them (`session_trajectory`, one code for both): a killed MAVROS session's frames are
still placed by their fixes, its pads still disarmed. Only what was received after the last closed segment is not
on the tape; the reading notes say so. A PX4 or Gazebo session's bag (OUT/flight/rosbag2) holds every message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.stamps import RESTART_S
from uav_debate_eval.core.trajectory import SwarmTrajectory

#: The manifest: format, version, the vehicles in index order.
MANIFEST = "tape.json"
#: The session's side streams (the live session dict's keys below).
SIDE = "session.npz"
#: Their arrays' rows, a numbered file per save (session-00000.npz, ...): each holds the rows new since the last.
SIDE_CHUNK = "session-"
SIDE_KEYS = ("px4", "mavros", "local_frames")
#: (side stream, key) of the arrays: MAVROS measured velocities, PX4 estimates flagged invalid (rows per vehicle)
_ARRAYS = (("mavros", "velocities"), ("px4", "invalid"))
#: A chunk stamped beyond this (s; NaN too) is damaged: stream clocks are unix or simulation seconds.
MAX_STAMP_S = 1e11
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


def save_side(folder: Path, session: dict, saved: dict[str, int] | None = None) -> None:
    """The session's side streams so far (SIDE_KEYS of the live session dict): their arrays' new rows in a numbered
    file of their own, then the rest as JSON, replaced whole. `saved`: the rows of each array already written (the
    tape's, updated here), so each close writes what came since the last (a session's measured velocities grow a
    few MB a minute); None: every row again, the side files replaced."""
    if saved is None:
        for old in side_chunks(folder):
            old.unlink()
        saved = {}
    side = {k: session[k] for k in SIDE_KEYS if session.get(k)}
    arrays: dict[str, Any] = {}  # (np.savez: keyword arrays)
    index: dict[str, dict[str, str]] = {}
    for stream, key in _ARRAYS:
        if by_uav := (side.get(stream) or {}).get(key):
            side[stream] = {k: v for k, v in side[stream].items() if k != key}
            for uav, rows in by_uav.items():
                rows = np.asarray(rows, dtype=float)
                done = saved.get(f"{stream}.{key}.{uav}", 0)
                if len(rows) > done:
                    index.setdefault(f"{stream}.{key}", {})[uav] = name = f"a{len(arrays)}"
                    arrays[name] = rows[done:]
    if arrays:
        _whole(folder / f"{SIDE_CHUNK}{len(side_chunks(folder)):05d}.npz",
               lambda fh: np.savez(fh, index=np.array(json.dumps(index)), **arrays))
        for path, by_uav in index.items():
            for uav, name in by_uav.items():
                saved[f"{path}.{uav}"] = saved.get(f"{path}.{uav}", 0) + len(arrays[name])
    text = json.dumps(side, default=lambda o: o.item() if hasattr(o, "item") else str(o))
    _whole(folder / SIDE, lambda fh: np.savez(fh, side=np.array(text)))


def side_chunks(folder: Path) -> list[Path]:
    """The side streams' array files in the order they were written."""
    return sorted(folder.glob(f"{SIDE_CHUNK}[0-9]*.npz"))


def load_side(folder: Path) -> dict | None:
    """The side streams `save_side` kept ({} for a session without any; None when none are kept or they cannot be
    read: a tape of an older version, or a file cut by the kill)."""
    try:
        with np.load(folder / SIDE) as stored:
            side = json.loads(str(stored["side"]))
            for path, by_uav in side.pop("arrays", {}).items():  # an older tape: the arrays in this file
                stream, key = path.split(".", 1)
                side.setdefault(stream, {})[key] = {uav: stored[name] for uav, name in by_uav.items()}
        parts: dict[str, dict[str, list[np.ndarray]]] = {}
        for chunk in side_chunks(folder):
            with np.load(chunk) as stored:
                for path, by_uav in json.loads(str(stored["index"])).items():
                    for uav, name in by_uav.items():
                        parts.setdefault(path, {}).setdefault(uav, []).append(stored[name])
        for path, by_uav in parts.items():
            stream, key = path.split(".", 1)
            side.setdefault(stream, {})[key] = {uav: np.concatenate(rows) for uav, rows in by_uav.items()}
    except Exception:  # noqa: BLE001  (a damaged zip, JSON or array: numpy, zipfile and zlib raise their own types)
        return None
    return side


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
    parts = [(u, latest_run(np.asarray(r, dtype=float).reshape(-1, 8))) for u, r in invalid.items() if len(r)]
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


def session_trajectory(columns: tuple[np.ndarray, np.ndarray], side: dict, name: str = "live flight"
                       ) -> SwarmTrajectory:
    """The taped poses with what the session received beside them, put on as the bag reader puts the recorded
    streams: PX4's estimates flagged invalid among the poses and its vehicle_status / land detector as events;
    MAVROS's measured velocity on the poses, its local frames placed by their fixes (else marked local), its state
    and extended state as events. `side`: the live session's SIDE_KEYS (save_side / load_side give them back)."""
    from uav_debate_eval.core.arming import LANDING_WORDS, state_events
    from uav_debate_eval.io.mavros_fixes import placed_note, tape_offsets
    from uav_debate_eval.quality.frames import LOCAL, PLACED

    mavros, px4_status = side.get("mavros") or {}, side.get("px4") or {}
    invalid = px4_status.get("invalid") or {}
    columns, validity = with_invalid_rows(columns, invalid)  # PX4's invalid estimates: the bag reader holds them
    measured = put_measured_velocity(columns, mavros.get("velocities", {}))  # MAVROS velocity_local, as a bag's
    traj = tape_trajectory(columns, name, validity=validity)
    if offsets := tape_offsets(traj, mavros.get("fixes", {}), mavros.get("anchor")):  # MAVROS frames by their fixes
        traj = tape_trajectory(columns, name, offsets=offsets, validity=validity)
    notes = traj.ingest.notes
    notes.extend(f"{u}: velocity measured by {mavros['velocity_topics'][u]}" for u in measured)
    notes.extend(placed_note(u, mavros["anchor"], offset) for u, offset in offsets.items())
    notes.extend(f"{u}: {len(rows)} samples flagged not valid by the estimator, received live and not checked by the "
                 "verifier" for u, rows in invalid.items() if len(rows))
    if px4_status:  # vehicle_status as the bag reader reads it (the vehicle class too)
        from uav_debate_eval.io.px4 import StatusFields, apply_landing, apply_status

        for uav, rows in px4_status.get("statuses", {}).items():
            if uav in px4_status["offsets"]:
                apply_status(traj, uav, [StatusFields(*r) for r in rows], px4_status["offsets"][uav])
        for uav, rows in px4_status.get("landings", {}).items():
            if uav in px4_status["offsets"]:
                apply_landing(traj, uav, rows, px4_status["offsets"][uav])
        for uav in px4_status.get("spawned", []):  # placed at the mission's origin as received: not placed again
            if uav in traj.tracks:
                traj.tracks[uav].frame = PLACED
    for uav in side.get("local_frames") or []:  # MAVROS local_position: each vehicle's own frame, as a bag's
        if uav in traj.tracks and uav not in offsets:
            traj.tracks[uav].frame = LOCAL
    for uav, states in mavros.get("states", {}).items():  # MAVROS state: the arming, as the bag reader reads it
        if uav in traj.tracks:
            state_events(traj.ingest.log_events, uav, states, traj.t0, "mavros/state")
    for uav, states in mavros.get("landings", {}).items():  # and the extended state's landed state
        if uav in traj.tracks:
            state_events(traj.ingest.log_events, uav, states, traj.t0, "mavros/extended_state", LANDING_WORDS)
    return traj


def latest_run(rows: np.ndarray) -> np.ndarray:
    """A session's side rows (stamp first, in the order received) from the last time their clock went back on: a
    clock jump restarts the tape with the new flight (live.tape), while the session kept the rows of the one before
    (a simulator restarted: stamps of both runs overlap, and the earlier run's velocities landed on the new poses)."""
    back = np.flatnonzero(np.diff(rows[:, 0]) < -RESTART_S)
    return rows[back[-1] + 1:] if len(back) else rows


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
        rows = latest_run(np.asarray(rows, dtype=float).reshape(-1, 4))
        if len(rows) < 2 or not mask.any():
            continue
        data[mask, 5:8] = velocity_at(stamp_s(stamp_ns(data[mask, 1])), stamp_s(stamp_ns(rows[:, 0])), rows[:, 1:4])
        done.append(uav)
    return done


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
                not len(rows) or int(rows[:, 0].max()) < len(vehicles)
            ) and bool((np.abs(rows[:, 1]) < MAX_STAMP_S).all())
        except Exception:  # noqa: BLE001  (a damaged .npy: numpy raises ValueError, EOFError, tokenize's TokenError)
            ok = False
        (good if ok else lost).append(chunk)
    columns = tape_columns(good, vehicles)
    if columns is None or not len(columns[0]):
        raise InputError(f"{folder}: the live tape holds no pose" + (f" ({len(lost)} unreadable chunk(s))"
                                                                      if lost else ""))
    side = load_side(folder)
    try:
        traj = session_trajectory(columns, side or {}, name="live tape")
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):  # side streams damaged on disk: the poses
        side = None  # alone, read again (a velocity may have been put on them before the damage showed)
        again = tape_columns(good, vehicles)
        assert again is not None  # (the chunks held poses above)
        traj = tape_trajectory(again, "live tape")
    traj.ingest.notes.append(
        f"a live session's tape ({len(good)} chunk(s), {len(columns[0])} poses of {len(set(columns[1]))} "
        "vehicle(s), taped as its segments closed): the session ended without its flight report, so the poses "
        "received after its last closed segment are not in this flight" + (
            f", nor what its side streams ({', '.join(sorted(side))}) received after it" if side else
            "; its side streams (PX4 status, MAVROS state and fixes), if it had any, were not kept or cannot be read"
            if side is None else ""))
    if lost:
        traj.ingest.notes.append(f"{len(lost)} tape chunk(s) unreadable (cut when the session was killed) and left "
                                 f"out: {', '.join(c.name for c in lost)}")
    return traj
