"""The offline job of one flight: find its mission, read its inputs, evaluate it, write its reports.

`read_flight` is the one way a recorded flight is read (evaluate, metrics, dsl and compare-flights all use it), so
every command sees the same vehicles; `evaluate_flight` is the one entry to the whole job. Both take typed
options; the commands only turn their arguments into them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from uav_debate_eval.core.errors import InputError

if TYPE_CHECKING:  # the data model and the stages load with the job, not with the command line's --help
    from uav_debate_eval.core.mission import Mission
    from uav_debate_eval.core.trajectory import SwarmTrajectory
    from uav_debate_eval.debate.config import DebateConfig
    from uav_debate_eval.runner.pipeline import Evaluation, ProgressFn

MISSION_FILE = "mission.yaml"


@dataclass(frozen=True)
class ReadOptions:
    """How a flight's inputs are read."""

    mission: str | None = None  #: --mission: this file for every flight (else each flight's nearest mission.yaml)
    topics: tuple[str, ...] = ()  #: --topics: the pose topics to read from bags (TOPIC or TOPIC=name)
    vehicles: str | None = None  #: --vehicles: which pose sources are vehicles (regex); else the mission's globs


@dataclass(frozen=True)
class JobOptions:
    """Everything one flight's offline job needs besides its inputs and output folder."""

    read: ReadOptions = field(default_factory=ReadOptions)
    llm: str = "rules"  #: the panel's backend: rules, local or openai
    model: str | None = None
    base_url: str | None = None
    no_cache: bool = False  #: do not use the LLM response cache
    segment_mode: str = "phase"  #: mission segments by flight phase or fixed windows
    window_s: float = 30.0  #: window length for segment_mode "window"
    mcap_out: str | None = None  #: also write the evaluated flight as an annotated MCAP

    def __post_init__(self) -> None:
        if self.window_s <= 0:
            raise InputError(f"--window: must be > 0 s, got {self.window_s:g}")


@dataclass
class LoadedFlight:
    """A flight as read: its trajectory (vehicles selected), its mission and where the mission came from."""

    traj: SwarmTrajectory
    mission: Mission
    notes: list[str]



def nearest_mission(path: Path) -> Path | None:
    """The mission.yaml nearest to an input: inside it (a folder), beside it, then in each folder above."""
    return next((c for c in (f / MISSION_FILE for f in _folders_up(path)) if c.is_file()), None)


def _start_folder(path: Path) -> Path:
    """The folder the search starts in, written as the input is (relative inputs give relative missions)."""
    path = Path(path)
    start = path if path.is_dir() else path.parent
    return Path(os.path.abspath(start)) if ".." in start.parts else start


def _folders_up(path: Path) -> Iterator[Path]:
    start = _start_folder(path)
    yield start
    yield from start.parents
    if not start.is_absolute():
        yield from Path.cwd().parents


def load_mission_for(inputs: list[str | Path], mission_path: str | Path | None) -> tuple[Mission, list[str]]:
    """The mission to evaluate against and notes on where it came from.

    --mission wins; else the mission a flight MCAP carries (the one it was evaluated against); else the
    mission.yaml nearest to the (first) input (the simulator writes one beside its recordings, operators keep one
    per flight folder or per campaign); else a default mission with no constraints, so nothing is checked, which
    the report says.
    """
    from uav_debate_eval.core.mission import Mission
    from uav_debate_eval.core.mission_file import load_mission, parse_mission
    from uav_debate_eval.io.flight_mcap import flight_mission

    if mission_path:
        return load_mission(mission_path), []
    if inputs and (carried := flight_mission(Path(inputs[0]))) is not None:
        text, source = carried
        return parse_mission(text, source), [
            f"mission carried by the flight MCAP (the one it was evaluated against: {source})"]
    found = nearest_mission(Path(inputs[0])) if inputs else None
    if found is not None:
        beside = found.parent == _start_folder(Path(inputs[0]))
        where = "beside the input" if beside else "in a folder above the input"
        return load_mission(found), [f"mission file found {where}: {found}"]
    name = Path(inputs[0]).name.split(".")[0] if inputs else "unnamed"
    return Mission(name=name, source=""), ["no mission file: no constraints were given, so no hard constraint "
                                           "was checked (the verdict is inconclusive)"]


