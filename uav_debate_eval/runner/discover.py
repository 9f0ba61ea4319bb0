"""Which flights the command line names (CONTRACT.md §4), and where each one's report goes.

An input is a recording (a file `evaluate` reads, a rosbag2 folder or a live session's tape), a glob, or a folder
of flights as operators keep them: recordings at its top are one flight each, and any folder below that holds
recordings is one flight when they overlap in time (per-vehicle bags recorded together; io.loader.one_flight), else
one flight per recording; to any depth. Each flight is evaluated against its nearest mission.yaml (runner.job).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.live_tape import is_tape
from uav_debate_eval.io.loader import BAG_SUFFIXES, Span, input_kind, overlap_groups, readable_spans, unread_words
from uav_debate_eval.io.loader import one_flight as overlap
from uav_debate_eval.runner.job import nearest_mission
from uav_debate_eval.runner.spans import spans_ahead


@dataclass(frozen=True)
class FlightInputs:
    """One flight to evaluate: its recordings, its name (its path relative to the folder of flights given, else
    the input as given), the folder below --out its report goes to, and the mission file it will use."""

    name: str
    paths: tuple[Path, ...]
    folder: str
    mission: Path | None = None
    #: given inputs of this flight that cannot be read (each its one-line reason): the flight is the others'
    left_out: tuple[str, ...] = ()

    def left_out_notes(self) -> list[str]:
        """The report's notes (and the terminal's lines) on the inputs left out."""
        return [f"{why}: left out of the flight" for why in self.left_out]


@dataclass
class Plan:
    """The flights, whether they are a batch (one report folder each and a summary) and what to tell the user."""

    flights: list[FlightInputs]
    batch: bool
    messages: list[str] = field(default_factory=list)


@dataclass
class _Group:
    """Recordings found together: explicit inputs, the top of a folder of flights, or a flight's own folder."""

    paths: list[Path]
    names: list[str]  #: each recording's name (relative to the folder of flights, or as given)
    folders: list[str]  #: each recording's report folder (before `folder_names`)
    name: str = ""  #: a flight's own folder (relative): its recordings are one flight if they overlap
    each: bool = True  #: every recording is a flight of its own
    top: str = ""  #: the folder of flights whose top these recordings are


def is_recording(path: Path) -> bool:
    """A file of a kind `evaluate` reads, a rosbag2 folder (it always has metadata.yaml) or a live session's tape."""
    if path.is_dir():
        return (path / "metadata.yaml").is_file() or is_tape(path)
    try:
        input_kind(path)
    except InputError:
        return False
    return True


