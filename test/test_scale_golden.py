"""Golden reports (rules backend, built-in suite): the report as written, compared by value (golden_reports.py).

The same on every machine: the goldens hold under two OpenBLAS kernels this CPU supports, run in subprocesses
(AVX-512 machines pick SkylakeX, others Haswell or older: the last bits of the scores differ), and after a
last-bit perturbation of the positions read.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from golden_reports import GOLDEN, canonical, differences, evaluate_entry, golden_path, load_golden, suite

#: entries the BLAS and perturbation checks run (scores, the across-vehicle paths, the messy reader)
SUBSET = ("formation:near_miss", "grid:n40", "formation:near_miss:messy")
#: OpenBLAS kernels by the CPU flag they need, most capable first
KERNELS = (("SkylakeX", "avx512f"), ("Haswell", "avx2"), ("Sandybridge", "avx"), ("Nehalem", "sse4_2"))


def test_golden_covers_the_suite():
    assert {p.name for p in GOLDEN.glob("*.json")} == {golden_path(e).name for e in suite()}


@pytest.mark.parametrize("entry", sorted(suite()))
def test_report_equals_golden(entry):
    diffs = differences(evaluate_entry(*suite()[entry]), load_golden(entry))
    assert not diffs, f"{entry}: {len(diffs)} values changed, first: {diffs[:5]}"


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return set()
    return {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}


def test_goldens_hold_under_two_blas_kernels():
    flags = _cpu_flags()
    kernels = [name for name, flag in KERNELS if flag in flags][:2]
    if len(kernels) < 2:
        pytest.skip(f"this CPU supports fewer than two of the OpenBLAS kernels {[k for k, _ in KERNELS]}")
    root = Path(__file__).resolve().parents[1]
    for kernel in kernels:
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel, "PYTHONPATH": str(root)}
        probe = subprocess.run([sys.executable, "-c", "import numpy"], env={**env, "OPENBLAS_VERBOSE": "2"},
                               capture_output=True, text=True, timeout=60)
        assert f"Core: {kernel}" in probe.stderr, f"OpenBLAS did not take {kernel}: {probe.stderr}"
        run = subprocess.run([sys.executable, str(root / "test" / "golden_reports.py"), "--check", *SUBSET],
                             env=env, capture_output=True, text=True, timeout=280)
        assert run.returncode == 0, f"OPENBLAS_CORETYPE={kernel}: {run.stdout}{run.stderr[-2000:]}"


@pytest.mark.parametrize("entry", SUBSET)
def test_a_last_bit_perturbation_of_the_inputs_leaves_the_report_unchanged(entry):
    spec, overrides, messy = suite()[entry]
    assert not differences(evaluate_entry(spec, overrides, messy, nudge=True), load_golden(entry))


def test_differences_compares_numbers_to_the_last_decimal_kept_and_text_exactly():
    want = {"scores": {"overall": 0.8338}, "violations": [{"t_start": 14.45, "detail": "0.482 m"}]}
    assert not differences({"scores": {"overall": 0.83379}, "violations": [{"t_start": 14.4505, "detail": "0.482 m"}]},
                           want)
    assert differences({"scores": {"overall": 0.8340}, "violations": [{"t_start": 14.45, "detail": "0.482 m"}]}, want)
    assert differences({"scores": {"overall": 0.8338}, "violations": [{"t_start": 14.452, "detail": "0.482 m"}]},
                       want)
    assert differences({"scores": {"overall": 0.8338}, "violations": [{"t_start": 14.45, "detail": "0.483 m"}]},
                       want)
    assert differences({"scores": {"overall": 0.8338}, "violations": []}, want)


def test_canonical_drops_timing_and_tmp_paths():
    report = {"timing": {"read": 1.0}, "debate": {"elapsed_s": 0.3, "x": [1, "/tmp/abc/t.csv"]}, "b": 2}
    assert canonical(report, "/tmp/abc") == {"b": 2, "debate": {"x": [1, "<tmp>/t.csv"]}}
