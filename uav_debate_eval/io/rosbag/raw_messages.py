"""The selected topics' serialised messages, without a Python object per message.

MCAP chunks (a `.mcap` file or a rosbag2 folder of them) are decompressed with rosbags' own checks and their
messages located with numpy through the chunks' message indexes (verified against the records; else the records
are walked), in the order rosbags yields them; any other storage goes through rosbags' message iterator. The
flight MCAP's raw poses (io.flight_mcap: an MCAP that is no rosbag2) are read the same way (`chunked_raws`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader
    from rosbags.rosbag2.storage_mcap import McapReader

_RECORD = struct.Struct("<BQ")  # opcode, content length
_MESSAGE = struct.Struct("<HIQ")  # channel id, sequence, log time (then publish time, data)
_INDEX_HEAD = struct.Struct("<BQHI")  # message index: opcode, record length, channel id, entries' bytes


@dataclass
class Raw:
    """One topic's serialised messages: message i is buf[start[i]:end[i]], received at recv[i] (ns)."""

    recv: np.ndarray
    buf: np.ndarray  # uint8
    start: np.ndarray
    end: np.ndarray

    @classmethod
    def from_list(cls, recv: list[int], data: list[bytes]) -> Raw:
        lengths = np.array([len(d) for d in data], dtype=np.int64)
        end = np.cumsum(lengths)
        return cls(np.asarray(recv, dtype=np.int64), np.frombuffer(b"".join(data), dtype=np.uint8), end - lengths, end)

    def __len__(self) -> int:
        return len(self.start)

    def message(self, i: int) -> bytes:
        return self.buf[self.start[i]:self.end[i]].tobytes()

    def rows(self, idx: np.ndarray, size: int) -> np.ndarray:
        """Messages idx, all `size` bytes long, as one (len(idx), size) array."""
        rows: np.ndarray = np.lib.stride_tricks.sliding_window_view(self.buf, size)[self.start[idx]]
        return rows


def read_raws(reader: AnyReader, topics: list[str], types: dict[str, str], notes: list[str]) -> dict[str, Raw]:
    """Every topic's messages, chunk by chunk from MCAP storages when the bag is one, else through rosbags. A
    damaged MCAP chunk (its CRC, records that do not fit) costs its own messages only: skipped, with a note."""
    selected = dict.fromkeys(topics)
    lost: list[tuple[int, int]] = []
    raws = _mcap_raws(reader, selected, types, lost)
    if lost:
        notes.append(lost_note(lost, "the bag's clock"))
    return raws if raws is not None else _library_raws(reader, selected)


def lost_note(lost: list[tuple[int, int]], clock: str) -> str:
    """What skipping damaged chunks (their log-time spans, ns) cost, for the reader's notes."""
    spans = ", ".join(f"{a / 1e9:.3f}-{b / 1e9:.3f} s" for a, b in lost[:5]) + (" ..." if len(lost) > 5 else "")
    return f"{len(lost)} damaged MCAP chunk(s) skipped: the messages logged in {spans} ({clock}) are lost"


def _library_raws(reader: AnyReader, selected: dict[str, None]) -> dict[str, Raw]:
    """Every topic's messages through rosbags' generic message iterator."""
    lists: dict[str, tuple[list[int], list[bytes]]] = {t: ([], []) for t in selected}
    for conn, stamp, raw in reader.messages(connections=[c for c in reader.connections if c.topic in selected]):
        lst = lists[conn.topic]
        lst[0].append(stamp)
        lst[1].append(bytes(raw))
    return {t: Raw.from_list(*lst) for t, lst in lists.items()}


def _mcap_storages(reader: AnyReader) -> list[McapReader] | None:
    """The MCAP storages behind a single bag, or None when rosbags must iterate (other storage, per-message
    compression, a file without chunk index)."""
    from rosbags.rosbag2.reader import DirectoryReader, Reader
    from rosbags.rosbag2.storage_mcap import McapReader

    if len(reader.readers) != 1 or not isinstance(reader.readers[0], Reader):
        return None
    storage = reader.readers[0].storage
    if isinstance(storage, DirectoryReader):
        if storage.metadata.compression_mode == "message":
            return None
        storages = list(storage.storages)
    else:
        storages = [storage]
    mcaps = [st for st in storages if isinstance(st, McapReader) and st.chunks]
    return mcaps if len(mcaps) == len(storages) else None