def plan_flights(raw: list[str], *, each: bool = False, one_flight: bool = False, mission: str | None = None,
                 out: Path | None = None) -> Plan:
    """The flights of the command line's inputs. `each` / `one_flight` force every recording to be its own flight /
    all to be one; `mission` (--mission) is every flight's mission; `out` is never searched for flights."""
    items: list[tuple[Path, bool, bool]] = []  # (input, is a folder of flights, given by name)
    explicit: list[Path] = []
    shaped = False  # a folder or glob: a batch whatever the spans
    for item in raw:
        path = Path(item)
        if not path.exists() and any(ch in item for ch in "*?["):
            matches = [m for m in sorted(Path(m) for m in glob.glob(item)) if m.is_dir() or is_recording(m)]
            if not matches:
                raise InputError(f"{item}: pattern matches no input")
            shaped = True
            items.extend((m, not is_recording(m), False) for m in matches)
        elif path.is_dir() and not is_recording(path):
            shaped = True
            items.append((path, True, True))
        else:
            input_kind(path)  # raises InputError for missing paths and unknown types
            explicit.append(path)
            items.append((path, False, True))
    several = sum(folder for _, folder, _ in items) > 1  # several folders of flights: names start with the folder's
    groups: list[_Group] = []
    for path, folder, named in items:
        if folder:
            found = _folder_groups(path, out, path.name if several else "")
            if not found and named:
                raise InputError(f"{path}: folder holds no input (.csv, .mcap, .db3, .bag, .ulg, .bin, .log, .tlog, "
                                 "rosbag2 folder or live tape, at any depth)")
            groups.extend(found)
        else:
            groups.append(_Group([path], [str(path)], [path.name]))
    if not groups:
        raise InputError(f"{' '.join(raw)}: no input found (.csv, .mcap, .db3, .bag, .ulg, .bin, .log, .tlog, "
                         "rosbag2 folder or live tape)")
    messages: list[str] = []
    every = [p for g in groups for p in g.paths]
    if one_flight:
        return Plan([_flight(every, " ".join(map(str, every)), "", mission)], False, messages)
    if not shaped and not each:
        if len(explicit) == 1:
            return Plan([_flight(explicit, str(explicit[0]), "", mission)], False, messages)
        readable, unread, (together, why), spans = readable_flight(explicit)
        if unread and together:
            # a show's one bad log among 500: the others are the flight (the bad one said, exit 2), not 499 flights
            messages.append(f"{len(explicit)} inputs: one flight of {len(readable)} ({why}); left out: "
                            + unread_words(unread))
            return Plan([_flight(readable, " ".join(map(str, readable)), "", mission, tuple(unread))], False,
                        messages)
        if unread:
            together, why = False, unread_words(unread)
        elif not together and (parts := overlapping_flights(explicit, spans)):
            # three flights' per-drone logs given together: each set a flight (before: every log alone, the
            # separation of none checked)
            messages.append(f"{len(explicit)} inputs: {len(parts)} flights by their time spans "
                            f"({', '.join(str(len(g)) for g in parts)} recordings); --each, --one-flight override")
            folders = folder_names([_parts_folder(g) for g in parts])
            return Plan([_flight(g, " ".join(map(str, g)), folder, mission) for g, folder in zip(parts, folders,
                                                                                               strict=True)],
                        True, messages)
        override = "" if unread else f"; {'--each' if together else '--one-flight'} overrides"
        messages.append(f"{len(explicit)} inputs: {'one flight' if together else 'evaluated one by one'} ({why})"
                        f"{override}")
        if together:
            return Plan([_flight(explicit, " ".join(map(str, explicit)), "", mission)], False, messages)
    flights: list[tuple[list[Path], str, str, tuple[str, ...]]] = []  # (recordings, name, report folder, left out)
    for g in groups:
        if not (g.each or each):
            readable, unread, (together, why), spans = readable_flight(g.paths) if len(g.paths) > 1 else \
                (g.paths, [], (True, ""), {})
            if together and not unread:
                flights.append((g.paths, g.name, g.name, ()))
                continue
            if together:  # one bad recording among a flight's: the others are the flight, the bad one said (exit 2)
                messages.append(f"{g.name}: one flight of {len(readable)} of its {len(g.paths)} recordings ({why}); "
                                "left out: " + unread_words(unread))
                flights.append((readable, g.name, g.name, tuple(unread)))
                continue
            if not unread and (parts := overlapping_flights(g.paths, spans)):
                messages.append(f"{g.name}: its {len(g.paths)} recordings are {len(parts)} flights by their time "
                                f"spans ({', '.join(str(len(p)) for p in parts)} recordings)")
                flights.extend((part, f"{g.name}/{_parts_folder(part)}", f"{g.name}/{_parts_folder(part)}", ())
                               for part in parts)
                continue
            messages.append(f"{g.name}: {len(g.paths)} recordings evaluated one by one "
                            f"({unread_words(unread) if unread else why})")
        elif g.top and not each and _one_flight_of_bags(g.paths):
            messages.append(f"{g.top}: its {len(g.paths)} bags overlap in time like one flight's (one per vehicle), "
                            "but the top of a folder of flights holds one flight per recording: --one-flight reads "
                            "them as one flight")
        flights.extend(([p], name, folder, ()) for p, name, folder in zip(g.paths, g.names, g.folders, strict=True))
    folders = folder_names([folder for _, _, folder, _ in flights])
    return Plan([_flight(paths, name, folder, mission, left_out)
                 for (paths, name, _, left_out), folder in zip(flights, folders, strict=True)], True, messages)


