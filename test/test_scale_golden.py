"""Issue 15: the speed work must not change any report (rules backend, built-in suite), apart from timing fields."""

import json

import pytest
from golden_reports import GOLDEN, canonical, evaluate_entry, section_digests, suite

EXPECTED = json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_golden_covers_the_suite():
    assert set(EXPECTED) == set(suite())


@pytest.mark.parametrize("entry", sorted(suite()))
def test_report_identical_to_golden(entry):
    spec, overrides, messy = suite()[entry]
    got = section_digests(evaluate_entry(spec, overrides, messy))
    changed = sorted(k for k in set(got) | set(EXPECTED[entry]) if got.get(k) != EXPECTED[entry].get(k))
    assert not changed, f"{entry}: report sections changed: {changed}"


def test_canonical_drops_timing_and_tmp_paths():
    report = {"timing": {"read": 1.0}, "debate": {"elapsed_s": 0.3, "x": [1, "/tmp/abc/t.csv"]}, "b": 2}
    assert canonical(report, "/tmp/abc") == {"b": 2, "debate": {"x": [1, "<tmp>/t.csv"]}}
