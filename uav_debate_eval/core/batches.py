"""Rows of one shape, a block at a time: the vectorised passes over many vehicles stack the vehicles whose arrays
have the same shape (length, step) and work along each row, at most a block of them at once so the stacked
temporaries stay within the CPU cache. Every row's numbers are then those of its vehicle alone."""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def equal_blocks(keys: Sequence[Hashable | None], size: int) -> list[list[int]]:
    """Indexes of `keys` grouped by equal key in first-seen order (a None key is left out), each group cut into
    blocks of at most `size`."""
    groups: dict[Hashable, list[int]] = {}
    for i, key in enumerate(keys):
        if key is not None:
            groups.setdefault(key, []).append(i)
    return [group[a:a + size] for group in groups.values() for a in range(0, len(group), size)]
