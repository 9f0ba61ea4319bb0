"""Helpers shared by the live nodes and the in-process graph of `uav-debate-eval live`.

The graph runs every monitoring node in one process, each node on its own executor and thread (see
`spin_nodes`), so the safety verifier's callbacks never wait behind another node's (the DSL and the
debate run in worker processes, each fed by one thread).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import io
import json
import math
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import rclpy
import yaml
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import ParameterUninitializedException
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.logging import get_logger
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission, load_mission

PACKAGE = "uav_debate_eval"

#: Topics added beyond CONTRACT.md §5 (which stays as is).
SEGMENT_TOPIC = "/swarm/segment"  # std_msgs/String JSON: {id, t_start, t_end, reason, uavs}
TRUTH_TOPIC = "/swarm/sim/truth"  # std_msgs/String JSON: the simulator's ground truth
DSL_TOPIC = "/swarm/dsl"
REPORT_TOPIC = "/swarm/evaluation/report"
TRIGGER_SERVICE = "/swarm/evaluation/trigger"
VETO_TOPIC = "/swarm/safety/veto"
STATUS_TOPIC = "/swarm/safety/status"


def latched(depth: int = 1) -> QoSProfile:
    """Reliable, transient local: a late joiner (or a restarted node) gets the last `depth` messages."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def declare(node: Node, name: str, default: Any, description: str) -> Any:
    """Declare a parameter with a description and return its (possibly overridden) value.

    A list default of `[]` is declared as an uninitialised string array (rclpy cannot infer the type
    of an empty list); reading it back gives `[]` until a value is set.
    """
    desc = ParameterDescriptor(description=description)
    if isinstance(default, list) and not default:
        node.declare_parameter(name, Parameter.Type.STRING_ARRAY, desc)
        return string_list(node, name)
    return node.declare_parameter(name, default, desc).value


def string_list(node: Node, name: str) -> list[str]:
    """A string-array parameter as a list; empty entries are dropped and an unset one is `[]`."""
    try:
        value = node.get_parameter(name).value
    except ParameterUninitializedException:
        return []
    return [str(v) for v in (value or []) if str(v).strip()]


def find_config(name: str) -> Path:
    """A file of the package's config/ directory: the ament share/ copy (colcon, or a sourced install), else
    the copy inside the package (a wheel: `pip install .`), else the source tree's (editable installs)."""
    package = Path(__file__).resolve().parents[1]
    candidates = [package / "config" / name, package.parent / "config" / name]
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
        with contextlib.suppress(PackageNotFoundError, OSError):  # OSError: no AMENT_PREFIX_PATH (pip install)
            candidates.insert(0, Path(get_package_share_directory(PACKAGE)) / "config" / name)
    except ImportError:
        pass
    for path in candidates:
        if path.is_file():
            return path
    raise InputError(f"{name}: config file not found (looked in {', '.join(str(c.parent) for c in candidates)})")


def mission_from_param(path: str) -> Mission:
    """The mission a node works with: `mission_file` (a path, or the name of a packaged config file),
    or the packaged default mission when empty."""
    if not path:
        return load_mission(find_config("default_mission.yaml"))
    if not Path(path).exists() and "/" not in path:
        return load_mission(find_config(path))
    return load_mission(path)


def read_params_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """A ROS 2 parameter file as {node name: params}; `/**` entries are merged under each node's own."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise InputError(f"{path}: cannot read config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping of node names to ros__parameters")
    out: dict[str, dict[str, Any]] = {}
    for key, body in doc.items():
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters"), dict):
            raise InputError(f"{path}: {key}: expected a 'ros__parameters' mapping")
        out[str(key).rstrip("/").split("/")[-1] or "**"] = dict(body["ros__parameters"])
    common = out.pop("**", {})
    return {"**": common, **{name: {**common, **params} for name, params in out.items()}}


def undeclared(node: Node, values: Iterable[str]) -> list[str]:
    """Names in `values` the node does not declare (a typo in a config file would be ignored silently)."""
    return sorted(v for v in values if not node.has_parameter(v))


#: A worker process is replaced after this many jobs, so whatever a long flight leaks there is returned.
WORKER_JOBS = 10


#: Niceness of the DSL/debate worker processes: the safety verifier must win the CPU, never wait on the LLM.
WORKER_NICENESS = 10

#: glibc's malloc settings `tune_malloc` applies: (mallopt parameter of malloc.h, environment name, value).
MALLOC_SETTINGS = ((-3, "MALLOC_MMAP_THRESHOLD_", 128 * 1024), (-8, "MALLOC_ARENA_MAX", 2))


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has mallopt and malloc_trim), else None (musl, macOS)."""
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def tune_malloc() -> None:
    """Keep glibc's heap from growing over a long flight; call before the DDS and executor threads start.

    Each closed segment copies tens of MB of samples (the window, its pickle for the worker) in whichever
    thread handles it. glibc gives every thread an arena of its own, and after the first large block is
    freed it raises its mmap threshold, so later multi-MB blocks come from those arenas too, where freed
    space stays resident and fragmented. A fixed threshold maps every large block on its own (returned to
    the OS when freed) and two arenas bound the rest (which `add_heap_trim` returns). Child processes
    (the workers, a --sim simulator) get the same settings through the environment; settings already in
    the environment are left as they are.
    """
    libc = _glibc()
    for param, name, value in MALLOC_SETTINGS:
        if libc is not None and name not in os.environ:
            libc.mallopt(param, value)
            os.environ[name] = str(value)


