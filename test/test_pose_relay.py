"""core.pose_relay: the poses `live`'s verifier passes on to its other process, one message per check."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from uav_debate_eval.core.pose_relay import PoseBatch, decode, encode


def test_a_batch_gives_back_every_pose_with_its_vehicle_stamp_and_velocity():
    batch = PoseBatch()
    assert batch.take() is None, "nothing received: nothing sent"
    poses = [("uav1", 10.0, (1.0, 2.0, 3.0), None), ("drone_ü", 10.05, (-4.5, 0.125, 7.0), (0.5, -1.0, 0.0)),
             ("uav1", 10.1, (1.1, 2.0, 3.0), None)]
    for pose in poses:
        batch.add(*pose)
    assert len(batch) == 3
    names, rows = decode(batch.take())
    assert len(batch) == 0 and batch.take() is None, "a take empties the batch"
    got = [(names[int(k)], t, (x, y, z), None if math.isnan(vx) else (vx, vy, vz))
           for k, t, x, y, z, vx, vy, vz in rows.tolist()]
    assert got == poses  # exact: the stamps are the float64 the verifier read


def test_each_message_names_its_own_vehicles():
    batch = PoseBatch()
    batch.add("a", 1.0, (0.0, 0.0, 0.0), None)
    batch.add("b", 1.0, (1.0, 0.0, 0.0), None)
    first = decode(batch.take())
    batch.add("b", 1.1, (1.0, 0.0, 0.0), None)
    names, rows = decode(batch.take())
    assert first[0] == ["a", "b"] and names == ["b"] and rows[0, 0] == 0, "read without the message before it"


def test_the_bytes_are_a_uint8_multiarray_as_rmw_delivers_it():
    rows = np.array([[0, 5.0, 1, 2, 3, np.nan, np.nan, np.nan]])
    data = encode(["x"], rows)
    assert data[:4] == b"\x00\x01\x00\x00"  # CDR little endian
    dims, offset, size = struct.unpack_from("<III", data, 4)
    assert (dims, offset, size) == (0, 0, len(data) - 16)
    from rosbags.typesys import Stores, get_typestore  # an independent CDR reader

    msg = get_typestore(Stores.ROS2_JAZZY).deserialize_cdr(data, "std_msgs/msg/UInt8MultiArray")
    assert bytes(msg.data) == data[16:]


@pytest.mark.parametrize("damage", ["head", "short", "index", "count"])
def test_a_damaged_message_is_refused_in_one_line(damage):
    data = bytearray(encode(["a", "b"], np.array([[1, 5.0, 1, 2, 3, 0, 0, 0]])))
    if damage == "head":
        data[1] = 0  # big endian: not what the verifier writes
    elif damage == "short":
        data = data[:-8]
    elif damage == "index":
        struct.pack_into("<d", data, len(data) - 64, 2.0)  # a third vehicle, unnamed
    else:
        struct.pack_into("<I", data, 20, 2)  # two rows announced, one sent
    with pytest.raises(ValueError, match="relayed poses"):
        decode(bytes(data))