def _mcap_raws(reader: AnyReader, selected: dict[str, None], types: dict[str, str], lost: list[tuple[int, int]]
               ) -> dict[str, Raw] | None:
    """What `_library_raws` returns, read chunk by chunk from MCAP storages (None: not applicable); the log-time
    span of each chunk that cannot be read goes to `lost`.

    Per topic the messages come in rosbags' order: storage files in turn, each by (log time, chunk, position).
    """
    storages = _mcap_storages(reader)
    if storages is None:
        return None
    topics = list(selected)
    files = []
    for st in storages:
        assert st.bio is not None  # an open storage
        wanted = {c.id: topics.index(c.topic) for c in st.connections
                  if c.topic in selected and c.msgtype == types[c.topic]}
        chunks = [chunk for chunk in st.chunks if any(chunk.channel_count.get(cid, 0) for cid in wanted)]
        files.append((st.bio, chunks, wanted))
    return chunked_raws(files, topics, lost)


def chunked_raws(files: Sequence[tuple[BinaryIO, Sequence[Any], dict[int, int]]], topics: list[str],
                 lost: list[tuple[int, int]]) -> dict[str, Raw]:
    """Each topic's messages from MCAP files, each given as (the open file, its chunk indexes to read (rosbags'
    ChunkInfo or the mcap library's ChunkIndex), {channel id: index in `topics`}); per topic in file order, then
    by (log time, chunk, position). A chunk that cannot be read adds its log-time span to `lost`."""
    # one buffer for every chunk's records, filled as each is decompressed (a list of chunks joined at the end
    # held them twice: 1.7 GB for a flight MCAP of 1,024 vehicles x 120 s); a chunk holds exactly the size its
    # index gives (rosbags' decompress checks it)
    buf = np.empty(sum(int(chunk.uncompressed_size) for _, chunks, _ in files for chunk in chunks), dtype=np.uint8)
    ids = [np.array(sorted(wanted), dtype=np.int64) for _, _, wanted in files]  # each file's channel ids
    topic_of = [np.array([wanted[c] for c in got.tolist()], dtype=np.int64)
                for (_, _, wanted), got in zip(files, ids, strict=True)]
    parts: list[np.ndarray] = []  # rows (topic, file, log time, chunk, start, end)
    base = 0
    for k, chunk, data, cid, log, start, end in chunk_messages(files, lost):
        n = len(cid)
        parts.append(np.column_stack([topic_of[k][np.searchsorted(ids[k], cid)], np.full(n, k), log,
                                      np.full(n, chunk.chunk_start_offset), start + base, end + base]))
        buf[base:base + len(data)] = np.frombuffer(data, dtype=np.uint8)
        base += len(data)
    if lost and not parts:
        raise ValueError(f"every MCAP chunk holding the selected topics is damaged ({len(lost)})")
    rows = np.concatenate(parts) if parts else np.zeros((0, 6), dtype=np.int64)
    rows = rows[np.lexsort((rows[:, 4], rows[:, 3], rows[:, 2], rows[:, 1], rows[:, 0]))]
    bounds = np.searchsorted(rows[:, 0], np.arange(len(topics) + 1))
    buf = buf[:base]
    return {t: Raw(rows[a:b, 2].copy(), buf, rows[a:b, 4].copy(), rows[a:b, 5].copy())
            for t, a, b in zip(topics, bounds[:-1], bounds[1:], strict=True)}


