"""The entry points start numpy and its BLAS single-threaded and without huge-page advice
(uav_debate_eval.core.numeric_env): each sets the defaults before anything loads numpy; a user's own value stands."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Imports the entry point, then numpy and scipy.linalg, and prints each loaded OpenBLAS's thread count.
PROBE = textwrap.dedent("""
    import ctypes, importlib, json, os, sys
    importlib.import_module(sys.argv[1])
    import numpy, scipy.linalg
    libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.lower()})
    counts = []
    for path in libs:
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads",
                     "openblas_get_num_threads64_", "openblas_get_num_threads"):
            if hasattr(lib, name):
                counts.append(getattr(lib, name)())
                break
    print(json.dumps({"threads": counts, "env": [os.environ.get("NUMPY_MADVISE_HUGEPAGE"),
                                                 os.environ.get("OPENBLAS_NUM_THREADS")]}))
""")


def probe(module: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "NUMPY_MADVISE_HUGEPAGE",
                                                              "OMP_NUM_THREADS")}
    run = subprocess.run([sys.executable, "-c", PROBE, module], env={**clean, **env, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("module", ["uav_debate_eval.cli", "uav_debate_eval.nodes.safety_verifier"])
def test_entry_points_start_blas_with_one_thread(module):
    seen = probe(module)
    assert seen["env"] == ["0", "1"]
    assert seen["threads"] and set(seen["threads"]) == {1}, seen  # numpy's and scipy's OpenBLAS alike


def test_a_users_setting_stands():
    assert probe("uav_debate_eval.cli", OPENBLAS_NUM_THREADS="2", NUMPY_MADVISE_HUGEPAGE="1")["env"] == ["1", "2"]


def test_without_the_entry_point_blas_takes_every_core():
    """The probe can tell: numpy imported on its own starts a thread per core (more than one on this machine)."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: OpenBLAS starts one thread anyway")
    seen = probe("json")
    assert seen["env"] == [None, None] and max(seen["threads"]) > 1, seen
