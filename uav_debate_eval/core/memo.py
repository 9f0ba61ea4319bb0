"""Results cached on the object they were computed from, so one evaluation computes each once.

The metrics, the events, the mission segmentation and every DSL (flight and per segment) ask for
the same snapshots, pair distances, formation errors and segmentations of the same trajectory;
trajectories, tracks and snapshots are not mutated after ingest, so the first answer is kept on
the object (like the smoothed kinematics on a Track) and the others reuse it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


def memo(owner: Any, key: Hashable, deps: tuple, compute: Callable[[], T]) -> T:
    """compute(), cached on `owner` under `key` while `deps` are the same objects (checked by identity)."""
    cache = owner.__dict__.setdefault("_memo", {})
    hit = cache.get(key)
    if hit is not None and len(hit[0]) == len(deps) and all(a is b for a, b in zip(hit[0], deps, strict=True)):
        return hit[1]
    value = compute()
    cache[key] = (deps, value)
    return value
