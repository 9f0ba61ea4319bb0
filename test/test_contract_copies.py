"""The project's copies of the contract and its schemas equal ../shared/spec, where the contract comes from."""

from pathlib import Path

import pytest
from contract import COMPARISON_SCHEMA, CONTRACT, REPORT_SCHEMA, SHARED_SPEC

COPIES = {"CONTRACT.md": CONTRACT, "report.schema.json": REPORT_SCHEMA, "comparison.schema.json": COMPARISON_SCHEMA}


@pytest.mark.parametrize("name", sorted(COPIES))
def test_project_copy_equals_the_shared_contract(name):
    shared = SHARED_SPEC / name
    if not shared.is_file():
        pytest.skip(f"no {shared} beside this clone: the project's copy is the contract")
    assert shared.read_bytes() == Path(COPIES[name]).read_bytes(), f"{name}: copy {shared} into the project"
