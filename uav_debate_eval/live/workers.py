"""The live monitor's worker processes (DSL, debate) and the heap tuning of a long-running monitor.

A worker is a spawned process at a lower CPU priority, so the DSL and the LLM never hold the GIL the
safety verifier needs and never win the CPU from it. It dies with its parent even when the parent is
SIGKILLed (a flight computer must not keep a 170 MB orphan), and only the parent decides when its work stops: the
worker runs in a session of its own (the terminal's Ctrl-C, a hangup and a SIGTERM to the process group, as
`timeout` and `kill -- -PGID` send, reach only the parent) and ignores a SIGTERM that its parent did not send
(systemd's stop signals every process of the service), so the parent still evaluates the open segment and writes
the flight report.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

#: A worker process is replaced after this many jobs, so whatever a long flight leaks there is returned.
WORKER_JOBS = 10

#: Niceness of the DSL/debate worker processes: the safety verifier must win the CPU, never wait on the LLM.
WORKER_NICENESS = 10

#: glibc's malloc settings `tune_malloc` applies: (mallopt parameter of malloc.h, environment name, value).
MALLOC_SETTINGS = ((-3, "MALLOC_MMAP_THRESHOLD_", 128 * 1024), (-8, "MALLOC_ARENA_MAX", 2))

#: prctl option of <linux/prctl.h>: the signal the kernel sends this process when its parent dies.
PR_SET_PDEATHSIG = 1

#: Environment variable naming the pid a node process started by `live` must not outlive (see run_node).
EXIT_WITH_ENV = "UAV_DEBATE_EVAL_EXIT_WITH"

#: Environment variable naming the parameter file a node process started by `live` checks for names it does not
#: declare (a typo would be ignored silently; `live` refuses it with exit 2 as for its in-process nodes).
PARAMS_CHECK_ENV = "UAV_DEBATE_EVAL_PARAMS_CHECK"

#: How often the fallback watch looks for a new parent (a platform without PR_SET_PDEATHSIG).
PARENT_POLL_S = 0.5


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has mallopt and malloc_trim), else None (musl, macOS)."""
    libc = _libc()
    return libc if libc is not None and hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def tune_malloc() -> None:
    """Keep glibc's heap from growing over a long flight; call before the DDS and executor threads start.

    Each closed segment copies tens of MB of samples (the window, its pickle for the worker) in whichever
    thread handles it. glibc gives every thread an arena of its own, and after the first large block is
    freed it raises its mmap threshold, so later multi-MB blocks come from those arenas too, where freed
    space stays resident and fragmented. A fixed threshold maps every large block on its own (returned to
    the OS when freed) and two arenas bound the rest (which a periodic `trim_heap` returns). Child processes
    (the workers, a --sim simulator) get the same settings through the environment; settings already in
    the environment are left as they are.
    """
    libc = _glibc()
    for param, name, value in MALLOC_SETTINGS:
        if libc is not None and name not in os.environ:
            libc.mallopt(param, value)
            os.environ[name] = str(value)


def freeze_startup_objects() -> None:
    """Collect the start-up's garbage, then take every object alive now (modules, the ROS entities, the mission)
    out of the garbage collector's scans (`gc.freeze`), so a full collection walks only what the flight made
    since. Call once a node process is set up. A full collection of the verifier's ~55,000 start-up objects took
    ~30 ms, run inside whichever callback allocated last: a check (the tick p99) or a breaking pose (the veto's
    latency); a pose stream of 10,000 messages a second set one off every few seconds."""
    gc.collect()
    gc.freeze()


def trim_heap() -> None:
    """Hand the heap freed since the last call back to the OS (glibc keeps it resident otherwise); ~1-30 ms
    for the monitor's heap, with the GIL released."""
    if libc := _glibc():
        libc.malloc_trim(0)


def can_trim_heap() -> bool:
    return _glibc() is not None


def release_memory() -> None:
    """Collect garbage cycles (matplotlib figures) and trim the heap: a worker process after each job."""
    gc.collect()
    trim_heap()


def die_with_parent(parent: int) -> None:
    """Make this process exit when `parent` dies, however it dies (SIGKILL and crashes included).

    Linux: the kernel sends SIGKILL on the parent's death (PR_SET_PDEATHSIG; it is tied to the parent
    *thread* that forked us, which for a process pool is a thread living as long as the pool). Everywhere,
    and as a fallback: a daemon thread that exits once the parent pid changes (we were re-parented).
    """
    libc = _libc()
    if sys.platform.startswith("linux") and libc is not None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def init_worker(parent: int, niceness: int) -> None:
    """Worker-process start: lower priority, out of the parent's process group (a signal to the group had killed
    the worker mid-report: "BrokenProcessPool", no flight report), SIGTERM only from the parent, die with it."""
    os.nice(niceness)
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C sent to this worker's pid alone: no traceback either
    terminated_only_by(parent)  # before any thread starts: they all inherit the blocked SIGTERM
    die_with_parent(parent)


def terminated_only_by(parent: int) -> None:
    """SIGTERM ends this process only when `parent` sent it (its pool stopping it); from anyone else it is taken
    and dropped. Blocked in every thread and taken by one that reads the sender (`sigwaitinfo`): a Python
    handler cannot tell who sent a signal, and ignoring SIGTERM outright would hang the pool's own terminate."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})

    def take() -> None:
        while True:
            if signal.sigwaitinfo({signal.SIGTERM}).si_pid == parent:
                os._exit(128 + signal.SIGTERM)

    threading.Thread(target=take, name="sigterm-from-parent", daemon=True).start()


def _job(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Worker-process side of every job: the memory a segment's evaluation used is returned after it, so the
    worker's RSS between jobs stays at its baseline instead of its largest segment so far."""
    try:
        return fn(*args, **kwargs)
    finally:
        release_memory()


class WorkerPool(ProcessPoolExecutor):
    """Runs every job through `_job`."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future:
        return super().submit(_job, fn, *args, **kwargs)


def worker_pool() -> WorkerPool:
    """One worker *process* (spawned, not forked from a process with DDS threads) for CPU-heavy work; see the
    module docstring. Replaced after WORKER_JOBS jobs."""
    return WorkerPool(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                      max_tasks_per_child=WORKER_JOBS, initializer=init_worker,
                      initargs=(os.getpid(), WORKER_NICENESS))


def worker_pids(pool: ProcessPoolExecutor) -> list[int]:
    """The pool's live worker processes (the stdlib has no public list)."""
    return [p.pid for p in (getattr(pool, "_processes", None) or {}).values() if p.pid is not None]


def stop_process(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """SIGTERM a child we started, then SIGKILL it if it has not exited after `timeout_s`; reaps it."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop at once: work still running in the worker process is abandoned."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # the stdlib has no public kill
    for proc in procs:
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.join(timeout=5)
