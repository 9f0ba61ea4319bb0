"""Work on the second core: a function run in a forked child process that dies with its parent.

An offline evaluation is one process; its independent parts (the segment windows' metrics and DSL, the
figures) can run beside it. A forked child starts at once with every array and cache of the parent (copy on
write: nothing is pickled on the way in), so only its result travels back through a pipe. The child ignores
the terminal's Ctrl-C and dies with its parent however the parent ends (live/workers.die_with_parent).
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import multiprocessing
import os
import queue
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np


class ChildLost(RuntimeError):
    """The child process ended without a result (killed, or out of memory)."""


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def shared_array(shape: tuple[int, ...], dtype: Any = float) -> np.ndarray:
    """An array (8-byte items) in anonymous shared memory: a child forked after this sees what this process writes
    into it, and this process what the child writes (no name to clean up: the mapping goes with the last process
    holding it)."""
    size = int(np.prod(shape)) * 8
    return np.frombuffer(mmap.mmap(-1, max(size, 1)), dtype=dtype, count=int(np.prod(shape))).reshape(shape)


def can_fork() -> bool:
    """Whether this process may fork helpers: only a run's own process on a platform with fork. A batch worker
    (--jobs, a Dask worker) already has its core, and a daemonic process may have no children."""
    return "fork" in multiprocessing.get_all_start_methods() and multiprocessing.parent_process() is None


class Forked:
    """fn(inbox, *args) in a forked child; `send` passes it more input (inbox.recv()), `result` waits for its value.

    An exception in the child is raised again by `result`. Use as a context manager (or call `cancel`) so a
    child whose result is not wanted is stopped.
    """

    def __init__(self, fn: Callable[..., Any], *args: Any):
        ctx = multiprocessing.get_context("fork")
        self._conn, child_end = ctx.Pipe(duplex=True)
        for stream in (sys.stdout, sys.stderr):  # a child must not write the parent's buffered output again
            stream.flush()
        self._proc = ctx.Process(target=_run, args=(os.getpid(), child_end, fn, args), daemon=True)
        gc.freeze()  # the child's garbage collector leaves the inherited objects alone (no copy of their pages)
        try:
            self._proc.start()
        finally:
            gc.unfreeze()
        child_end.close()
        self._done = False
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._sender: threading.Thread | None = None
        self._send_lock = threading.Lock()

    def send(self, obj: Any) -> None:
        """Pickle `obj` now and write it from a thread: a pipe holds 64 kB, and a child busy elsewhere would keep
        this process waiting on the write (3.4 s of a 1,024-vehicle flight) until it reads."""
        data = bytes(ForkingPickler.dumps(obj))
        with self._send_lock:  # two threads may send: one writer
            if self._sender is None:
                self._sender = threading.Thread(target=self._write, name="forked-send", daemon=True)
                self._sender.start()
            self._outbox.put(data)

    def _write(self) -> None:
        while (data := self._outbox.get()) is not None:
            try:
                self._conn.send_bytes(data)
            except (OSError, TypeError, ValueError):  # the child is gone (or the pipe closed): nothing to tell it
                return

    def result(self) -> Any:
        try:
            ok, value = self._conn.recv()
        except (EOFError, OSError) as exc:
            raise ChildLost(f"child process {self._proc.pid} ended without a result "
                            f"(exit code {self._proc.exitcode})") from exc
        finally:
            self._finish()
        if not ok:
            raise value
        return value

    def alive(self) -> bool:
        """Whether the child is still running (it may have a result waiting)."""
        return self._proc.is_alive()

    def cancel(self) -> None:
        if not self._done and self._proc.is_alive():
            self._proc.kill()
        self._finish()

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._proc.join()  # the child's end closes: a write still under way fails and the sender ends
            if self._sender is not None:
                self._outbox.put(None)
                self._sender.join()
            with contextlib.suppress(OSError):
                self._conn.close()

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()


def _run(parent: int, conn: Connection, fn: Callable[..., Any], args: tuple) -> None:
    from uav_debate_eval.live.workers import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)
    try:
        reply = (True, fn(conn, *args))
    except BaseException as exc:  # the parent re-raises it
        reply = (False, exc)
    try:
        conn.send(reply)
    except Exception as exc:  # an unpicklable result or exception: say what it was
        conn.send((False, RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()