def readable_flight(paths: list[Path]) -> tuple[list[Path], list[str], tuple[bool, str], dict[Path, Span]]:
    """(the recordings whose time spans read, why each other one cannot be read, whether the readable ones, two or
    more, are one flight and why: io.loader.one_flight, the spans read), the spans of many logs read on every core.
    The unreadable ones are tried once."""
    spans, unread = readable_spans(paths, spans_ahead(paths))
    readable = [p for p in paths if p in spans]
    return readable, unread, overlap(readable, spans) if len(readable) > 1 else (False, ""), spans


def overlapping_flights(paths: list[Path], spans: dict[Path, Span]) -> list[list[Path]] | None:
    """Recordings that are not one flight (`spans`: readable_flight's), grouped into flights: those whose time spans
    overlap (io.loader.overlap_groups), each group one flight by io.loader.one_flight's rule; None unless some group
    holds two or more and every such group is one flight."""
    if len(paths) < 3:
        return None
    groups = overlap_groups(paths, spans)
    if all(len(g) == 1 for g in groups) or not all(overlap(g, spans)[0] for g in groups if len(g) > 1):
        return None
    return groups


def _parts_folder(paths: list[Path]) -> str:
    """A flight's report folder from its recordings' names: the first, and the last when there are several."""
    names = sorted(p.stem for p in paths)
    return names[0] if len(names) == 1 else f"{names[0]}-{names[-1]}"


def _one_flight_of_bags(paths: list[Path]) -> bool:
    """Whether several bags (their spans are cheap to read) would be one flight by the overlap rule."""
    bags = len(paths) > 1 and all(p.is_dir() or p.suffix.lower() in BAG_SUFFIXES for p in paths)
    return bags and overlap(paths)[0]


def _folder_groups(root: Path, out: Path | None, prefix: str) -> list[_Group]:
    """The recordings of a folder of flights, folder by folder (to any depth): its top's, then each folder's;
    named by their path relative to the folder (after `prefix/`, when several folders are given)."""
    skip = {os.path.abspath(out)} if out is not None else set()
    base = Path(prefix)
    groups = []
    for folder, recordings in _walk(root, skip, set()):
        rel = [(base / p.relative_to(root)).as_posix() for p in recordings]
        if folder == root:
            groups.append(_Group(recordings, rel, rel, top=str(root)))
        else:
            name = (base / folder.relative_to(root)).as_posix()
            groups.append(_Group(recordings, rel, rel, name=name, each=False))
    return groups


def recordings_in(folder: Path) -> list[Path]:
    """Every recording in a folder, at any depth (hidden folders left out), in name order folder by folder."""
    return [p for _, recordings in _walk(folder, set(), set()) for p in recordings]


def _walk(folder: Path, skip: set[str], seen: set[str]) -> Iterator[tuple[Path, list[Path]]]:
    """(folder, its recordings) for the folder and every folder below it, in name order; hidden folders (a
    report being written), --out and a folder met twice through a link are left out."""
    real = os.path.realpath(folder)
    if real in seen:
        return
    seen.add(real)
    recordings, below = [], []
    for p in sorted(folder.iterdir(), key=lambda p: p.name):
        if p.name.startswith(".") or os.path.abspath(p) in skip:
            continue
        if is_recording(p):
            recordings.append(p)
        elif p.is_dir():
            below.append(p)
    if recordings:
        yield folder, recordings
    for sub in below:
        yield from _walk(sub, skip, seen)


def _flight(paths: list[Path], name: str, folder: str, mission: str | None,
            left_out: tuple[str, ...] = ()) -> FlightInputs:
    return FlightInputs(name, tuple(paths), folder, Path(mission) if mission else nearest_mission(paths[0]), left_out)


def folder_names(folders: list[str]) -> list[str]:
    """Report folders below --out: `near.csv` -> `near_csv`, `site/f1.d` -> `site/f1_d`; the second of equal
    names gets `_2`, the third `_3`."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for folder in folders:
        base = "/".join(part.replace(".", "_") for part in Path(folder).parts) or "input"
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}_{n + 1}")
    return out
