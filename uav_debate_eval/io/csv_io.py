"""The contract trajectory CSV (CONTRACT.md §1): long format, any row order, messy rows reported.

Spreadsheets write the same table in their own dialects, all read alike: a UTF-8 byte-order mark (Excel's "CSV
UTF-8", PowerShell), cells separated by ';' (a regional Excel, where ',' is the decimal point) or by tabs; the
separator is the one that splits the header into the contract's columns, decimal commas are taken in a ';' or
tab-separated file whose numbers have them, and the report's notes say how the file was read.
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.trajectory import SwarmTrajectory, VehicleCodes

REQUIRED = ("t", "uav_id", "x", "y", "z")
OPTIONAL = ("vx", "vy", "vz", "qx", "qy", "qz", "qw", "link_ok", "gps_ok", "battery_pct")
#: No clock in seconds reaches 1e11 (the year 5138): a `t` that large is unix time in milliseconds, microseconds or
#: nanoseconds (ROS stamps exported as integers), read as seconds by the power of 1000 that brings it below.
EPOCH_LIMIT_S = 1e11
_UNITS = {1e3: "milliseconds", 1e6: "microseconds", 1e9: "nanoseconds"}
#: A vehicle sampled once a minute is no flight record: t in another unit (milliseconds since boot read as seconds
#: make a 12-m/s vehicle fly at 0.012 m/s, and the overspeed vanishes).
MAX_SAMPLE_PERIOD_S = 60.0
#: Vehicles moving faster than sound most of the time are positions in another unit (motion capture exports
#: millimetres: a 0.3-m near miss reads as 300 m apart): the 90th percentile of the speeds between samples.
MAX_TYPICAL_SPEED_MPS = 343.0
_SPEED_TRACKS = 64  # tracks the typical speed is taken on (evenly spaced): a threshold, not a result


#: Data lines looked at for decimal commas.
_SNIFF_LINES = 20
_DECIMAL_COMMA = re.compile(r"^\s*[+-]?\d+,\d+(?:[eE][+-]?\d+)?\s*$")


@dataclass(frozen=True)
class Dialect:
    """How the file separates its cells and writes its decimal point."""

    delimiter: str = ","
    decimal_comma: bool = False

    def note(self) -> str | None:
        if self.delimiter == "," and not self.decimal_comma:
            return None
        kind = "tabs (a tab-separated export)" if self.delimiter == "\t" else f"'{self.delimiter}'"
        return (f"cells separated by {kind}" + (" with decimal commas" if self.decimal_comma else "")
                + " read as the contract's columns")


def _floats(values: list[str]) -> tuple[np.ndarray, int]:
    """Parse a text column; unparsable cells become NaN and are counted."""
    try:
        return np.asarray(values, dtype=float), 0
    except ValueError:
        out = np.empty(len(values))
        bad = 0
        for i, v in enumerate(values):
            try:
                out[i] = float(v)
            except ValueError:
                out[i] = np.nan
                bad += v.strip() != ""
        return out, bad


def read_csv(path: str | Path, name: str | None = None) -> SwarmTrajectory:
    """Read a contract CSV: pyarrow's multi-threaded columnar reader for regular files; any irregular row
    (short or long rows, cells that are not numbers) falls back to the row-by-row reader, which keeps
    every row and says what it repaired. Both give the same trajectory for a regular file."""
    path = Path(path)
    header, dialect = _header(path)
    columns = _read_columnar(path, header, dialect)
    if columns is None:
        traj = _read_rows(path, name, dialect)
    else:
        ids = columns.pop("uav_id")
        arrays = {k: v for k, v in columns.items() if isinstance(v, np.ndarray)}  # every column but uav_id
        traj = _trajectory(path, name, arrays, ids, rows=len(ids), unparsable=0, short=0)
    if (note := dialect.note()) is not None:
        traj.ingest.notes.append(note)
    return traj


@contextlib.contextmanager
def _read_errors(path: Path) -> Iterator[None]:
    """Reading the file's text: an unreadable, non-UTF-8 or malformed file is bad input, said in one line."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a UTF-8 text CSV") from None
    except csv.Error as exc:
        raise InputError(f"{path}: malformed CSV: {exc}") from None


def _header(path: Path) -> tuple[list[str], Dialect]:
    """The stripped header names (a byte-order mark dropped) and the file's dialect; InputError for unreadable,
    empty or incomplete files."""
    with _read_errors(path), path.open(newline="", encoding="utf-8-sig") as fh:
        first = fh.readline()
        if not first.strip():
            raise InputError(f"{path}: empty file, expected a header with {', '.join(REQUIRED)}")
        delimiter = next((d for d in (",", ";", "\t") if set(REQUIRED) <= set(_split(first, d))), ",")
        header = _split(first, delimiter)
        sample = [fh.readline() for _ in range(_SNIFF_LINES)] if delimiter != "," else []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"{path}: missing required column(s): {', '.join(missing)}")
    decimal_comma = any(_DECIMAL_COMMA.match(cell) for line in sample for cell in line.split(delimiter))
    return header, Dialect(delimiter, decimal_comma)


