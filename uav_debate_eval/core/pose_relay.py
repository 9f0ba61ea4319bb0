"""The poses one process of a monitor received, passed on in batches to another (ROS-free).

In `live` the safety verifier runs in a process of its own and the DSL builder and panel in another. With a
PoseStamped topic per vehicle both subscribed to every topic: a show's 10,000 poses a second were received and
parsed twice (1,000 vehicles: the verifier ~0.9 of a core, the other process ~1.1). Now the verifier passes the
poses it received on every 0.1 s, one message for all of them, and the other process reads that one topic:
the same poses (stamps as the verifier read them), the builder's tape is what the verifier saw.

The message is a std_msgs/UInt8MultiArray (CDR, no layout) whose bytes are: uint32 name count, uint32 row count,
uint32 length of the names (UTF-8, newline-separated), the names, padding to 8, then per row float64 name index,
t, x, y, z, vx, vy, vz (velocity NaN when the pose came without one). Each message names its own vehicles: a
message is read without any other.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence

import numpy as np

#: float64 per row: name index, t, x, y, z, vx, vy, vz
ROW = 8
_NO_VELOCITY = (math.nan, math.nan, math.nan)
_ARRAY_HEAD = b"\x00\x01\x00\x00" + struct.pack("<II", 0, 0)  # CDR LE; no dimensions, data_offset 0


class PoseBatch:
    """Collects poses (`add`, a PoseInput listener) until `take` returns them as one serialized message."""

    def __init__(self) -> None:
        self._index: dict[str, int] = {}
        self._rows: list[tuple[float, ...]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, uav: str, t: float, pos: Sequence[float], vel: Sequence[float] | None) -> None:
        k = self._index.get(uav)
        if k is None:
            k = self._index[uav] = len(self._index)
        self._rows.append((k, t, *pos, *(_NO_VELOCITY if vel is None else vel)))

    def take(self) -> bytes | None:
        """The poses added since the last take as a serialized UInt8MultiArray; None when there are none."""
        if not self._rows:
            return None
        names, rows = list(self._index), np.array(self._rows, dtype="<f8")
        self._index, self._rows = {}, []
        return encode(names, rows)


def encode(names: list[str], rows: np.ndarray) -> bytes:
    text = "\n".join(names).encode("utf-8")
    head = struct.pack("<III", len(names), len(rows), len(text)) + text
    head += b"\x00" * (-len(head) % 8)
    payload = head + np.ascontiguousarray(rows, dtype="<f8").tobytes()
    return _ARRAY_HEAD + struct.pack("<I", len(payload)) + payload


def decode(data: bytes) -> tuple[list[str], np.ndarray]:
    """(names, rows (n, 8)) of one message; ValueError when it is not one `encode` wrote."""
    view = memoryview(data)
    if bytes(view[:12]) != _ARRAY_HEAD or len(view) < 28:
        raise ValueError("relayed poses: not a little-endian UInt8MultiArray without layout")
    (size,) = struct.unpack_from("<I", view, 12)
    body = view[16:16 + size]
    n_names, n_rows, n_text = struct.unpack_from("<III", body, 0)
    at = 12 + n_text
    at += -at % 8
    if len(body) != size or at + n_rows * ROW * 8 != size:
        raise ValueError(f"relayed poses: {n_rows} rows and {n_text} bytes of names do not fill {size} bytes")
    names = bytes(body[12:12 + n_text]).decode("utf-8").split("\n") if n_names else []
    rows = np.frombuffer(body, dtype="<f8", count=n_rows * ROW, offset=at).reshape(n_rows, ROW)
    if len(names) != n_names or (n_rows and not ((rows[:, 0] >= 0) & (rows[:, 0] < n_names)).all()):
        raise ValueError(f"relayed poses: name indices outside the {n_names} names")
    return names, rows
