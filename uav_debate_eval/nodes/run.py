"""What every live node's process shares: its main() (`run_node`), the heap trim timer, the clock-jump log."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.live.workers import (
    EXIT_WITH_ENV,
    can_trim_heap,
    die_with_parent,
    freeze_startup_objects,
    trim_heap,
    tune_malloc,
)

#: How often a node that cuts or evaluates segments trims its process's heap (see `add_heap_trim`).
TRIM_PERIOD_S = 10.0


def add_heap_trim(node: Node) -> None:
    """Trim the heap every TRIM_PERIOD_S (steady clock, own callback group): each segment frees tens of MB
    in small blocks (per-vehicle arrays) spread between the poses' allocations, so that space would stay
    resident. Without this and `tune_malloc` the soak benchmark's monitor process grew ~13 MB a minute
    while its Python objects stayed the same."""
    if can_trim_heap():
        node.create_timer(TRIM_PERIOD_S, trim_heap, callback_group=MutuallyExclusiveCallbackGroup(),
                          clock=Clock(clock_type=ClockType.STEADY_TIME))


class ClockJumpGuard:
    """Notices a backwards time jump (a looping bag or sim) and logs it once per jump, not per message."""

    def __init__(self, node: Node, what: str):
        self._node = node
        self._what = what
        self._seen_resets = 0
        self.jumps = 0
        self.last_message = ""

    def check(self, resets: int, newest_t: float) -> bool:
        """True once for each new buffer reset counted by StreamingSwarm."""
        if resets == self._seen_resets:
            return False
        self._seen_resets = resets
        self.jumps += 1
        self.last_message = (f"time jumped backwards (bag or sim loop, now t={newest_t:.3f}): {self._what} reset "
                             f"(jump #{self.jumps})")
        self._node.get_logger().warning(self.last_message)
        return True


NodeT = TypeVar("NodeT", bound=Node)


def run_node(label: str, make_node: Callable[[], NodeT], spin: Callable[[NodeT], None] = rclpy.spin,
             args: list[str] | None = None) -> None:
    """The main() of every node's own process: spin until Ctrl-C or SIGTERM (exit 0), and turn a bad
    mission, CSV or parameter into one line on stderr and exit status 2."""
    node: NodeT | None = None
    tune_malloc()
    if parent := os.environ.pop(EXIT_WITH_ENV, None):  # started by `live`: never outlive it
        die_with_parent(int(parent))
    try:
        rclpy.init(args=args)
        node = make_node()
        freeze_startup_objects()
        spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except (InputError, ValueError) as exc:
        print(f"{label}: {exc}", file=sys.stderr)
        sys.exit(2)
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
