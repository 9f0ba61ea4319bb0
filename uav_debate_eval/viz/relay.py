"""Foxglove WebSocket protocol v1 under both of its names on the public port (CONTRACT.md §5).

The official foxglove-sdk server speaks protocol v1 but accepts only the subprotocol name `foxglove.sdk.v1`; the
contract and many clients ask for `foxglove.websocket.v1`. This relay accepts either name on host:port and pipes
every frame, unchanged and with its text/binary type, to the SDK server on a loopback port: same wire protocol,
one extra local hop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from websockets.asyncio.client import connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

#: Names of the v1 protocol a client may ask for, the contract's first.
SUBPROTOCOLS = ("foxglove.websocket.v1", "foxglove.sdk.v1")
UPSTREAM_SUBPROTOCOL = "foxglove.sdk.v1"


class SubprotocolRelay:
    """Serves host:port in a thread of its own until `close`; each client gets its own upstream connection."""

    port: int

    def __init__(self, host: str, port: int, upstream_port: int):
        self._upstream = f"ws://127.0.0.1:{upstream_port}"
        self._loop = asyncio.new_event_loop()
        self._server: Server | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(host, port, ready), name="foxglove-relay",
                                        daemon=True)
        self._thread.start()
        ready.wait(10.0)
        if self._server is None:
            raise OSError(f"cannot serve Foxglove on {host}:{port}")
        self.port = int(self._server.sockets[0].getsockname()[1])

    def _run(self, host: str, port: int, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            with contextlib.suppress(OSError):
                self._server = await serve(self._pipe, host, port, subprotocols=list(SUBPROTOCOLS),  # type: ignore[arg-type]
                                           max_size=None, compression=None)
            ready.set()

        self._loop.run_until_complete(start())
        if self._server is not None:
            self._loop.run_until_complete(self._server.wait_closed())
        self._loop.close()

    async def _pipe(self, client: ServerConnection) -> None:
        try:
            async with connect(self._upstream, subprotocols=[UPSTREAM_SUBPROTOCOL],  # type: ignore[list-item]
                               max_size=None, compression=None) as upstream:
                await _both_ways(client, upstream)
        except (OSError, ConnectionClosed):
            await client.close()

    def close(self) -> None:
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._thread.join(5.0)


async def _both_ways(a, b) -> None:
    """Copy frames a -> b and b -> a until either side closes, then close both."""
    async def copy(src, dst) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for frame in src:
                await dst.send(frame)

    tasks = [asyncio.create_task(copy(a, b)), asyncio.create_task(copy(b, a))]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    await a.close()
    await b.close()
