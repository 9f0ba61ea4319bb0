"""Vehicles by grid cell, so the live verifier's per-pose separation pre-check looks at neighbours, not the swarm.

A drone show streams 1,000 vehicles at 10 Hz, one pose at a time: comparing each pose with every stored vehicle
(O(N) numpy calls, ~70 us each) kept one core busy on its own. With cells of side `cell` (twice the separation
limit), every vehicle closer than `cell / 2` to a point lies in the 2 x 2 x 2 block of cells nearest that point, so
the pre-check reads a handful of positions in plain Python. Exact: the same vehicles are found as by the full
comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterator


class CellIndex:
    """Slot -> position, and cell -> slots, kept in step one `move` at a time (O(1) each)."""

    def __init__(self, cell: float) -> None:
        if not cell > 0:
            raise ValueError(f"cell: must be > 0, got {cell}")
        self.cell = float(cell)
        self.clear()

    def clear(self) -> None:
        self._cells: dict[tuple[int, int, int], set[int]] = {}
        self._at: dict[int, tuple[tuple[int, int, int], float, float, float]] = {}  # slot -> (cell, x, y, z)

    def __len__(self) -> int:
        return len(self._at)

    def _key(self, x: float, y: float, z: float) -> tuple[int, int, int]:
        c = self.cell
        return math.floor(x / c), math.floor(y / c), math.floor(z / c)

    def move(self, slot: int, x: float, y: float, z: float) -> None:
        """The slot's vehicle is now at (x, y, z); a position that is not finite takes it out of the index."""
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            self.remove(slot)
            return
        key = self._key(x, y, z)
        old = self._at.get(slot)
        if old is not None and old[0] != key:
            self._leave(slot, old[0])
        if old is None or old[0] != key:
            self._cells.setdefault(key, set()).add(slot)
        self._at[slot] = (key, x, y, z)

    def remove(self, slot: int) -> None:
        old = self._at.pop(slot, None)
        if old is not None:
            self._leave(slot, old[0])

    def _leave(self, slot: int, key: tuple[int, int, int]) -> None:
        members = self._cells[key]
        members.discard(slot)
        if not members:
            del self._cells[key]

    def within(self, x: float, y: float, z: float, radius: float, skip: int = -1) -> Iterator[int]:
        """Slots (other than `skip`) closer than `radius` (at most half the cell side) to (x, y, z)."""
        c = self.cell
        if radius > c / 2:
            raise ValueError(f"radius {radius} exceeds half the cell side {c}")
        fx, fy, fz = x / c, y / c, z / c
        cx, cy, cz = math.floor(fx), math.floor(fy), math.floor(fz)
        # on each axis the cell of the point and its neighbour on the nearer side: a point within c/2 is in one
        xs = (cx, cx - 1 if fx - cx < 0.5 else cx + 1)
        ys = (cy, cy - 1 if fy - cy < 0.5 else cy + 1)
        zs = (cz, cz - 1 if fz - cz < 0.5 else cz + 1)
        r2 = radius * radius
        cells, at = self._cells, self._at
        for i in xs:
            for j in ys:
                for k in zs:
                    for slot in cells.get((i, j, k), ()):
                        if slot != skip:
                            _, px, py, pz = at[slot]
                            if (px - x) ** 2 + (py - y) ** 2 + (pz - z) ** 2 < r2:
                                yield slot
