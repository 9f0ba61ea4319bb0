"""Vehicle names: a uav_id column as integer codes, and the natural order (uav2 before uav10)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class VehicleCodes:
    """A uav_id column as integer codes into its distinct names (a columnar reader's dictionary encoding):
    `from_columns` groups a million rows by integer code instead of sorting a million strings."""

    names: np.ndarray  # (K,) distinct names
    codes: np.ndarray  # (n,) index into names

    def __len__(self) -> int:
        return len(self.codes)

    def strings(self) -> np.ndarray:
        return np.asarray(self.names, dtype=str)[self.codes]


def natural_key(s: str) -> list:
    """Sort uav2 before uav10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]