def _split(line: str, delimiter: str) -> list[str]:
    return [h.strip() for h in next(csv.reader([line], delimiter=delimiter), [])]


def _read_columnar(path: Path, header: list[str], dialect: Dialect) -> dict[str, np.ndarray | VehicleCodes] | None:
    """Known columns as float64 arrays (empty cells NaN) and the stripped uav_id as VehicleCodes; None if any row
    is irregular."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if len(set(header)) != len(header):
        return None
    known = [h for h in header if h in REQUIRED + OPTIONAL]
    # uav_id parsed as a dictionary (few distinct names, decoded once each; the rows keep integer codes, which
    # from_columns groups by): no pass of pyarrow.compute over the column, nor its import (~45 ms at 1.2M rows)
    types = {h: pa.dictionary(pa.int32(), pa.string()) if h == "uav_id" else pa.float64() for h in known}
    try:
        table = pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            parse_options=pacsv.ParseOptions(delimiter=dialect.delimiter),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=known, null_values=[""],
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False,
                                                 decimal_point="," if dialect.decimal_comma else "."))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    out = {h: table[h].to_numpy(zero_copy_only=False) for h in known if h != "uav_id"}
    for h, values in out.items():
        out[h] = np.asarray(values, dtype=float)  # nulls (empty cells) come back as NaN
    ids = table["uav_id"].combine_chunks()  # one dictionary for the file
    stripped = [str(name).strip() for name in ids.dictionary.to_pylist()]  # as the row reader strips them
    first: dict[str, int] = {}
    code_of = np.array([first.setdefault(name, len(first)) for name in stripped], dtype=np.intp)
    codes = code_of[np.asarray(ids.indices.to_numpy(zero_copy_only=False), dtype=np.intp)]
    out["uav_id"] = VehicleCodes(np.asarray(list(first), dtype=str), codes)
    del table, ids
    pa.default_memory_pool().release_unused()  # the parse buffers (~0.2 GB per million rows) go back to the OS now
    return out


def _read_rows(path: Path, name: str | None, dialect: Dialect) -> SwarmTrajectory:
    """The row-by-row reader for irregular files: short rows padded, unparsable cells NaN, both counted."""
    with _read_errors(path), path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh, delimiter=dialect.delimiter)
        header = [h.strip() for h in next(reader)]
        rows = [r for r in reader if r]

    width = len(header)
    short = sum(len(r) < width for r in rows)
    rows = [r + [""] * (width - len(r)) if len(r) < width else r for r in rows]
    cols = {h: [r[i] for r in rows] for i, h in enumerate(header) if h in REQUIRED + OPTIONAL}
    parsed: dict[str, np.ndarray] = {}
    unparsable = 0
    clock = ""
    for h, values in cols.items():
        if h == "uav_id":
            continue
        parsed[h], bad = _floats([v.replace(",", ".") for v in values] if dialect.decimal_comma else values)
        if h == "t" and 2 * bad > len(values) and (iso := _iso_seconds(values)) is not None:
            (parsed[h], clock), bad = iso, 0  # date-times (an exporter's ISO 8601 column), not seconds
        unparsable += bad
    ids = np.asarray([v.strip() for v in cols["uav_id"]], dtype=object)
    traj = _trajectory(path, name, parsed, ids, rows=len(rows), unparsable=unparsable, short=short)
    if clock:
        traj.ingest.notes.append(f"t read as ISO 8601 date-times ({clock}) and converted to unix seconds")
    return traj


def _iso_seconds(values: list[str]) -> tuple[np.ndarray, str] | None:
    """A `t` column of ISO 8601 date-times as unix seconds (empty cells NaN) and how its zone was taken; None if
    any cell is neither a date-time nor empty. Date-times without a zone are taken as UTC (the flight's times are
    differences; only mission.t0 would be off by the zone)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cells = pa.array([v.strip() or None for v in values], pa.string())
    for kind, zone in ((pa.timestamp("ns", tz="UTC"), "with their time zone"),
                       (pa.timestamp("ns"), "no time zone given: taken as UTC")):
        try:
            ns = pc.cast(cells, kind).cast(pa.int64()).to_numpy(zero_copy_only=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
        return np.asarray(ns, dtype=float) / 1e9, zone
    return None


def _trajectory(path: Path, name: str | None, parsed: dict[str, np.ndarray], ids: np.ndarray | VehicleCodes, rows: int,
                unparsable: int, short: int) -> SwarmTrajectory:
    def group(names: tuple[str, ...]) -> np.ndarray | None:
        return np.column_stack([parsed[n] for n in names]) if all(n in parsed for n in names) else None

    no_id = (ids.names == "")[ids.codes] if isinstance(ids, VehicleCodes) else ids == ""
    t, unit = _seconds(parsed["t"])
    t[no_id] = np.nan
    pos = group(("x", "y", "z"))
    assert pos is not None  # the header check requires x, y and z
    traj = SwarmTrajectory.from_columns(
        t, ids, pos,
        vel=group(("vx", "vy", "vz")), quat=group(("qx", "qy", "qz", "qw")),
        link_ok=parsed.get("link_ok"), gps_ok=parsed.get("gps_ok"), battery_pct=parsed.get("battery_pct"),
        est_valid=None if "gps_ok" not in parsed else ~(parsed["gps_ok"] == 0),  # no fix: position not trusted
        name=name or path.stem,
    )
    for tr in traj.tracks.values():
        tr.source = str(path)
        tr.drop_redundant_validity()
    if unparsable:
        traj.ingest.notes.append(f"{unparsable} cell(s) were not numbers and were read as NaN")
    if short:
        traj.ingest.notes.append(f"{short} row(s) had fewer columns than the header")
    if int(no_id.sum()):
        traj.ingest.notes.append(f"{int(no_id.sum())} row(s) had no uav_id")
    if not traj.tracks:
        raise InputError(f"{path}: no valid samples (all {rows} rows empty or non-finite)")
    if traj.sample_period > MAX_SAMPLE_PERIOD_S:
        raise InputError(f"{path}: t steps {traj.sample_period:.4g} s between a vehicle's samples (median): t must "
                         "be seconds (CONTRACT.md §1); convert milliseconds, microseconds or nanoseconds first")
    speed = _typical_speed(traj)
    if speed > MAX_TYPICAL_SPEED_MPS:
        raise InputError(f"{path}: the vehicles move {speed:.4g} m/s between samples (90th percentile): x, y, z must "
                         "be metres (CONTRACT.md §1); convert millimetres or centimetres first")
    if unit:
        traj.ingest.notes.append(f"t read as unix {unit} (no clock in seconds is that large) and converted")
    return traj


def _typical_speed(traj: SwarmTrajectory) -> float:
    """The 90th percentile of the speeds between consecutive samples of (up to _SPEED_TRACKS of) the vehicles."""
    tracks = list(traj.tracks.values())
    tracks = [tracks[i] for i in np.linspace(0, len(tracks) - 1, min(len(tracks), _SPEED_TRACKS)).astype(int)]
    speeds = [np.linalg.norm(np.diff(tr.pos, axis=0), axis=1) / np.diff(tr.t) for tr in tracks if len(tr) > 1]
    return float(np.percentile(np.concatenate(speeds), 90)) if speeds else 0.0


def _seconds(t: np.ndarray) -> tuple[np.ndarray, str]:
    """The `t` column in seconds (a copy) and the unit it was in ("" for seconds)."""
    finite = t[np.isfinite(t)]
    peak = float(np.abs(finite).max()) if len(finite) else 0.0
    for scale, unit in _UNITS.items():
        if peak >= EPOCH_LIMIT_S and peak / scale < EPOCH_LIMIT_S:
            return t / scale, unit
    return t.copy(), ""


def write_csv(traj: SwarmTrajectory, path: str | Path) -> Path:
    """Write long-format rows sorted by time then vehicle, with velocities and any health columns."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    has = {k: all(getattr(tr, k) is not None for tr in traj.tracks.values())
           for k in ("quat", "link_ok", "gps_ok", "battery_pct")}
    header = ["t", "uav_id", "x", "y", "z", "vx", "vy", "vz"]
    header += ["qx", "qy", "qz", "qw"] if has["quat"] else []
    header += [k for k in ("link_ok", "gps_ok", "battery_pct") if has[k]]
    blocks = []
    for u, tr in traj.tracks.items():
        cols = [tr.t, np.full(len(tr), u, dtype=object), tr.pos[:, 0], tr.pos[:, 1], tr.pos[:, 2],
                tr.vel[:, 0], tr.vel[:, 1], tr.vel[:, 2]]
        if has["quat"] and tr.quat is not None:
            cols += [tr.quat[:, k] for k in range(4)]
        cols += [getattr(tr, k) for k in ("link_ok", "gps_ok", "battery_pct") if has[k]]
        blocks.append(np.column_stack(cols))
    table = np.concatenate(blocks) if blocks else np.empty((0, len(header)), dtype=object)
    order = np.lexsort((table[:, 1].astype(str), table[:, 0].astype(float))) if len(table) else np.zeros(0, int)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in table[order]:
            w.writerow([_fmt(v, h) for v, h in zip(row, header, strict=True)])
    return path


def _fmt(v, column: str) -> str:
    if column == "uav_id":
        return str(v)
    if column in ("link_ok", "gps_ok"):
        return "" if not np.isfinite(v) else str(int(v))
    return repr(round(float(v), 6))
