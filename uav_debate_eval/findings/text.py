"""Number, time-span and vehicle-list formatting shared by every sentence the tool writes."""

from __future__ import annotations

from typing import Any


def num(x: Any, digits: int = 2) -> str:
    """A number as an engineer writes it: at most `digits` decimals, no trailing zeros."""
    if x is None:
        return "n/a"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if v != v:
        return "n/a"
    text = f"{v:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{v:.0f}"
    return "0" if text in ("-0", "") else text


def span(t0: float, t1: float | None) -> str:
    """Flight-time interval "14.45–19.95 s" (one instant: "14.45 s")."""
    if t1 is None or abs(float(t1) - float(t0)) < 0.005:
        return f"{num(t0)} s"
    return f"{num(t0)}–{num(t1)} s"


def vehicles(uavs: list[str] | tuple[str, ...]) -> str:
    """"uav1", "uav1 and uav2", "uav1, uav2 and uav3"; long lists keep the first four and count the rest."""
    u = [str(x) for x in uavs]
    if not u:
        return "the swarm"
    if len(u) > 6:
        return f"{len(u)} vehicles ({', '.join(u[:4])} and {len(u) - 4} more)"
    return u[0] if len(u) == 1 else f"{', '.join(u[:-1])} and {u[-1]}"