def chunk_messages(files: Sequence[tuple[BinaryIO, Sequence[Any], dict[int, int]]], lost: list[tuple[int, int]]
                   ) -> Iterator[tuple[int, Any, bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Chunk by chunk (files as `chunked_raws` takes them): (file index, the chunk's index record, its decompressed
    records, channel id, log time, data start and end of each message on a wanted channel). A chunk that cannot be
    read adds its log-time span to `lost`."""
    for k, (bio, chunks, wanted) in enumerate(files):
        for chunk in chunks:
            try:
                data = _chunk_data(bio, chunk)
                cid, log, start, end = _chunk_messages(bio, chunk, data, wanted)
            except Exception:  # noqa: BLE001  (rosbags' CRC and size errors, records that do not fit: damage)
                lost.append((chunk.message_start_time, chunk.message_end_time))
                continue
            yield k, chunk, data, cid, log, start, end


def _chunk_data(bio: BinaryIO, chunk: Any) -> bytes:
    """One chunk's records, decompressed and checked (size, CRC) by rosbags."""
    from rosbags.rosbag2.storage_mcap import decompress, read_exact

    bio.seek(chunk.chunk_start_offset + 9 + 24)
    crc = struct.unpack("<I", read_exact(bio, 4))[0]
    bio.seek(chunk.chunk_start_offset + 9 + 40 + len(chunk.compression))
    return decompress(read_exact(bio, chunk.compressed_size), chunk.compression, chunk.uncompressed_size, crc)


def _chunk_messages(bio: BinaryIO, chunk: Any, data: bytes, wanted: dict[int, int]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(channel id, log time, data start, data end) of the chunk's messages on `wanted` channels that rosbags
    yields (logged within the chunk's time range)."""
    rows = _indexed_messages(bio, chunk, data)
    if rows is None:
        rows = _walk(data, 0, len(data))
    keep = np.isin(rows[:, 0], list(wanted)) & (rows[:, 1] >= chunk.message_start_time)
    keep &= rows[:, 1] <= chunk.message_end_time
    return rows[keep, 0], rows[keep, 1], rows[keep, 2], rows[keep, 3]


def _indexed_messages(bio: BinaryIO, chunk: Any, data: bytes) -> np.ndarray | None:
    """The chunk's messages from its message indexes, as strict as walking the records: every entry must
    point at a message record of its channel and log time, and the indexed records plus the other records
    between them (walked) must tile the chunk. None when they do not (the caller walks the chunk)."""
    from rosbags.rosbag2.storage_mcap import read_exact

    if not chunk.message_index_offsets:
        return None
    # the chunk's message indexes follow it as one run of records: read at once, checked record by record, their
    # entries then checked against the chunk's records all together (a chunk of a show's 1,024 per-vehicle topics
    # holds 1,024 indexes: a read and a check of each alone took 5.6 of a 7.6-s evaluation)
    first = min(chunk.message_index_offsets.values())
    bio.seek(first)
    try:
        blob = read_exact(bio, chunk.message_index_length)
    except Exception:  # noqa: BLE001  (a summary that says more than the file holds: walking decides)
        return None
    cids, entries = [], []
    for cid, offset in chunk.message_index_offsets.items():
        at = offset - first
        if at + 15 > len(blob):
            return None
        op, length, rec_cid, nbytes = _INDEX_HEAD.unpack_from(blob, at)
        if op != 0x07 or rec_cid != cid or nbytes % 16 or length != 6 + nbytes or at + 15 + nbytes > len(blob):
            return None
        cids.append((cid, nbytes // 16))
        entries.append(np.frombuffer(blob, dtype="<u8", count=nbytes // 8, offset=at + 15))
    index = np.concatenate(entries).reshape(-1, 2).astype(np.int64)
    cid = np.repeat(np.array([c for c, _ in cids], dtype=np.int64), [n for _, n in cids])
    pos = index[:, 1]
    if len(pos) and (pos.min() < 0 or pos.max() + 31 > len(data)):
        return None
    head = np.lib.stride_tricks.sliding_window_view(np.frombuffer(data, dtype=np.uint8), 31)[pos]
    size = head[:, 1:9].copy().view("<u8").ravel().astype(np.int64)
    ok = (head[:, 0] == 0x05) & (size >= 22) & (head[:, 9:11].copy().view("<u2").ravel() == cid)
    if not (ok & (head[:, 15:23].copy().view("<u8").ravel().astype(np.int64) == index[:, 0])).all():
        return None
    rows = np.column_stack([cid, index[:, 0], pos + 31, pos + 9 + size])
    rows = rows[np.argsort(rows[:, 2], kind="stable")]
    gap_start, gap_end = np.concatenate([[0], rows[:, 3]]), np.concatenate([rows[:, 2] - 31, [len(data)]])
    if (gap_end < gap_start).any():
        return None  # overlapping records
    gaps = gap_end > gap_start
    for a, b in zip(gap_start[gaps].tolist(), gap_end[gaps].tolist(), strict=True):
        try:
            if len(_walk(data, a, b)):
                return None  # a message the index does not list
        except ValueError:
            return None  # records that do not tile: walking the whole chunk decides
    return rows


def _walk(data: bytes, pos: int, end: int) -> np.ndarray:
    """(channel id, log time, data start, data end) of the message records in data[pos:end], record by record;
    raises on a record that does not fit."""
    rows: list[tuple[int, int, int, int]] = []
    while pos < end:
        if pos + 9 > end:
            raise ValueError(f"truncated record at chunk offset {pos}")
        op, length = _RECORD.unpack_from(data, pos)
        stop = pos + 9 + length
        if stop > end:
            raise ValueError(f"truncated record at chunk offset {pos}")
        if op == 0x05:
            if length < 22:
                raise ValueError(f"invalid message record length {length}")
            cid, _, log = _MESSAGE.unpack_from(data, pos + 9)
            rows.append((cid, log, pos + 31, stop))
        pos = stop
    return np.array(rows, dtype=np.int64).reshape(-1, 4)