def trim_heap() -> None:
    """Hand the heap freed since the last call back to the OS (glibc keeps it resident otherwise); ~1-30 ms
    for the monitor's heap, with the GIL released."""
    if libc := _glibc():
        libc.malloc_trim(0)


#: How often a node that cuts or evaluates segments trims its process's heap (see `add_heap_trim`).
TRIM_PERIOD_S = 10.0


def add_heap_trim(node: Node) -> None:
    """Trim the heap every TRIM_PERIOD_S (steady clock, own callback group): each segment frees tens of MB
    in small blocks (per-vehicle arrays) spread between the poses' allocations, so that space would stay
    resident. Without this and `tune_malloc` the soak benchmark's monitor process grew ~13 MB a minute
    while its Python objects stayed the same."""
    if _glibc() is not None:
        node.create_timer(TRIM_PERIOD_S, trim_heap, callback_group=MutuallyExclusiveCallbackGroup(),
                          clock=Clock(clock_type=ClockType.STEADY_TIME))


def release_memory() -> None:
    """Collect garbage cycles (matplotlib figures) and trim the heap: a worker process after each job."""
    gc.collect()
    trim_heap()


@functools.cache
def _exit_with_parent() -> None:
    """Worker side: exit when the node's process dies without stopping the pool (SIGKILL, a crash); the worker
    would otherwise wait for jobs forever, holding its ~170 MB."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _job(fn: Callable, /, *args, **kwargs):
    """Worker-process side of every job: the memory a segment's evaluation used is returned after it, so the
    worker's RSS between jobs stays at its baseline instead of its largest segment so far."""
    _exit_with_parent()
    try:
        return fn(*args, **kwargs)
    finally:
        release_memory()


class _WorkerPool(ProcessPoolExecutor):
    """Runs every job through `_job`."""

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(_job, fn, *args, **kwargs)


def worker_pool() -> ProcessPoolExecutor:
    """One worker *process* (spawned, not forked from a process with DDS threads) for CPU-heavy work, so
    it never holds the GIL the executor (and the safety verifier beside it) needs; it runs at a lower CPU
    priority so on a saturated machine the verifier is scheduled first (from before it imports anything
    heavy: the initializer is os.nice itself), and trims its heap after each job."""
    return _WorkerPool(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                       max_tasks_per_child=WORKER_JOBS, initializer=os.nice, initargs=(WORKER_NICENESS,))


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop at once: work still running in the worker process is abandoned."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # the stdlib has no public kill
    for proc in procs:
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.join(timeout=5)


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


