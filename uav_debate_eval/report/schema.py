"""Validate a report dict against the package's copy of the contract schema (report.schema.json)."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema

SCHEMA_FILE = "report.schema.json"


class ReportSchemaError(ValueError):
    """A report that does not match the schema: a bug in the producer, listed path by path."""


@cache
def load_schema(path: str | None = None) -> dict:
    """The package's schema, or the one at `path` (tests also check against the shared contract copy)."""
    if path is not None:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    return json.loads(resources.files("uav_debate_eval.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def validate_report(report: dict, schema_path: str | None = None) -> None:
    """Raise ReportSchemaError listing every mismatch (at most 10) with its JSON path."""
    schema = load_schema(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors[:10]]
        raise ReportSchemaError(f"report does not match the schema ({len(errors)} error(s)): " + "; ".join(lines))
