"""Recordings cut short, read as far as they go: a ROS 1 bag without its index (`.bag.active` of a recorder that
was killed, a copy cut off) and an MCAP without its footer (`ros2 bag record` killed, a power loss). Their whole
messages are copied, in order, into an indexed temporary file that the usual reader opens, as `rosbag reindex` and
`mcap recover` would; what the cut took is said in a note. A drone that crashed is the flight that needs this.
"""

from __future__ import annotations

import bz2
import contextlib
import io
import os
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: ROS 1 record ops (the bag format 2.0).
_MSG_DATA, _BAG_HEADER, _CHUNK, _CONNECTION = 0x02, 0x03, 0x05, 0x07
_ROS1_MAGIC = b"#ROSBAG V2.0\n"
_MCAP_MAGIC = b"\x89MCAP0\r\n"
#: Enough of a file's start for a ROS 1 bag's header record (rosbag pads it to 4,096 bytes).
_HEAD_BYTES = 8192
#: Where an uncompressed MCAP chunk's records start: times, size, crc (28 bytes), an empty compression name (4),
#: the records' length (8).
_CHUNK_RECORDS = 40


def cut_short(path: Path) -> str:
    """".bag" for a ROS 1 bag whose index was never written (index_pos 0: still recording) or lies past its end (cut),
    ".mcap" for an MCAP without its closing magic, else "" (told from the head and the tail, without reading it)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(_HEAD_BYTES)
        f.seek(max(size - len(_MCAP_MAGIC), 0))
        tail = f.read()
    if head.startswith(_ROS1_MAGIC):
        first = next(_records(head, len(_ROS1_MAGIC)), None)
        index = first[1].get(b"index_pos", b"") if first is not None and first[0] == _BAG_HEADER else b""
        return ".bag" if len(index) == 8 and not 0 < struct.unpack("<Q", index)[0] < size else ""
    return ".mcap" if head.startswith(_MCAP_MAGIC) and tail != _MCAP_MAGIC else ""


@contextlib.contextmanager
def whole_part(path: Path) -> Iterator[tuple[Path, list[str]]]:
    """(the file to read, its notes): the recording itself, or, when it was cut short, an indexed copy of what it
    holds whole (deleted after the block) with the note that says so. Nothing whole in a cut file: the file itself,
    whose reader says what is wrong."""
    kind = cut_short(path) if path.is_file() else ""
    recovered = recovered_copy(path, kind) if kind else None
    if recovered is None:
        yield path, []
        return
    copy, note = recovered
    try:
        yield copy, [note]
    finally:
        copy.unlink(missing_ok=True)


def recovered_copy(path: Path, kind: str) -> tuple[Path, str] | None:
    """(an indexed copy of a recording `cut_short` said is `kind`, the note that says so), or None when nothing whole
    is in it (the reader's own error stands). The caller deletes the copy."""
    fd, name = tempfile.mkstemp(suffix=kind, prefix="recovered_")
    os.close(fd)
    out = Path(name)
    try:
        note = (_ros1_copy if kind == ".bag" else _mcap_copy)(path, out)
    except Exception:  # noqa: BLE001 - damaged beyond a cut (the fuzzer's mutants): the reader's own error stands
        note = None
    if note is None:
        out.unlink(missing_ok=True)
        return None
    return out, note


def _ros1_copy(path: Path, out: Path) -> str | None:
    from rosbags.rosbag1 import Writer
    from rosbags.typesys.msg import normalize_msgtype

    data = path.read_bytes()
    connections: dict[int, dict[bytes, bytes]] = {}
    messages: list[tuple[int, int, bytes]] = []
    lost = 0
    for op, fields, body, whole in _records(data, len(_ROS1_MAGIC)):
        if op == _CHUNK:
            inner = _chunk_data(fields.get(b"compression", b"none"), body, whole)
            if inner is None:
                lost += 1
                continue
            for op2, fields2, body2, whole2 in _records(inner, 0):
                if whole2:
                    _take(op2, fields2, body2, connections, messages)
        elif whole:
            _take(op, fields, body, connections, messages)
    if not messages:
        return None
    out.unlink()  # the writer makes its own
    with Writer(out) as writer:
        conns = {cid: writer.add_connection(
            c[b"topic"].decode(), normalize_msgtype(c[b"type"].decode()),
            msgdef=c.get(b"message_definition", b"").decode(), md5sum=c.get(b"md5sum", b"").decode())
            for cid, c in connections.items()}
        for cid, stamp, body in messages:
            if cid in conns:
                writer.write(conns[cid], stamp, body)
    stamps = [stamp for _, stamp, _ in messages]
    return (f"{path.name}: a ROS 1 bag without its index (a recording cut short): its {len(messages)} whole "
            f"message(s) over {(max(stamps) - min(stamps)) / 1e9:.1f} s read as `rosbag reindex` would"
            + (f"; {lost} compressed chunk(s) cut off are lost" if lost else ""))


def _records(data: bytes, at: int) -> Iterator[tuple[int, dict[bytes, bytes], bytes, bool]]:
    """(op, header fields, data, whole) of each record from `at`; the last one may be cut (whole False)."""
    n = len(data)
    while at + 4 <= n:
        (hlen,) = struct.unpack_from("<I", data, at)
        if at + 4 + hlen + 4 > n:
            return
        fields = _fields(data[at + 4:at + 4 + hlen])
        (dlen,) = struct.unpack_from("<I", data, at + 4 + hlen)
        start = at + 8 + hlen
        if b"op" not in fields:
            return  # not a record boundary: the rest is unreadable
        yield fields[b"op"][0], fields, data[start:start + dlen], start + dlen <= n
        at = start + dlen


def _fields(header: bytes) -> dict[bytes, bytes]:
    out, at = {}, 0
    while at + 4 <= len(header):
        (flen,) = struct.unpack_from("<I", header, at)
        name, _, value = header[at + 4:at + 4 + flen].partition(b"=")
        out[name] = value
        at += 4 + flen
    return out


def _chunk_data(compression: bytes, body: bytes, whole: bool) -> bytes | None:
    """A chunk's records; an uncompressed chunk cut off gives the records it holds, a compressed one none."""
    if compression == b"none":
        return body
    if not whole:
        return None
    if compression == b"bz2":
        return bz2.decompress(body)
    if compression == b"lz4":
        import lz4.frame

        return lz4.frame.decompress(body)
    return None


def _take(op: int, fields: dict[bytes, bytes], body: bytes, connections: dict, messages: list) -> None:
    if len(fields.get(b"conn", b"")) != 4 or (op == _MSG_DATA and len(fields.get(b"time", b"")) != 8):
        return  # a damaged record header
    if op == _CONNECTION:
        (cid,) = struct.unpack("<I", fields[b"conn"])
        connections.setdefault(cid, {b"topic": fields.get(b"topic", b""), **_fields(body)})
    elif op == _MSG_DATA:
        (cid,) = struct.unpack("<I", fields[b"conn"])
        sec, nsec = struct.unpack("<II", fields[b"time"])
        messages.append((cid, sec * 1_000_000_000 + nsec, body))


def _mcap_copy(path: Path, out: Path) -> str | None:
    from mcap.records import Channel, Header, Message, Schema
    from mcap.writer import Writer

    count, first, last = 0, None, 0
    schemas: dict[int, int] = {}
    channels: dict[int, int] = {}
    with open(out, "wb") as dst:
        writer = None
        for record in _mcap_records(path.read_bytes()):
            if isinstance(record, Header):
                writer = Writer(dst)
                writer.start(record.profile, record.library)
            elif writer is None:
                continue
            elif isinstance(record, Schema):
                schemas[record.id] = writer.register_schema(record.name, record.encoding, record.data)
            elif isinstance(record, Channel):
                channels[record.id] = writer.register_channel(
                    record.topic, record.message_encoding, schemas.get(record.schema_id, 0), record.metadata)
            elif isinstance(record, Message) and record.channel_id in channels:
                writer.add_message(channels[record.channel_id], record.log_time, record.data, record.publish_time,
                                   record.sequence)
                count, last = count + 1, max(last, record.log_time)
                first = record.log_time if first is None else min(first, record.log_time)
        if writer is not None:
            writer.finish()
    if first is None:
        return None
    return (f"{path.name}: an MCAP without its footer (a recording cut short): its {count} whole message(s) "
            f"over {(last - first) / 1e9:.1f} s read as `mcap recover` would")


def _mcap_records(data: bytes) -> Iterator:
    """Header, schemas, channels and messages of an MCAP in file order, up to where it was cut: the records of a
    chunk cut off count while whole when it is uncompressed (rosbags and rosbag2 write such chunks)."""
    from mcap.data_stream import ReadDataStream
    from mcap.opcode import Opcode
    from mcap.records import Chunk, Header
    from mcap.stream_reader import breakup_chunk

    for op, body, whole in _mcap_frames(data, len(_MCAP_MAGIC)):
        stream = ReadDataStream(io.BytesIO(body))
        if op == Opcode.HEADER and whole:
            yield Header.read(stream)
        elif op == Opcode.CHUNK and whole:
            yield from breakup_chunk(Chunk.read(stream))
        elif op == Opcode.CHUNK and len(body) >= _CHUNK_RECORDS:  # cut inside: its records up to the cut
            (compression,) = struct.unpack_from("<I", body, _CHUNK_RECORDS - 12)  # the name's length: 0 for none
            if compression == 0:
                yield from _mcap_inner(body[_CHUNK_RECORDS:])
        elif op in (Opcode.SCHEMA, Opcode.CHANNEL, Opcode.MESSAGE) and whole:
            yield from _mcap_one(op, body)
        elif op in (Opcode.DATA_END, Opcode.FOOTER):
            return


def _mcap_frames(data: bytes, at: int) -> Iterator[tuple[int, bytes, bool]]:
    while at + 9 <= len(data):
        op = data[at]
        (length,) = struct.unpack_from("<Q", data, at + 1)
        body = data[at + 9:at + 9 + length]
        yield op, body, len(body) == length
        at += 9 + length


def _mcap_inner(data: bytes) -> Iterator:
    for op, body, whole in _mcap_frames(data, 0):
        if not whole:
            return
        yield from _mcap_one(op, body)


def _mcap_one(op: int, body: bytes) -> Iterator:
    from mcap.data_stream import ReadDataStream
    from mcap.opcode import Opcode
    from mcap.records import Channel, Message, Schema

    stream = ReadDataStream(io.BytesIO(body))
    if op == Opcode.SCHEMA:
        yield Schema.read(stream)
    elif op == Opcode.CHANNEL:
        yield Channel.read(stream)
    elif op == Opcode.MESSAGE:
        yield Message.read(stream, len(body))
