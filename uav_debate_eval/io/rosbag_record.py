"""The live session's pose messages as received, recorded to a rosbag2 MCAP (rosbags' writer): PX4's px4_msgs and
Gazebo's TFMessage, so `evaluate` on the bag replays the session through the same frame and clock rules (io.px4).

Each message is written as the node received it (its CDR bytes) with the node's receive time as the bag's log time:
the clock rule of both paths is "each PX4 instance's first message fixes its boot-clock offset to the receive
time" (io.px4.BootClock), so the recorded receive times give the recorded flight the live flight's clock exactly.
Definitions are embedded: the message package's installed .msg files, else rosbags' own ROS 2 types, else the
first shipped px4_msgs whose layout decodes the message exactly (as the bag reader picks them).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from uav_debate_eval.core.errors import InputError

#: The session bag's folder under OUT/flight (a rosbag2 directory: metadata.yaml and rosbag2_0.mcap)
SESSION_BAG = "rosbag2"


def installed_definitions(package_init: str | Path | None, msgtype: str) -> dict[str, str]:
    """`pkg/msg/Type` -> .msg text of the type's package as installed (`<prefix>/share/<pkg>/msg/*.msg`, found from
    the Python package's `__init__.py` at `<prefix>/lib/pythonX/site-packages/<pkg>/`); empty when not found."""
    if package_init is None:
        return {}
    package = msgtype.split("/")[0]
    folder = Path(package_init).resolve().parents[4] / "share" / package / "msg"
    if not folder.is_dir():
        return {}
    return {f"{package}/msg/{f.stem}": f.read_text() for f in sorted(folder.glob("*.msg"))}


class SessionBag:
    """A rosbag2 directory (one MCAP file) opened at the first message; `write` is thread-safe; `close` finishes it
    (metadata.yaml, the MCAP's summary) and later messages are dropped."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.messages = 0
        self._writer: Any = None
        self._conns: dict[str, Any] = {}
        self._store: Any = None
        self._lock = threading.Lock()
        self._closed = False

    def write(self, topic: str, msgtype: str, data: bytes, received_ns: int,
              definitions: dict[str, str] | None = None) -> None:
        with self._lock:
            if self._closed:
                return
            if self._writer is None:
                self._open()
            conn = self._conns.get(topic)
            if conn is None:
                conn = self._conns[topic] = self._connection(topic, msgtype, definitions or {}, data)
            self._writer.write(conn, int(received_ns), data)
            self.messages += 1

    def _open(self) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        if self.path.exists():  # a previous session's bag is not this flight
            shutil.rmtree(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._store = get_typestore(Stores.ROS2_JAZZY)
        self._writer = Writer(self.path, version=Writer.VERSION_LATEST, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()

    def _connection(self, topic: str, msgtype: str, definitions: dict[str, str], data: bytes) -> Any:
        from rosbags.typesys import get_types_from_msg

        store = self._store
        if msgtype not in store.fielddefs and not definitions and msgtype.startswith("px4_msgs/"):
            store = _shipped_fitting(msgtype, data) or store
        if msgtype not in store.fielddefs and definitions:
            types: dict[str, Any] = {}
            for name, text in definitions.items():
                try:
                    types.update(get_types_from_msg(text, name))
                except Exception:  # noqa: BLE001  (one unreadable definition must not stop the recording)
                    continue
            store.register(types)
        if msgtype not in store.fielddefs:
            raise InputError(f"{topic}: no definition of {msgtype} to record it with (its package's share/.../msg "
                             "files are not installed and no shipped px4_msgs decodes it)")
        return self._writer.add_connection(topic, msgtype, typestore=store)

    def close(self) -> Path | None:
        """Finish the bag; returns its path (None when nothing was recorded)."""
        with self._lock:
            self._closed = True
            if self._writer is None:
                return None
            try:
                self._writer.close()
            except Exception as exc:  # noqa: BLE001  (a full disk: say it in one line)
                raise InputError(f"{self.path}: session bag not finished: {exc}") from exc
            self._writer = None
            return self.path


def _shipped_fitting(msgtype: str, data: bytes) -> Any:
    """The first shipped px4_msgs type store (main, v1.16, v1.15) that decodes this message exactly, else None."""
    from uav_debate_eval.io.rosbag.px4 import SHIPPED, shipped_store

    for version in SHIPPED:
        store = shipped_store(version)
        try:
            store.deserialize_cdr(data, msgtype)
        except Exception:  # noqa: BLE001  (another layout: rosbags raises SerdeError, KeyError or struct errors)
            continue
        return store
    return None
