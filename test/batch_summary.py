"""The rows of a batch's summary.csv, as the batch tests read them."""

from __future__ import annotations

import csv
from pathlib import Path


def summary_rows(out: Path, *, timed: bool = True) -> list[dict]:
    """`timed=False` drops `time_s`, the one column that differs between two runs of the same batch."""
    with (out / "summary.csv").open(encoding="utf-8") as fh:
        return [{k: v for k, v in row.items() if timed or k != "time_s"} for row in csv.DictReader(fh)]
