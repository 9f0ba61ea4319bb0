"""Results cached on the object they were computed from, so one evaluation computes each once.

The metrics, the events, the mission segmentation and every DSL (flight and per segment) ask for
the same snapshots, pair distances, formation errors and segmentations of the same trajectory;
trajectories, tracks and snapshots are not mutated after ingest, so the first answer is kept on
the object (like the smoothed kinematics on a Track) and the others reuse it. A value another process computes
is kept as a `Deferred` until it is first asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class Deferred:
    """A memo value that arrives from elsewhere (another process): `fetch()` waits for it, None if it will not come
    (then memo computes it here)."""

    def __init__(self, fetch: Callable[[], Any]):
        self.fetch = fetch


def memo(owner: Any, key: Hashable, deps: tuple, compute: Callable[[], T]) -> T:
    """compute(), cached on `owner` under `key` while `deps` are the same objects (checked by identity)."""
    if memo_hit(owner, key, deps):
        value = owner.__dict__["_memo"][key][1]
        if not isinstance(value, Deferred):
            return value
        value = value.fetch()
        if value is not None:
            remember(owner, key, deps, value)
            return value
    value = compute()
    remember(owner, key, deps, value)
    return value


def memo_hit(owner: Any, key: Hashable, deps: tuple) -> bool:
    """Whether `owner` keeps a value under `key` for these `deps` (memo would not compute)."""
    hit = owner.__dict__.get("_memo", {}).get(key)
    return hit is not None and len(hit[0]) == len(deps) and all(a is b for a, b in zip(hit[0], deps, strict=True))


def remember(owner: Any, key: Hashable, deps: tuple, value: Any) -> None:
    """Keep `value` as memo's answer for `owner`, `key` and `deps` (computed for many owners at once)."""
    owner.__dict__.setdefault("_memo", {})[key] = (deps, value)
