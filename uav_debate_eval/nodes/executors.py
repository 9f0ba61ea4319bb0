"""Executors of the live graph: one single-threaded executor per node, each on its own thread (`spin_nodes`),
and the node that gives a blocking service a thread of its own (`BlockingServiceNode`)."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable

from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from uav_debate_eval.core.errors import InputError


class BlockingServiceNode(Node):
    """Serves one service of `owner` whose callback blocks (waits for other work), on a node of its own: given
    to `spin_nodes` beside its owner, it gets a thread of its own, and the wait holds up none of the owner's
    callbacks.

    Not a MultiThreadedExecutor for the owner: rclpy's (Jazzy) busy-loops while a ready entity waits for its
    callback group and rescans its futures on every turn. For debate_panel in `live` that thread held the GIL
    in ~96 % of samples, and the verifier's pose callbacks in the same process stalled for up to 2 s.
    """

    def __init__(self, owner: Node, srv_type, name: str, callback: Callable):
        super().__init__(f"{owner.get_name()}_{name.rsplit('/', 1)[-1]}", namespace=owner.get_namespace(),
                         context=owner.context)
        self.create_service(srv_type, name, callback)


#: Executor kinds of `spin_nodes` (and `live --executor`).
EXECUTORS = ("auto", "events", "single")


def events_executor_available() -> bool:
    try:
        from rclpy.experimental import EventsExecutor  # noqa: F401  (rclpy >= 7.1 on Jazzy)
    except ImportError:
        return False
    return True


def node_executor(kind: str = "auto"):
    """One node's single-threaded executor: rclpy's EventsExecutor (C++, an order of magnitude less overhead
    per callback) when `kind` is events, or auto and this rclpy has it; else the SingleThreadedExecutor."""
    if kind not in EXECUTORS:
        raise InputError(f"executor: expected one of {', '.join(EXECUTORS)}, got {kind!r}")
    if kind != "single" and events_executor_available():
        from rclpy.experimental import EventsExecutor
        try:
            return EventsExecutor()
        except io.UnsupportedOperation:  # it enables faulthandler on sys.stderr, which needs a real file
            if kind == "events":
                raise
    elif kind == "events":
        raise InputError("executor events: this rclpy has no rclpy.experimental.EventsExecutor")
    return SingleThreadedExecutor()


def spin_nodes(nodes: list[Node], *, duration_s: float | None = None, stop: threading.Event | None = None,
               on_tick: Callable[[], None] | None = None, executor: str = "auto") -> None:
    """Spin every node on its own executor in its own thread until `duration_s`, `stop` or Ctrl-C.

    Not one MultiThreadedExecutor for all: rclpy's (Jazzy) busy-loops while a ready callback waits for its
    mutually exclusive group and rescans every callback in flight on each spin; with 100 vehicles at 50 Hz
    that overhead alone took a whole core, the pose stream stalled for over a second and the verifier
    declared every vehicle stale. A SingleThreadedExecutor per node sleeps in the wait set until there is
    work, and the verifier's thread never waits behind another node's callback. `executor` picks its kind
    (see `node_executor`). A callback that must block (the panel's Trigger service waits for its evaluation)
    goes on a node of its own, so it blocks only that node's thread (`BlockingServiceNode`).
    """
    stopping = threading.Event()
    executors: list[Executor] = [node_executor(executor) for _ in nodes]
    failures: list[BaseException] = []

    def spin(executor: Executor) -> None:
        try:
            while not stopping.is_set() and executor.context.ok():
                executor.spin_once(timeout_sec=0.1)
        except ExternalShutdownException:  # SIGINT/SIGTERM under rclpy's own handlers: the context is down
            pass
        except BaseException as exc:  # a callback failed: stop the graph and raise it in the caller
            failures.append(exc)
        finally:
            stopping.set()

    for node, ex in zip(nodes, executors, strict=True):
        ex.add_node(node)
    threads = [threading.Thread(target=spin, args=(ex,), name=f"spin_{node.get_name()}", daemon=True)
               for node, ex in zip(nodes, executors, strict=True)]
    for thread in threads:
        thread.start()
    end = time.monotonic() + duration_s if duration_s else None
    try:
        while not stopping.is_set() and (end is None or time.monotonic() < end) and not (stop and stop.is_set()):
            stopping.wait(0.1)
            if on_tick:
                on_tick()
    finally:
        stopping.set()
        for thread in threads:
            thread.join(timeout=10.0)
        for node, ex in zip(nodes, executors, strict=True):
            ex.shutdown(timeout_sec=5.0)
            ex.remove_node(node)
    if failures:
        raise failures[0]