def read_flight(paths: list[Path], options: ReadOptions) -> LoadedFlight:
    """Read one flight: its mission first (vehicle names, the `vehicles:` selection), then its inputs."""
    from uav_debate_eval.io.loader import load_inputs

    if not paths:
        raise InputError("no input given")
    inputs: list[str | Path] = list(paths)
    mission, notes = load_mission_for(inputs, options.mission)
    traj = load_inputs(inputs, topics=list(options.topics) or None, names=mission.uavs or None,
                       vehicles=mission.vehicles, vehicle_regex=options.vehicles)
    if not traj.tracks:
        raise InputError(f"{paths[0]}: no vehicle samples")
    if traj.duration <= 0:  # every check "held throughout" an instant would say nothing about a flight
        raise InputError(f"{paths[0]}: the poses read are a single instant ({traj.n_samples} sample(s) at "
                         f"{traj.t_start:g} s): a flight needs samples over time")
    _not_mostly_silence(traj, paths[0])
    if not mission.source:  # a mission file, given or found, wins over the vehicle's own parameters
        notes = _limits_without_mission(traj, mission, notes)
    return LoadedFlight(traj, mission, notes)


#: A flight whose common time grid would hold this many times its vehicles' samples, and more than GRID_CELLS_MIN
#: cells, is mostly silence: inputs of different days read as one (--one-flight), not a flight to evaluate.
SILENCE_RATIO = 1000.0
GRID_CELLS_MIN = 50_000_000


def _not_mostly_silence(traj: SwarmTrajectory, first: Path) -> None:
    """InputError for a flight that is mostly silence (two PX4 logs 690 days apart forced into one flight made a
    51-GB grid and a MemoryError)."""
    period = traj.sample_period or 0.0
    if period <= 0:
        return
    cells = traj.duration / period * len(traj.tracks)
    if cells > GRID_CELLS_MIN and cells > SILENCE_RATIO * traj.n_samples:
        raise InputError(f"{first}: its {traj.n_samples:,} samples spread over {traj.duration / 86400:,.1f} days, "
                         f"{traj.n_samples * period:,.0f} s of them recorded: recordings of different times, not one "
                         "flight (give them one by one)")


_NOTHING_GIVEN = "no constraints were given, so no hard constraint was checked (the verdict is inconclusive)"
_UNITS = {"max_speed": " m/s", "max_vertical_speed": " m/s", "attitude_control": "°"}


def _limits_without_mission(traj: SwarmTrajectory, mission: Mission, notes: list[str]) -> list[str]:
    """Without a mission file, the limits the vehicles' own parameters set (core.vehicle_limits), each with its
    source in `mission.limit_sources` and in a note; the attitude check at the contract's default where the log
    records attitude targets but no lean limit."""
    from uav_debate_eval.core.vehicle_limits import DEFAULT_ATTITUDE_ERROR_DEG, own_limits

    controlled = any(att[3].any() for att in traj.ingest.attitude.values())  # armed with an attitude target
    lim = own_limits(traj.ingest.params, vehicle_homes(traj), controlled,
                     {u: str(a.get("vehicle_class", "")) for u, a in traj.ingest.autopilot.items()})
    mission.constraints = lim.constraints
    mission.limit_sources = dict(lim.sources)
    if controlled and lim.constraints.max_attitude_error_deg is None:
        lim.constraints.max_attitude_error_deg = DEFAULT_ATTITUDE_ERROR_DEG  # CONTRACT.md §2
        mission.limit_sources["attitude_control"] = ("the contract's default (the log records the autopilot's "
                                                     "attitude targets; no larger lean limit among its "
                                                     "parameters)")
    c = lim.constraints
    values = {"max_speed": c.max_speed_mps, "max_vertical_speed": c.max_vertical_speed_mps,
              "attitude_control": c.max_attitude_error_deg}
    said = [f"{name} {values[name]:.3g}{_UNITS[name]} from {src}" if name in values else f"{name} from {src}"
            for name, src in mission.limit_sources.items()]
    if not said:
        return notes + lim.notes
    what = "limits from the vehicle's own parameters" if lim.sources else "attitude_control checked"
    return [n.replace(_NOTHING_GIVEN, what) for n in notes] + lim.notes + said


#: A later arming this far (m) from the first home moved the autopilot's home (and its fence) with it.
HOME_MOVED_M = 5.0


