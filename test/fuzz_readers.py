"""Seeded fuzzing of every reader (CSV, rosbag2 MCAP and SQLite, ROS 1 bag, ULog, DataFlash .bin, MAVLink .tlog,
the flight MCAP `evaluate --mcap-out` writes, a killed live session's tape with its side streams):
mutants of small real or written recordings (cut, flipped bytes, zeroed and duplicated blocks; in a tape folder, one
of its files), each read in process with a time limit. A mutant must be read (perhaps with notes) or rejected with
InputError: any other exception is a reader bug, a read past the limit a hang.

    python test/fuzz_readers.py [--mutants 3000] [--seed 0]     (make fuzz)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from uav_debate_eval.core.errors import InputError  # noqa: E402

MUTATIONS = ("cut", "flip", "zero", "duplicate")
TIME_LIMIT_S = 20


class Hang(BaseException):
    """The reader took longer than TIME_LIMIT_S on one mutant. Not an Exception: a reader's loop that catches
    every Exception (pymavlink's DFReader skipping a bad message) must not swallow it and run on for ever."""


def seeds(folder: Path) -> dict[str, Path]:
    """One small recording per format, written (or copied from the project's real fixtures) into `folder`."""
    from ardupilot_logs import swarm, write_bin, write_tlog

    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.io.rosbag_write import write_bag

    folder.mkdir(parents=True, exist_ok=True)
    t = np.repeat(np.arange(60) * 0.1, 2)
    ids = np.tile(np.array(["uav1", "uav2"]), 60)
    pos = np.column_stack([t, np.where(ids == "uav1", 0.0, 3.0), np.full(len(t), 2.0)])
    traj = SwarmTrajectory.from_columns(t, ids, pos)
    csv = folder / "flight.csv"
    csv.write_text("t,uav_id,x,y,z\n" + "".join(f"{a:.2f},{u},{p[0]:.3f},{p[1]:.3f},{p[2]:.3f}\n"
                                                 for a, u, p in zip(t, ids, pos, strict=True)))
    vehicles = swarm()
    out = {"csv": csv,
           "mcap": write_bag(traj, folder / "flight.mcap", "mcap"),
           "db3": write_bag(traj, folder / "flight.db3", "sqlite3"),
           "bag": write_bag(traj, folder / "flight.bag", "ros1"),
           "ulg": HERE / "fixtures" / "px4" / "sample_log_small.ulg",
           "bin": write_bin(vehicles[1], folder / "copter.bin"),
           "bin_real": HERE / "fixtures" / "real" / "ardupilot" / "plane382_fragment.BIN",
           "tlog": write_tlog(vehicles[:2], folder / "swarm.tlog"),
           "flight_mcap": _flight_mcap(csv, folder),
           "tape": _tape(traj, folder / "live.tape")}
    return out


def _tape(traj, folder: Path) -> Path:
    """The flight as a killed live session's tape: its manifest, a chunk, and side streams (MAVROS fixes, states and
    measured velocity; PX4 status and an invalid estimate)."""
    from uav_debate_eval.io.live_tape import save_chunk, save_side, write_manifest

    folder.mkdir()
    names = list(traj.tracks)
    write_manifest(folder, names)
    save_chunk(folder / "00000.npy", np.vstack([np.column_stack([np.full(len(tr), k), tr.t + 100.0, tr.pos, tr.vel])
                                                for k, tr in enumerate(traj.tracks.values())]))
    vel = np.column_stack([100.0 + np.arange(10) * 0.5, np.ones((10, 3))])
    save_side(folder, {"local_frames": names, "mavros": {
        "states": {u: [(100.0, False), (101.0, True)] for u in names}, "landings": {},
        "fixes": {u: [101.0, 47.0, 8.0 + 1e-5 * k, 500.0] for k, u in enumerate(names)}, "anchor": names[0],
        "velocities": dict.fromkeys(names, vel), "velocity_topics": {u: f"/{u}/v" for u in names}},
        "px4": {"statuses": {names[0]: [(1_000_000, 2, 14, 2, False)]}, "landings": {names[0]: [(1_000_000, True)]},
                "offsets": {names[0]: 99.0}, "spawned": [],
                "invalid": {names[1]: [(103.05, 1.0, 3.0, 2.0, 0.0, 0.0, 0.0, 1.0)]}}})
    return folder


def _flight_mcap(csv: Path, folder: Path) -> Path:
    """The CSV's flight as `evaluate --mcap-out` writes it (Foxglove channels and the raw poses)."""
    from uav_debate_eval.cli import main

    path = folder / "flight_foxglove.mcap"
    with quiet_fds():
        main(["evaluate", str(csv), "--out", str(folder / "evaluated"), "--mcap-out", str(path), "--quiet",
              "--llm", "rules"])
    return path


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutant of `data` and what was done to it."""
    kind = rng.choice(MUTATIONS)
    n = len(data)
    at = rng.randrange(n) if n else 0
    size = rng.choice((1, 4, 16, 64, 512, 4096))
    if kind == "cut":
        return data[:at], f"cut at {at}"
    if kind == "flip":
        b = bytearray(data)
        for _ in range(rng.choice((1, 3, 10))):
            i = rng.randrange(n)
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b), "flipped bits"
    if kind == "zero":
        return data[:at] + bytes(min(size, n - at)) + data[at + size:], f"zeroed {size} at {at}"
    return data[:at] + data[at:at + size] + data[at:], f"duplicated {size} at {at}"


@contextlib.contextmanager
def time_limit(seconds: int):
    def fire(_sig, _frame):
        raise Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def quiet_fds():
    """stdout and stderr to /dev/null at the descriptor level (pymavlink's indexer prints from C)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def read_one(path: Path) -> str:
    """'read', 'rejected' (InputError), or raises the reader's bug (or Hang)."""
    from uav_debate_eval.io.loader import load_inputs

    try:
        with quiet_fds(), time_limit(TIME_LIMIT_S):
            load_inputs([path])
    except InputError as exc:
        if "\n" in str(exc).strip():
            raise AssertionError(f"{path.name}: a rejection of more than one line: {exc!r}") from None
        return "rejected"
    return "read"


def fuzz(folder: Path, mutants: int, seed: int) -> tuple[Counter, list[str], dict[str, Path]]:
    """Mutants spread over the formats; (outcome counts by format, failures with their traceback, one rejected
    mutant per format kept in `folder`)."""
    files = seeds(folder / "seeds")
    counts: Counter = Counter()
    failures: list[str] = []
    rejected: dict[str, Path] = {}
    for i in range(mutants):
        fmt, path, how = mutant(files, folder, seed, i)
        try:
            outcome = read_one(path)
            counts[(fmt, outcome)] += 1
            if outcome == "rejected" and fmt not in rejected:
                rejected[fmt] = path.rename(folder / f"rejected_{fmt}{path.suffix}")
        except (Exception, Hang) as exc:  # a reader bug or a hang: the point of the fuzzing
            counts[(fmt, "hang" if isinstance(exc, Hang) else "traceback")] += 1
            failures.append(f"{fmt} mutant {i} ({how}, seed {seed}): {type(exc).__name__}: {exc}\n"
                            + "".join(traceback.format_exc(limit=-4)))
        finally:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    return counts, failures, rejected


def mutant(files: dict[str, Path], folder: Path, seed: int, i: int, fmt: str | None = None) -> tuple[str, Path, str]:
    """(format, file, what was done) of mutant `i` of run `seed`, written into `folder` (`fmt`: of that format, else
    the formats in turn). Each mutant comes from (seed, i) alone: the flight MCAP seed holds its temporary folder's
    path, whose length shifted a shared generator for every later mutant (a failure did not come back on a rerun).
    A folder (a tape) is copied with one of its files mutated."""
    names = sorted(files)
    fmt = fmt or names[i % len(names)]
    src = files[fmt]
    rng = random.Random(f"{seed}/{i}")
    path = folder / f"m{i}{src.suffix}"
    if src.is_dir():
        shutil.copytree(src, path)
        target = path / rng.choice(sorted(p.name for p in src.iterdir()))
        data, how = mutate(target.read_bytes(), rng)
        target.write_bytes(data)
        return fmt, path, f"{target.name}: {how}"
    data, how = mutate(src.read_bytes(), rng)
    path.write_bytes(data)
    return fmt, path, how


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutants", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import tempfile

    os.environ.setdefault("UAV_DEBATE_EVAL_STRICT_READERS", "1")  # a reader's own exception is a bug here
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        counts, failures, _ = fuzz(Path(tmp), args.mutants, args.seed)
    for fmt in sorted({f for f, _ in counts}):
        row = {k: counts[(fmt, k)] for k in ("read", "rejected", "traceback", "hang")}
        print(f"{fmt:9s} " + "  ".join(f"{k} {v}" for k, v in row.items()))
    bad = sum(v for (_, k), v in counts.items() if k in ("traceback", "hang"))
    print(f"{args.mutants} mutants in {time.perf_counter() - start:.0f} s: {bad} tracebacks or hangs")
    for f in failures[:20]:
        print(f)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
