"""The MCAP chunk reader gives exactly what rosbags' message iterator gives: same samples, same order
(so the same out-of-order counts), same notes; broken indexes fall back to walking the records."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
from rosbags.rosbag2.storage_mcap import McapReader
from rosbags.typesys import Stores, get_typestore

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.io.rosbag import raw_messages, read_bag

TS = get_typestore(Stores.ROS2_JAZZY)
POSE = "geometry_msgs/msg/PoseStamped"


def _pose(t: float, xyz, frame: str = "map"):
    T = TS.types
    sec = int(math.floor(t))
    header = T["std_msgs/msg/Header"](T["builtin_interfaces/msg/Time"](sec, int(round((t - sec) * 1e9))), frame)
    pose = T["geometry_msgs/msg/Pose"](T["geometry_msgs/msg/Point"](*xyz),
                                       T["geometry_msgs/msg/Quaternion"](0.0, 0.0, 0.0, 1.0))
    return T[POSE](header, pose)


def _write(path, msgs, compression: CompressionMode = CompressionMode.NONE) -> None:
    """msgs: (topic, receive ns, PoseStamped); rosbags closes a chunk every 1 MB."""
    w = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    if compression != CompressionMode.NONE:
        w.set_compression(compression, CompressionFormat.ZSTD)
    with w:
        conns = {}
        for topic, ns, m in msgs:
            if topic not in conns:
                conns[topic] = w.add_connection(topic, POSE, typestore=TS)
            w.write(conns[topic], ns, TS.serialize_cdr(m, POSE))


def _flight(n: int = 4000) -> list:
    """Three vehicles over several chunks: frame ids of different lengths, receive times out of order
    (swapped pairs), repeated header stamps, and one vehicle with unset stamps."""
    rng = np.random.default_rng(7)
    msgs = []
    for k in range(n):
        t = 10.0 + k * 0.02
        recv = int((t + 0.01 * rng.random()) * 1e9)
        if k % 50 == 1:
            recv -= 30_000_000  # logged before the previous message
        msgs.append(("/uav1/pose", recv, _pose(t if k % 97 else t - 0.02, (k * 0.1, 0.0, 2.0),
                                                "map" if k % 3 else "world_frame")))
        msgs.append(("/uav2/mavros/local_position/pose", recv + 1000, _pose(t, (0.0, k * 0.1, 3.0), "odom")))
        msgs.append(("/cf3/pose", recv + 2000, _pose(0.0, (1.0, 1.0, k * 0.01))))
    return msgs


def _library(monkeypatch, path, **kw):
    with monkeypatch.context() as m:
        m.setattr(raw_messages, "_mcap_raws", lambda *a: None)
        return read_bag(path, **kw)


def _same(a, b) -> None:
    assert a.uav_ids == b.uav_ids
    for u in a.uav_ids:
        for name in ("t", "pos", "vel", "quat"):
            np.testing.assert_array_equal(getattr(a.tracks[u], name), getattr(b.tracks[u], name))
    assert a.ingest.to_dict() == b.ingest.to_dict()


def _no_whole_chunk_walk(data, a, b, walk=raw_messages._walk):
    assert (a, b) != (0, len(data)), "a chunk was walked record by record"
    return walk(data, a, b)


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcap") / "flight"
    _write(path, _flight())
    return path


def test_chunk_reader_equals_library_iterator(bag, monkeypatch):
    (storage,) = bag.glob("*.mcap")
    reader = McapReader(storage)
    reader.open()
    assert len(reader.chunks) >= 2
    reader.close()
    with monkeypatch.context() as m:  # the chunk reader, from the message indexes, for the folder and the file
        m.setattr(raw_messages, "_library_raws", None)
        m.setattr(raw_messages, "_walk", _no_whole_chunk_walk)
        fast, fast_file = read_bag(bag), read_bag(storage)
    assert fast.ingest.out_of_order > 0 and fast.ingest.dropped
    assert any("header stamps are zero" in n for n in fast.ingest.notes)
    _same(fast, _library(monkeypatch, bag))
    _same(fast_file, _library(monkeypatch, storage))
    _same(read_bag(bag, topics=["/cf3/pose=c"]), _library(monkeypatch, bag, topics=["/cf3/pose=c"]))


def test_bad_message_index_falls_back_to_walking_the_records(bag, tmp_path, monkeypatch):
    (storage,) = bag.glob("*.mcap")
    reader = McapReader(storage)
    reader.open()
    offset = next(iter(reader.chunks[0].message_index_offsets.values()))
    reader.close()
    raw = bytearray(storage.read_bytes())
    assert raw[offset] == 0x07
    raw[offset + 15:offset + 23] = struct.pack("<Q", 1)  # first entry: a log time no record has
    broken = tmp_path / "broken.mcap"
    broken.write_bytes(bytes(raw))
    whole = []  # chunks walked record by record from start to end
    monkeypatch.setattr(raw_messages, "_walk", lambda data, a, b, walk=raw_messages._walk:
                        whole.append((a, b) == (0, len(data))) or walk(data, a, b))
    _same(read_bag(broken), _library(monkeypatch, storage))
    assert whole.count(True) == 1


def test_corrupt_record_is_one_line_input_error(tmp_path):
    path = tmp_path / "small"
    _write(path, [("/uav1/pose", 10**9 + k, _pose(1.0 + k, (k, 0.0, 1.0))) for k in range(5)])
    (storage,) = path.glob("*.mcap")
    reader = McapReader(storage)
    reader.open()
    chunk = reader.chunks[0]
    reader.close()
    raw = bytearray(storage.read_bytes())
    start = chunk.chunk_start_offset + 9 + 40 + len(chunk.compression)  # the chunk's first record
    assert chunk.compression == "" and raw[start] in (0x03, 0x04, 0x05)
    raw[start + 1:start + 9] = struct.pack("<Q", 10**6)  # a record longer than its chunk
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(bytes(raw))
    with pytest.raises(InputError, match=r"^.*bad.mcap: cannot read bag \([^\n]*\)$"):
        read_bag(bad)


@pytest.mark.parametrize("mode", [CompressionMode.STORAGE, CompressionMode.FILE, CompressionMode.MESSAGE])
def test_compressed_bags_read_the_same(tmp_path, monkeypatch, mode):
    path = tmp_path / "zstd"
    _write(path, _flight(300), mode)
    with monkeypatch.context() as m:
        if mode != CompressionMode.MESSAGE:  # chunk or file compression: still the chunk reader
            m.setattr(raw_messages, "_library_raws", None)
        fast = read_bag(path)
    _same(fast, _library(monkeypatch, path))


def test_a_damaged_chunk_costs_its_own_messages_only(bag, tmp_path):
    """A record that does not fit its chunk (a damaged card) refused the whole bag: now that chunk's messages are
    skipped, with a note naming their time span, and the other chunks read as they did. A bag whose only chunk is
    damaged is still a one-line error (test_corrupt_record_is_one_line_input_error)."""
    (storage,) = bag.glob("*.mcap")
    reader = McapReader(storage)
    reader.open()
    chunks = list(reader.chunks)
    reader.close()
    assert len(chunks) >= 2
    first = chunks[0]
    raw = bytearray(storage.read_bytes())
    start = first.chunk_start_offset + 9 + 40 + len(first.compression)
    raw[start + 1:start + 9] = struct.pack("<Q", 10**9)  # its first record: longer than the chunk
    damaged = tmp_path / "damaged.mcap"
    damaged.write_bytes(bytes(raw))
    whole, got = read_bag(storage), read_bag(damaged)
    lo, hi = first.message_start_time / 1e9, first.message_end_time / 1e9
    assert [n for n in got.ingest.notes if "damaged" in n] == [
        f"1 damaged MCAP chunk(s) skipped: the messages logged in {lo:.3f}-{hi:.3f} s (the bag's clock) are lost"]
    for u in ("uav1", "uav2"):  # header-stamped: the samples after the lost chunk, exactly as the whole bag has them
        t_all, t_got = whole.tracks[u].t + whole.t0, got.tracks[u].t + got.t0
        assert 0 < len(t_got) < len(t_all) and t_got.min() > hi - 0.1
        later = t_all[t_all >= t_got.min()]
        np.testing.assert_array_equal(t_got, later)
        np.testing.assert_array_equal(got.tracks[u].pos, whole.tracks[u].pos[t_all >= t_got.min()])
