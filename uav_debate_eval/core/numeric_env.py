"""How the numeric libraries of a uav_debate_eval process start: settings they read once, as they load.

Every entry point (the command line, the ROS nodes) applies these before anything imports numpy; a value the user
set stands.
"""

from __future__ import annotations

import os

#: Environment variable -> value, each with the reason it is the default here.
DEFAULTS = {
    # numpy advises the kernel to back every array of 4 MB or more with huge pages. Where transparent huge pages are
    # defragmented on advice (the Debian and Ubuntu default), each such array, mostly short-lived temporaries here,
    # waits for the kernel to compact memory: 0.4-0.7 s of system time in a 4 s evaluation of 1,024 vehicles.
    "NUMPY_MADVISE_HUGEPAGE": "0",
    # OpenBLAS starts a thread per core that spins between calls. An evaluation already runs its stages in forked
    # processes on every core, and a live verifier shares its machine with the simulator and autopilots: the
    # spinning took 12% of the CPU of a 1,024-vehicle evaluation on two cores (0.9 s; 0.35 s of its wall time).
    # One thread also gives the same sums whatever the machine's core count.
    "OPENBLAS_NUM_THREADS": "1",
}


def apply() -> None:
    """Set each default the environment does not already hold (no effect on a library already loaded)."""
    for name, value in DEFAULTS.items():
        os.environ.setdefault(name, value)
