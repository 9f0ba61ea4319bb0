"""Parameter declaration for the live nodes: description, range and read-only flag in one call."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from uav_debate_eval.core.errors import ParameterError


def declare(node: Node, name: str, default: Any, description: str, *, lo: float | None = None,
            hi: float | None = None, read_only: bool = False) -> Any:
    """Declare a parameter and return its (possibly overridden) value.

    `lo`/`hi` give a number a range (rclpy rejects a value outside it, at start and on a later set);
    `read_only` marks a value only read at start, so changing it later is refused instead of ignored.
    A list default of `[]` is declared as an uninitialised string array (rclpy cannot infer the type
    of an empty list); reading it back gives `[]` until a value is set.
    """
    desc = ParameterDescriptor(description=description, read_only=read_only)
    if lo is not None or hi is not None:
        if isinstance(default, bool) or not isinstance(default, int | float):
            raise TypeError(f"parameter {name}: a range needs a number default, got {default!r}")
        if isinstance(default, int):
            desc.integer_range = [IntegerRange(from_value=int(lo if lo is not None else -2**31),
                                               to_value=int(hi if hi is not None else 2**31 - 1), step=0)]
        else:
            desc.floating_point_range = [FloatingPointRange(from_value=float(lo if lo is not None else -1e300),
                                                            to_value=float(hi if hi is not None else 1e300), step=0.0)]
    try:
        if isinstance(default, list) and not default:
            node.declare_parameter(name, Parameter.Type.STRING_ARRAY, desc)
            return string_list(node, name)
        return node.declare_parameter(name, default, desc).value
    except (InvalidParameterValueException, InvalidParameterTypeException) as exc:
        raise ParameterError(f"parameter {name}: {str(exc).splitlines()[0]}") from exc


def string_list(node: Node, name: str) -> list[str]:
    """A string-array parameter as a list; empty entries are dropped and an unset one is `[]`."""
    try:
        value = node.get_parameter(name).value
    except ParameterUninitializedException:
        return []
    return [str(v) for v in (value or []) if str(v).strip()]


def undeclared(node: Node, values: Iterable[str]) -> list[str]:
    """Names in `values` the node does not declare (a typo in a config file would be ignored silently)."""
    return sorted(v for v in values if not node.has_parameter(v))
