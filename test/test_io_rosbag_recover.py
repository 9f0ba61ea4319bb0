"""Recordings cut short: a ROS 1 bag without its index (a killed recorder's `.bag.active`, a copy cut off) and an
MCAP without its footer were refused ("Bag index looks damaged", "File end magic is invalid": five real cut bags);
their whole messages are read now, with a note, and what the cut took is gone."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from rosbags.highlevel import AnyReader
from test_io_rosbag import TS1, TS2, two_vehicle_msgs, write_bag

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.loader import load_inputs
from uav_debate_eval.io.rosbag import read_bag


def _cut(src: Path, dst: Path, share: float) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[:int(len(data) * share)])
    return dst


@pytest.mark.parametrize("fmt, name, cut_name", [("ros1", "flight.bag", "flight.bag.active"),
                                                 ("mcap", "flight.mcap", "cut.mcap")])
def test_a_recording_cut_short_reads_its_whole_messages(tmp_path, fmt, name, cut_name):
    bag = write_bag(tmp_path / name, two_vehicle_msgs(TS1 if fmt == "ros1" else TS2, n=200), fmt)
    storage = bag if bag.is_file() else next(bag.glob("*.mcap"))
    whole = read_bag(bag)
    cut = _cut(storage, tmp_path / cut_name, 0.6)
    with pytest.raises(Exception, match="index|magic|storage format"), AnyReader([cut]):  # the library refuses it
        pass
    before = set(Path(tempfile.gettempdir()).glob("recovered_*"))
    traj = load_inputs([cut])
    assert traj.uav_ids == ["uav1", "uav2"]
    n = len(traj.tracks["uav1"])
    assert 80 <= n < 200  # most of the first 60 %, none of the rest
    assert traj.tracks["uav1"].pos == pytest.approx(whole.tracks["uav1"].pos[:n])
    assert traj.tracks["uav2"].pos == pytest.approx(whole.tracks["uav2"].pos[:len(traj.tracks["uav2"])])
    [note] = [n for n in traj.ingest.notes if "a recording cut short" in n]
    assert note.startswith(f"{cut_name}: a ROS 1 bag without its index" if fmt == "ros1" else
                           f"{cut_name}: an MCAP without its footer")
    assert set(Path(tempfile.gettempdir()).glob("recovered_*")) == before  # the copy is gone


def test_a_rosbag2_folder_of_a_killed_recorder(tmp_path):
    """`ros2 bag record` killed: its folder has no metadata.yaml and its MCAP no footer."""
    bag = write_bag(tmp_path / "rec", two_vehicle_msgs(TS2, n=200), "mcap")
    (bag / "metadata.yaml").unlink()
    storage = next(bag.glob("*.mcap"))
    _cut(storage, storage, 0.5)
    traj = load_inputs([bag])
    assert traj.uav_ids == ["uav1", "uav2"] and 50 <= len(traj.tracks["uav1"]) < 200
    assert any("a rosbag2 folder without metadata.yaml" in n for n in traj.ingest.notes)
    assert any("an MCAP without its footer" in n for n in traj.ingest.notes)


def test_a_file_that_is_no_cut_recording_keeps_its_error(tmp_path):
    junk = tmp_path / "junk.bag"
    junk.write_bytes(b"not a bag at all" * 10)
    with pytest.raises(InputError, match=r"junk.bag: cannot read bag"):
        read_bag(junk)
