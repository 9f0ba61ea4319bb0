"""A DDS domain for one test that no other process on this machine holds at the same time.

Test runs share the machine (a developer's two checkouts, helpers, CI steps): two flights on one domain
cross-talk (another simulator's uav1 keeps a silent uav1 alive, its truth and poses reset the monitor). A lease
is an exclusive flock on a per-domain file: the kernel drops it when the holder exits, even when killed, so no
lease outlives its test run. Domains 1-101 only: on Linux, ids 102-214 map to ports in the ephemeral range.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "uav_debate_eval_ros_domains"
DOMAINS = tuple(range(1, 102))
_start = [os.getpid() % len(DOMAINS)]  # where this process looks next: not the domain it has just released


@contextlib.contextmanager
def leased_domain() -> Iterator[int]:
    """A domain id held for the duration of the `with` block (RuntimeError when all are held)."""
    LOCK_DIR.mkdir(exist_ok=True)
    for k in range(len(DOMAINS)):
        i = (_start[0] + k) % len(DOMAINS)
        fd = os.open(LOCK_DIR / f"{DOMAINS[i]}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _start[0] = i + 1
        try:
            yield DOMAINS[i]
        finally:
            os.close(fd)  # releases the lock
        return
    raise RuntimeError(f"every ROS domain in {DOMAINS[0]}-{DOMAINS[-1]} is held by another test process")