def vehicle_homes(traj: SwarmTrajectory) -> dict[str, tuple[tuple[float, float, float], str]]:
    """Each vehicle's home in the world frame: where it was first armed (the autopilot sets home there), else its
    first sample. The autopilot sets home again at each arming; the fence stays around the first, and its source says
    when a later arming was elsewhere (a breach near that home is judged from the first)."""
    import numpy as np

    armed: dict[str, list[float]] = {}
    for e in traj.ingest.log_events:
        if e.type == "autopilot_event" and e.extra.get("label") == "ARMED" and e.uavs:
            armed.setdefault(e.uavs[0], []).append(e.t)
    out = {}
    for u, tr in traj.tracks.items():
        times = sorted(armed.get(u, []))
        rows = [min(int(np.searchsorted(tr.t, t)), len(tr.t) - 1) for t in times] or [0]
        x, y, z = (float(v) for v in tr.pos[rows[0]])
        how = f"where it was armed at {tr.t[rows[0]]:.1f} s" if times else "its first sample"
        moved = [(float(tr.t[k]), float(np.linalg.norm(tr.pos[k] - tr.pos[rows[0]]))) for k in rows[1:]]
        if far := [(t, d) for t, d in moved if d > HOME_MOVED_M]:
            how += (f"; armed again {far[0][1]:.0f} m from it at {far[0][0]:.1f} s, where the autopilot set its "
                    "home (and fence) anew: near that home, the fence here is the first one's")
        out[u] = ((x, y, z), how)
    return out


def debate_config(options: JobOptions) -> DebateConfig:
    """The panel's config; the rules backend needs no LLM config (so the LLM client libraries never load)."""
    from uav_debate_eval.debate.config import DebateConfig

    if options.llm == "rules":
        return DebateConfig(backend="rules", model=options.model)
    from uav_debate_eval.debate.llm.factory import LLMConfig

    llm = LLMConfig(backend=options.llm, model=options.model, base_url=options.base_url,
                    use_cache=not options.no_cache)
    return DebateConfig(backend=options.llm, model=options.model, llm=llm)


def evaluate_flight(paths: list[Path], out: Path, options: JobOptions, progress: ProgressFn | None = None,
                    notes: list[str] | None = None) -> Evaluation:
    """Read, evaluate and write one flight into `out`; returns the pipeline's Evaluation. Raises InputError for
    bad input. `progress(stage, done, total)` also hears "read" and "write"; `notes` go into the report's."""
    from uav_debate_eval.report.figure_job import start_figure_job
    from uav_debate_eval.runner.pipeline import evaluate
    from uav_debate_eval.runner.preload import preload_stages
    from uav_debate_eval.runner.spans import parse_ahead

    tick = progress or _silent
    t0 = time.perf_counter()
    tick("read", 0, 1)
    parse_ahead(paths)  # many PX4 logs on every core, before the preload thread starts
    preload = preload_stages(paths)  # joined once the input is read (or failed), before anything forks
    # a small input: the figures' child loads matplotlib while this process reads it and loads the stages (a
    # large one's child is forked with the flight as read: no copy of it)
    figure_job = start_figure_job() if preload is None else None
    try:
        flight = read_flight(paths, options.read)
    except BaseException:
        if figure_job is not None:
            figure_job.cancel()
        raise
    finally:
        if preload is not None:
            preload.join()
    tick("read", 1, 1)
    read_s = time.perf_counter() - t0
    ev = evaluate(flight.traj, flight.mission, debate_config(options), segment_mode=options.segment_mode,
                  window_s=options.window_s, progress=progress, inputs=[str(p) for p in paths],
                  notes=[*(notes or []), *flight.notes], figures=True, figure_job=figure_job)
    ev.report["timing"] = {"read": round(read_s, 4), **ev.report.get("timing", {})}
    tick("write", 0, 1)
    from uav_debate_eval.report.writer import write_reports  # matplotlib loads once there is a flight to draw

    write_reports(ev, out)
    if options.mcap_out:
        from uav_debate_eval.viz.mcap_export import write_mcap

        write_mcap(ev, Path(options.mcap_out), poses=flight.traj)  # the samples as read: the file replays
    tick("write", 1, 1)
    return ev


def _silent(stage: str, done: int, total: int) -> None:
    return None
