"""Pick the reader for each input: contract CSV, rosbag2 (dir, .mcap, .db3), ROS 1 .bag, PX4 .ulg, ArduPilot
.bin / .tlog, a live session's tape (dir)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from uav_debate_eval.core.errors import InputError, reading
from uav_debate_eval.core.records import IngestReport
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.kept_reads import parsed
from uav_debate_eval.io.live_tape import is_tape, read_tape
from uav_debate_eval.io.log_end import mark_ends_in_flight
from uav_debate_eval.io.names import apply_names

BAG_SUFFIXES = (".mcap", ".db3", ".bag")


def input_kind(path: Path) -> str:
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        if is_tape(path):  # a live session's tape (io.live_tape)
            return "tape"
        if (path / "metadata.yaml").exists() or len(list(path.glob("*.mcap"))) == 1:  # a recorder killed: no metadata
            return "rosbag2"
        raise InputError(f"{path}: directory is not a rosbag2 (no metadata.yaml inside) nor a live session's tape "
                         "(no tape.json)")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".mcap", ".db3"):
        return "rosbag2"
    if suffix == ".bag" or path.name.lower().endswith(".bag.active"):  # .active: a recorder that never closed it
        return "ros1"
    if suffix == ".ulg":
        return "ulog"
    if suffix in (".bin", ".tlog"):
        return "ardupilot"
    if suffix == ".log":
        from uav_debate_eval.io.dataflash_text import is_text_dataflash

        if is_text_dataflash(path):  # not every .log: a folder of flights holds other programs' logs
            return "ardupilot"
        raise InputError(f"{path}: a .log that is not an ArduPilot DataFlash text log (no FMT line near its start)")
    raise InputError(f"{path}: unknown input type '{suffix or 'no suffix'}' (expected .csv, .mcap, .db3, .bag, "
                     ".ulg, .bin, .log, .tlog, a rosbag2 directory or a live session's tape)")


def load_inputs(paths: list[str | Path], topics: list[str] | None = None, names: list[str] | None = None,
                vehicles: list[str] | None = None, vehicle_regex: str | None = None) -> SwarmTrajectory:
    """Read one flight from the inputs: several .ulg (or ArduPilot .bin/.tlog) files are one vehicle each (a .tlog
    may hold several); several other files (per-drone
    bags or CSVs recorded together) are merged on one clock. `vehicles` (mission globs) or `vehicle_regex`
    (--vehicles) say which pose sources are vehicles."""
    files = [Path(p) for p in paths]
    if not files:
        raise InputError("no input given")
    kinds = [input_kind(p) for p in files]
    with reading(", ".join(str(p) for p in files)):
        traj = _read_all(files, kinds, topics, names)
    return select_vehicles(traj, vehicles or [], vehicle_regex)


def _read_all(files: list[Path], kinds: list[str], topics: list[str] | None,
              names: list[str] | None) -> SwarmTrajectory:
    if all(k in ("ardupilot", "ulog") for k in kinds):
        if all(k == "ulog" for k in kinds):
            from uav_debate_eval.io.ulog import read_ulogs

            traj = read_ulogs(files, names=names)
        else:
            from uav_debate_eval.io.ardupilot import read_ardupilot_logs

            traj = read_ardupilot_logs(files, names=names)
        mark_ends_in_flight(traj)  # an autopilot's log: it knows whether it stopped in the air
        return traj
    if len(files) == 1:
        return _read_one(files[0], kinds[0], topics, names)
    traj = merge_flights([_read_one(p, k, topics, None) for p, k in zip(files, kinds, strict=True)], files)
    return apply_names(traj, names, "inputs")


def _read_one(path: Path, kind: str, topics: list[str] | None, names: list[str] | None, *,
              keep: bool = False) -> SwarmTrajectory:
    """One input's flight; `keep`: keep what was parsed for the flight's read (io.kept_reads)."""
    if kind == "csv":
        from uav_debate_eval.io.csv_io import read_csv

        return apply_names(parsed(path, read_csv, keep=keep), names, str(path))
    if kind == "ulog":
        from uav_debate_eval.io.ulog import read_ulogs

        return read_ulogs([path], names=names)
    if kind == "ardupilot":
        from uav_debate_eval.io.ardupilot import read_ardupilot_logs

        return read_ardupilot_logs([path], names=names, keep=keep)
    if kind == "tape":
        return apply_names(read_tape(path), names, str(path))
    from uav_debate_eval.io.flight_mcap import is_flight_mcap, read_flight_mcap

    if is_flight_mcap(path):  # the annotated MCAP of `evaluate --mcap-out` or `live` (OUT/flight/flight.mcap)
        return read_flight_mcap(path, names=names)
    from uav_debate_eval.io.rosbag import read_bag

    return read_bag(path, topics=topics, names=names)


def merge_flights(trajs: list[SwarmTrajectory], paths: list[Path]) -> SwarmTrajectory:
    """Several recordings of one flight (one per drone) on one clock; a vehicle id that occurs in several files
    is named after its file. Each track keeps its own source and the end of its own recording."""
    counts: dict[str, int] = {}
    for flight in trajs:
        for u in flight.uav_ids:
            counts[u] = counts.get(u, 0) + 1
    cols: dict[str, list] = {k: [] for k in ("t", "id", "pos", "vel", "quat", "valid", "z_valid")}
    meta: dict[str, tuple[str, bool, str, float]] = {}
    notes: list[str] = []
    renames: list[dict[str, str]] = []
    for flight, path in zip(trajs, paths, strict=True):
        renames.append({})
        for u, tr in flight.tracks.items():
            name = u if counts[u] == 1 else (path.stem if len(flight.tracks) == 1 else f"{path.stem}/{u}")
            if name != u:
                renames[-1][u] = name
                notes.append(f"{path.name}: vehicle {u} named {name} (the id occurs in several inputs)")
            n = len(tr)
            cols["t"].append(tr.t + flight.t0)
            cols["id"].append(np.full(n, name, dtype=object))
            cols["pos"].append(tr.pos)
            cols["vel"].append(np.full((n, 3), np.nan) if tr.vel_derived else tr.vel)
            cols["quat"].append(tr.quat if tr.quat is not None else np.full((n, 4), np.nan))
            cols["valid"].append(np.ones(n, dtype=bool) if tr.est_valid is None else tr.est_valid)
            cols["z_valid"].append(cols["valid"][-1] if tr.est_z_valid is None else tr.est_z_valid)
            end = flight.t0 + (tr.recording_end if tr.recording_end is not None else flight.t_end)
            meta[name] = (tr.source or str(path), tr.receive_time, tr.frame, end)
        notes.extend(f"{path.name}: {n}" for n in flight.ingest.notes)
    merged = SwarmTrajectory.from_columns(
        np.concatenate(cols["t"]), np.concatenate(cols["id"]).astype(str), np.concatenate(cols["pos"]),
        vel=np.concatenate(cols["vel"]), quat=np.concatenate(cols["quat"]), est_valid=np.concatenate(cols["valid"]),
        est_z_valid=np.concatenate(cols["z_valid"]), name="+".join(t.name for t in trajs))
    for u, track in merged.tracks.items():
        track.source, track.receive_time, track.frame, end = meta[u]
        track.recording_end = end - merged.t0
        track.drop_redundant_validity()
    merged.ingest.rows_in = 0
    for flight, names in zip(trajs, renames, strict=True):
        _carry_ingest(merged.ingest, flight.ingest, names, flight.t0 - merged.t0)
    merged.ingest.notes.append(f"{len(paths)} inputs merged into one flight on one clock: "
                               + ", ".join(p.name for p in paths))
    merged.ingest.notes.extend(notes)
    return merged


def _carry_ingest(merged: IngestReport, own: IngestReport, names: dict[str, str], shift: float) -> None:
    """What one input's ingest counted and found, in the merged flight's time and names (its rows were read
    clean: the merge re-reads only what the input kept)."""
    merged.rows_in += own.rows_in
    for reason, n in own.dropped.items():
        merged.count(reason, n)
    merged.out_of_order += own.out_of_order

    def renamed(uavs: list[str]) -> list[str]:
        return [names.get(u, u) for u in uavs]

    merged.findings.extend(replace(f, uavs=renamed(f.uavs), t_start=f.t_start + shift, t_end=f.t_end + shift)
                           for f in own.findings)
    merged.not_evaluable.extend(
        replace(n, uavs=renamed(n.uavs), t_start=None if n.t_start is None else n.t_start + shift,
                t_end=None if n.t_end is None else n.t_end + shift) for n in own.not_evaluable)


def select_vehicles(traj: SwarmTrajectory, patterns: list[str], regex: str | None) -> SwarmTrajectory:
    """Keep the pose sources that are vehicles; record what was taken and why in `traj.ingest.vehicles`."""
    rx = None
    if regex:
        try:
            rx = re.compile(regex)
        except re.error as exc:
            raise InputError(f"--vehicles: not a regular expression: {exc}") from exc
    taken: list[dict[str, Any]] = []
    for u, tr in list(traj.tracks.items()):
        keys = [u, tr.source]
        if rx is not None:
            ok, why = any(rx.search(k or "") for k in keys), f"--vehicles {regex}"
        elif patterns:
            hit = next((p for p in patterns if any(fnmatch.fnmatchcase(k or "", p) for k in keys)), None)
            ok, why = hit is not None, f"mission vehicles: {hit}" if hit else "matches no mission vehicles pattern"
        else:
            ok, why = True, "every pose source counts (no vehicles list given)"
        taken.append({"uav": u, "source": tr.source, "vehicle": ok, "why": why if ok or rx is None
                      else f"does not match --vehicles {regex}"})
        if not ok:
            del traj.tracks[u]
    if (patterns or rx) and not traj.tracks:
        names = ", ".join(t["uav"] for t in taken)
        raise InputError(f"no pose source matches the vehicles selection (sources: {names})")
    traj.ingest.vehicles = taken
    return traj


#: Stamps above this (s) are an absolute clock (unix time): overlapping spans then mean recorded together.
ABSOLUTE_CLOCK_S = 1e8


Span = tuple[float, float, list[str]]


def unread_words(unread: list[str]) -> str:
    """Why inputs cannot be read, for one line: the first three reasons and how many more."""
    return "; ".join(unread[:3]) + (f" and {len(unread) - 3} more" if len(unread) > 3 else "")


def one_flight(paths: list[Path], known: dict[Path, Span] | None = None) -> tuple[bool, str]:
    """Whether several inputs are one flight (CONTRACT.md §4): their time spans overlap and they hold different
    vehicles (or share an absolute clock); returns the answer and the reason the terminal shows. `known`: spans
    already read (runner.spans: many logs on every core)."""
    known, unread = readable_spans(paths, known)
    if unread:  # say whether the others are one flight: a show's 499 logs are not 499 flights to the operator
        readable = [p for p in paths if p in known]
        rest = len(readable) > 1 and one_flight(readable, known)[0]
        return False, unread_words(unread) + (
            f"; the other {len(readable)} are one flight: give them without it" if rest else "")
    spans = [(t0, t1, set(ids), p.name) for p, (t0, t1, ids) in known.items() if p in paths]
    spans.sort()
    if px4_logs_only(paths) and not all(t0 > ABSOLUTE_CLOCK_S for t0, _, _, _ in spans):
        return True, "PX4 logs are one vehicle each (without GPS time in every one, aligned at their starts)"
    groups = overlap_groups([p for p in paths if p in known], known)
    if len(groups) > 1:
        return False, f"time spans do not overlap ({groups[1][0].name} starts after the others end)"
    seen: set[str] = set()
    shared: set[str] = set()
    for _, _, held, _ in spans:
        shared |= seen & held
        seen |= held
    absolute = all(t0 > ABSOLUTE_CLOCK_S for t0, _, _, _ in spans)
    if shared and not absolute:
        return False, f"they overlap in time but each holds {', '.join(sorted(shared))}: separate flights"
    return True, "their time spans overlap" + (" on one absolute clock" if absolute else " with different vehicles")


def overlap_groups(paths: list[Path], spans: dict[Path, Span]) -> list[list[Path]]:
    """`paths` in order of their spans (`spans`: io.loader.span's), cut where one starts after every earlier one has
    ended: each group's spans overlap, one after another."""
    groups: list[list[Path]] = []
    reach = 0.0
    for p in sorted(paths, key=lambda q: (spans[q][0], spans[q][1], q.name)):
        t0, t1, _ = spans[p]
        if groups and t0 <= reach:
            groups[-1].append(p)
            reach = max(reach, t1)
        else:
            groups.append([p])
            reach = t1
    return groups


def px4_logs_only(paths: list[Path]) -> bool:
    """PX4 logs, one vehicle each: one flight unless their GPS times say apart (two days' logs of one vehicle given
    together were one flight: a 690-day grid, 51 GB, a MemoryError)."""
    return all(p.suffix.lower() == ".ulg" for p in paths)


def readable_spans(paths: list[Path], known: dict[Path, Span] | None = None) -> tuple[dict[Path, Span], list[str]]:
    """The spans of the inputs that can be read (`known` ones not read again) and, for the others, why not."""
    spans, unread = {}, []
    for p in paths:
        try:
            spans[p] = known[p] if known and p in known else span(p)
        except InputError as exc:  # the batch reports it for this input alone
            unread.append(f"{p.name} cannot be read ({exc})")
    return spans, unread


def span(path: Path) -> Span:
    """(first, last stamp on the input's own clock, vehicle ids), as cheaply as the format allows."""
    kind = input_kind(path)
    if kind in ("rosbag2", "ros1"):
        from uav_debate_eval.io.rosbag import bag_span

        return bag_span(path)
    if kind == "ulog":
        from uav_debate_eval.io.ulog import ulog_span

        with reading(str(path)):
            return ulog_span(path)
    with reading(str(path)):
        traj = _read_one(path, kind, None, None, keep=True)
    return traj.t0, traj.t0 + traj.t_end, traj.uav_ids
