"""A minimal Foxglove WebSocket protocol v1 client for the tests (advertise, subscribe, message data)."""

from __future__ import annotations

import json
import struct
import time

from websockets.sync.client import connect

#: The contract's name of the Foxglove WebSocket protocol v1 (CONTRACT.md §5), and only that name: the live view
#: must accept it (viz.relay serves it in front of the foxglove-sdk server, which knows only `foxglove.sdk.v1`).
SUBPROTOCOLS = ["foxglove.websocket.v1"]
MESSAGE_DATA = 0x01  # binary opcode: subscription id (u32), log time (u64), payload


class FoxgloveClient:
    def __init__(self, url: str, timeout_s: float = 30.0):
        self.ws = connect(url, subprotocols=SUBPROTOCOLS, open_timeout=timeout_s)
        assert self.ws.subprotocol in SUBPROTOCOLS
        self.channels: dict[str, dict] = {}  # topic -> advertised channel
        self._subs: dict[int, str] = {}

    def wait_channels(self, topics: set[str], timeout_s: float = 30.0) -> None:
        end = time.monotonic() + timeout_s
        while not topics <= set(self.channels) and time.monotonic() < end:
            self._receive(end)
        missing = topics - set(self.channels)
        assert not missing, f"advertised {sorted(self.channels)}, missing {missing}"

    def subscribe(self, topics: list[str]) -> None:
        subs = []
        for k, topic in enumerate(topics, len(self._subs) + 1):
            self._subs[k] = topic
            subs.append({"id": k, "channelId": self.channels[topic]["id"]})
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def messages(self, timeout_s: float):
        """Yield (topic, log_time_ns, payload) until timeout_s (JSON payloads decoded)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            got = self._receive(end)
            if got is not None:
                yield got

    def _receive(self, end: float):
        try:
            raw = self.ws.recv(timeout=max(0.01, end - time.monotonic()))
        except TimeoutError:
            return None
        if isinstance(raw, str):
            msg = json.loads(raw)
            if msg.get("op") == "advertise":
                self.channels.update({c["topic"]: c for c in msg["channels"]})
            return None
        if raw[0] != MESSAGE_DATA:
            return None
        sub, log_time = struct.unpack_from("<IQ", raw, 1)
        topic = self._subs.get(sub)
        payload = raw[13:]
        if topic is not None and self.channels[topic]["encoding"] == "json":
            payload = json.loads(payload)
        return topic, log_time, payload

    def close(self) -> None:
        self.ws.close()
