"""Pick the reader for each input: contract CSV, rosbag2 (dir, .mcap, .db3), ROS 1 .bag, PX4 .ulg."""

from __future__ import annotations

from pathlib import Path

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.io.names import apply_names

BAG_SUFFIXES = (".mcap", ".db3", ".bag")


def input_kind(path: Path) -> str:
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        if (path / "metadata.yaml").exists():
            return "rosbag2"
        raise InputError(f"{path}: directory is not a rosbag2 (no metadata.yaml inside)")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".mcap", ".db3"):
        return "rosbag2"
    if suffix == ".bag":
        return "ros1"
    if suffix == ".ulg":
        return "ulog"
    raise InputError(f"{path}: unknown input type '{suffix or 'no suffix'}' (expected .csv, .mcap, .db3, .bag, "
                     ".ulg or a rosbag2 directory)")


def load_inputs(paths: list[str | Path], topics: list[str] | None = None,
                names: list[str] | None = None) -> SwarmTrajectory:
    """Read one trajectory from the inputs; several .ulg files are one vehicle each."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise InputError("no input given")
    kinds = [input_kind(p) for p in paths]
    if all(k == "ulog" for k in kinds):
        from uav_debate_eval.io.ulog import read_ulogs

        return read_ulogs(paths, names=names)
    if len(paths) > 1:
        raise InputError("several inputs are one flight only for PX4 .ulg files (one per vehicle); "
                         "evaluate other inputs one at a time or as a batch")
    path, kind = paths[0], kinds[0]
    if kind == "csv":
        from uav_debate_eval.io.csv_io import read_csv

        return apply_names(read_csv(path), names, str(path))
    from uav_debate_eval.io.rosbag_read import read_bag

    return read_bag(path, topics=topics, names=names)