class DrainingExecutor(MultiThreadedExecutor):
    """A MultiThreadedExecutor whose shutdown lets the callbacks already handed to its threads finish first.

    rclpy (Jazzy) destroys the executor's guard condition at shutdown without waiting for them (its wait is
    skipped), and a callback finishing afterwards fails on triggering it; as nobody retrieves that failure,
    rclpy prints "The following exception was never retrieved: cannot use Destroyable ..." at exit.
    """

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        end = time.monotonic() + (timeout_sec if timeout_sec is not None and timeout_sec >= 0 else math.inf)
        tasks = list(self._futures)  # rclpy keeps no public list of the callbacks in flight
        while not all(t.done() for t in tasks) and time.monotonic() < end:
            time.sleep(0.01)
        for task in tasks:
            if task.done() and (exc := task.exception()) is not None:  # spin_once would have raised it
                get_logger("live").warning(f"callback failed while stopping: {exc!r}")
        return super().shutdown(timeout_sec=0) and all(t.done() for t in tasks)


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
    (see `node_executor`). A node whose callbacks may block (the panel's Trigger service waits for its
    evaluation) sets `EXECUTOR_THREADS` > 1 and gets a small multi-threaded executor of its own.
    """
    stopping = threading.Event()
    executors = [DrainingExecutor(num_threads=n) if (n := getattr(node, "EXECUTOR_THREADS", 1)) > 1
                 else node_executor(executor) for node in nodes]
    failures: list[BaseException] = []

    def spin(executor) -> None:
        try:
            while not stopping.is_set() and executor.context.ok():
                executor.spin_once(timeout_sec=0.1)
        except ExternalShutdownException:  # SIGINT/SIGTERM under rclpy's own handlers: the context is down
            pass
        except BaseException as exc:  # a callback failed: stop the graph and raise it in the caller
            failures.append(exc)
        finally:
            stopping.set()

    for node, executor in zip(nodes, executors, strict=True):
        executor.add_node(node)
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
        for node, executor in zip(nodes, executors, strict=True):
            executor.shutdown(timeout_sec=5.0)
            executor.remove_node(node)
    if failures:
        raise failures[0]


class ProgressNode(Node):
    """Prints the live pipeline's progress (segments, veto edges, reports) with rich; used by `live`."""

    def __init__(self, console, quiet: bool = False, **kwargs):
        super().__init__("live_progress", **kwargs)
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import Bool, String

        self.console = console
        self.quiet = quiet
        self._veto: bool | None = None
        self._status: list[str] = []
        self._status_shown = False
        self._t0 = time.monotonic()
        self._t_ref: float | None = None  # first stream time seen: progress shows flight time from it
        self.create_subscription(Bool, VETO_TOPIC, self._on_veto, latched())
        self.create_subscription(DiagnosticArray, STATUS_TOPIC, self._on_status, 10)
        self.create_subscription(String, SEGMENT_TOPIC, self._on_segment, latched(10))
        self.create_subscription(String, REPORT_TOPIC, self._on_report, latched())
        self.create_subscription(String, TRUTH_TOPIC, self._on_truth, latched())

    def _on_truth(self, msg) -> None:
        """A simulated flight: its time zero is the reference, and the injected faults are shown up front."""
        truth = json.loads(msg.data)
        self._t_ref = truth["stamp_base"]
        for f in truth["faults"]:
            if f.get("expect_constraint"):
                self._say(f"simulator injects {f['kind']} ({', '.join(f['uavs'])}) at flight "
                          f"t={f['t_start']:.2f}-{f['t_end']:.2f} s (expect {f['expect_constraint']})")

    def _say(self, text: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]{time.monotonic() - self._t0:6.1f}s[/] {text}")

    def _rel(self, t: float) -> float:
        if self._t_ref is None:
            self._t_ref = t
        return t - self._t_ref

    def _on_status(self, msg) -> None:
        from uav_debate_eval.nodes.debate_panel import level_of, status_evidence
        self._status = []
        for status in msg.status:
            ev = status_evidence(status)
            if isinstance(ev["values"].get("t"), float):
                self._rel(ev["values"]["t"])
            if level_of(status.level) >= 2 and not ev["name"].endswith("/veto"):
                t = ev["values"].get("t")
                when = f" at flight t={self._rel(t):.2f} s" if isinstance(t, float) else ""
                self._status.append(f"{ev['name']}: {ev['message']}{when}")
        if self._veto and self._status and not self._status_shown:
            self._status_shown = True
            for line in self._status[:3]:
                self._say(f"   [red]{line}[/]")

    def _on_veto(self, msg) -> None:
        if msg.data == self._veto:
            return
        self._veto = bool(msg.data)
        self._status_shown = False
        self._say("[bold red]VETO ON[/]" if msg.data else "[green]veto off[/] (margins restored for the hold time)")

    def _on_segment(self, msg) -> None:
        seg = json.loads(msg.data)
        self._say(f"segment {seg['id']} closed ({seg['reason']}): flight t=[{self._rel(seg['t_start']):.1f}, "
                  f"{self._rel(seg['t_end']):.1f}] s, "
                  f"{len(seg.get('uavs', []))} vehicles, DSL {seg.get('dsl_tokens', 0)} tokens -> panel")

    def _on_report(self, msg) -> None:
        report = json.loads(msg.data)
        seg = report.get("live", {}).get("segment", {}).get("id", "?")
        verdict, debate = report["verdict"], report["debate"]
        rounds = debate.get("rounds", [])
        agents = sorted({r["agent"] for rnd in rounds for r in rnd.get("responses", [])})
        colour = {"safe": "green", "borderline": "yellow", "risky": "red"}.get(verdict["label"], "blue")
        self._say(f"report {seg}: [bold {colour}]{verdict['label']}[/]{' (vetoed)' if verdict['vetoed'] else ''}; "
                  f"debate L{debate['layer']} {len(rounds)} round(s), {len(agents)} agents, backend "
                  f"{debate['backend']}, {debate['tokens']['prompt'] + debate['tokens']['completion']} tokens")
        for v in report["violations"][:3]:
            worst = f"{v['worst_value']:.3g}" if isinstance(v["worst_value"], float) else v["worst_value"]
            self._say(f"   violation {v['constraint']} {', '.join(v['uavs'])}: worst {worst} (limit {v['limit']}) "
                      f"flight t=[{self._rel(v['t_start']):.1f}, {self._rel(v['t_end']):.1f}] s")


def run_node(label: str, make_node: Callable[[], Node], spin: Callable[[Node], None] = rclpy.spin,
             args: list[str] | None = None) -> None:
    """The main() of every node's own process: spin until Ctrl-C or SIGTERM (exit 0), and turn a bad
    mission, CSV or parameter into one line on stderr and exit status 2."""
    node = None
    tune_malloc()
    try:
        rclpy.init(args=args)
        node = make_node()
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
