"""Scale: the `evaluate` CLI end to end (figures included, rules backend) on large contract CSVs (issues 15, 35).

Flights: the simulator's `grid` scenario (vehicles 3 m apart translating together) at 10 Hz with a near miss
and an overspeed injected, written as a contract CSV (time-major rows) with its mission.yaml:
- 100 vehicles x 600 s (600k rows): target >= 500x real time (issue 35; issue 15's was 200x);
- 1,024 vehicles x 120 s (1.2M rows): target >= 100x real time (issue 35; issue 15's was 30x), peak memory <= 1.5 GB;
- 5,000 vehicles x 300 s (15M rows, a drone show): peak memory <= 8 GB, its time reported (one run, memory sampled);
- a choreography, 2,000 vehicles x 120 s: a 3-m grid flying a square together (a corner every 10 s) that climbs and
  descends together (4 m/s), as a light show moves: its time and memory, and how many events and findings it made
  (every vehicle turning and climbing at once: a swarm event each, not one per vehicle; issue 35);
- 128 and 256 vehicles x 120 s: with the 1,024-vehicle run, the growth exponent of the wall time (and of each
  stage) against vehicle count (a least-squares slope of log time on log vehicles; 1.0 = linear).
For each flight: the wall time of the CLI process, the real-time ratio (flight duration / wall), the peak memory of
the process tree as the sum of its processes' PSS (proportional set size: `evaluate` forks helpers that share the
parent's pages copy-on-write; a sum of RSS would count every shared page once per process, while for a process on
its own PSS equals its RSS up to shared libraries), its CPU time (user + system; on a shared machine the wall time
also holds waiting for a core), and the per-stage seconds from report.json's `timing`. Beside them, the input's own
parse: pyarrow reading the CSV's columns as float64 in this process, and the evaluation's wall time as a multiple of
it. And the floor of the flight on this machine: a fresh interpreter that imports the libraries every evaluation
loads (numpy, scipy, pyarrow, PyYAML, jsonschema) and parses the file, the least any `evaluate` of it can take
here; beside a real-time target, what the target leaves for the evaluation itself once the floor is paid.
The wall time is the median of TIMED_RUNS runs that nothing else watches; the memory comes from one more run
sampled every 100 ms. Reading PSS walks every process's page tables, and on two cores that sampling took about
0.4 s of a 4 s run from the CLI, so a sampled run's wall time would be the sampler's as much as the CLI's (it is
printed too, for reference).
Start-up: `--help` (target < 0.3 s) and `evaluate` on a header-only CSV, which exits with status 2 as soon as it
has read the file (target < 0.5 s to start reading); and a small flight end to end, 10 vehicles x 60 s with its
report and figures (the everyday case: target < 2 s, median of 5), where loading the libraries and drawing the
figures are most of the time.

    python benchmarks/bench_scale.py [--data DIR] [--skip-growth] [--skip-show] [--runs N]

The CSVs are cached in --data (default: $TMPDIR/uav_bench_scale) and rebuilt when missing. The package's bytecode
is written first (as `make setup` and any non-editable install do), so no run compiles the sources.
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

TARGET_X = {(100, 600): 500.0, (1024, 120): 100.0}
TARGET_RSS_GB = 1.5  # the 'peak RSS', measured as the tree's PSS
#: The drone-show flight: memory target only (its time is reported).
SHOW = (5000, 300.0)
#: The choreography: vehicles, seconds (time, memory and event counts reported).
CHOREOGRAPHY = (2000, 120.0)
TARGET_SHOW_GB = 8.0
TARGET_HELP_S = 0.3
TARGET_START_S = 0.5
#: A small flight (SMALL vehicles x seconds) end to end, report and figures.
SMALL = (10, 60.0)
TARGET_SMALL_S = 2.0
RATE_HZ = 10.0
GROWTH_SIZES = (128, 256, 1024)
CLI = [sys.executable, "-m", "uav_debate_eval.cli"]
#: Memory sampling period: reading PSS walks the page tables of every process of the tree (every 20 ms that
#: added ~0.5 s to a 3 s run on 2 cores); the evaluation's large arrays live for whole stages, longer than this.
SAMPLE_S = 0.1
#: Unwatched runs per target flight whose median wall time is reported (growth points: one).
TIMED_RUNS = 3


def flight_csv(data: Path, n: int, duration: float) -> Path:
    """The grid flight as a contract CSV with mission.yaml beside it (cached)."""
    folder = data / f"grid_{n}x{duration:g}s"
    csv_path = folder / "trajectory.csv"
    if csv_path.is_file() and (folder / "mission.yaml").is_file():
        return csv_path
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from uav_debate_eval.core.mission_file import mission_to_yaml
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("grid", seed=0, n_uavs=n, duration_s=duration, rate_hz=RATE_HZ, faults=["near_miss", "overspeed"])
    tracks = list(sim.traj.tracks.items())
    t = np.concatenate([tr.t for _, tr in tracks])
    ids = np.concatenate([np.full(len(tr.t), u) for u, tr in tracks])
    pos = np.concatenate([tr.pos for _, tr in tracks])
    vel = np.concatenate([tr.vel for _, tr in tracks])
    order = np.argsort(t, kind="stable")  # time-major rows, as a recorder writes them
    cols = {"t": np.round(t[order] + sim.traj.t0, 6), "uav_id": ids[order]}
    cols.update({k: np.round(pos[order, i], 6) for i, k in enumerate("xyz")})
    cols.update({k: np.round(vel[order, i], 6) for i, k in enumerate(("vx", "vy", "vz"))})
    folder.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(pa.table(cols), csv_path, pacsv.WriteOptions(quoting_style="none"))
    (folder / "mission.yaml").write_text(mission_to_yaml(sim.mission), encoding="utf-8")
    return csv_path


def choreography_csv(data: Path, n: int, duration: float) -> Path:
    """A light show's move as a contract CSV with mission.yaml (cached): n vehicles on a 3-m grid fly a 30-m square
    at 3 m/s (a 90-deg corner every 10 s), climb 10 m at 4 m/s at 20 s and descend at 70 s, all together."""
    folder = data / f"choreography_{n}x{duration:g}s"
    csv_path = folder / "trajectory.csv"
    if csv_path.is_file() and (folder / "mission.yaml").is_file():
        return csv_path
    import pyarrow as pa
    import pyarrow.csv as pacsv

    t = np.arange(0.0, duration + 1e-9, 1.0 / RATE_HZ)
    side, speed = 30.0, 3.0
    along = (speed * t) % (4 * side)
    leg, f = (along // side).astype(int), along % side
    cx = np.choose(leg, [f, side + 0 * f, side - f, 0 * f])
    cy = np.choose(leg, [0 * f, f, side + 0 * f, side - f])
    z = 20.0 + 4.0 * np.clip(t - 20.0, 0, 2.5) - 4.0 * np.clip(t - 70.0, 0, 2.5)
    cols = int(np.ceil(np.sqrt(n)))
    k = np.arange(n)
    x, y = cx[:, None] + 3.0 * (k % cols)[None], cy[:, None] + 3.0 * (k // cols)[None]  # (steps, vehicles): time-major
    names = np.array([f"d{i:04d}" for i in range(n)])
    folder.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(pa.table({"t": np.repeat(np.round(t, 3), n), "uav_id": np.tile(names, len(t)),
                              "x": np.round(x.ravel(), 4), "y": np.round(y.ravel(), 4),
                              "z": np.repeat(np.round(z, 4), n)}), csv_path, pacsv.WriteOptions(quoting_style="none"))
    span = 3.0 * cols + side + 20.0
    (folder / "mission.yaml").write_text(
        "name: choreography\ntype: formation\nconstraints:\n  min_separation_m: 0.5\n  max_speed_mps: 6.0\n"
        f"  max_vertical_speed_mps: 5.0\n  geofence: {{min: [-20, -20, 0], max: [{span}, {span}, 60]}}\n",
        encoding="utf-8")
    return csv_path


def tree_memory(root: psutil.Process) -> int:
    """Bytes the process tree holds: the sum of its processes' PSS (shared pages counted once)."""
    total = 0
    for proc in (root, *root.children(recursive=True)):
        with contextlib.suppress(psutil.Error):  # ended between the listing and the read
            total += proc.memory_full_info().pss
    return total


def run_cli(args: list[str], sample_memory: bool = False) -> tuple[int, float, float, float]:
    """(exit status, wall seconds, peak memory (PSS) of the process tree in bytes (0 unless `sample_memory`), CPU
    seconds of the tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(CLI + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    if sample_memory:
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            with contextlib.suppress(psutil.Error):  # the root ended
                peak = max(peak, tree_memory(root))
            time.sleep(SAMPLE_S)
    proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    if proc.returncode not in (0, 2, 3, 4):
        raise RuntimeError(f"CLI failed ({proc.returncode}): {err[-2000:]}")
    return proc.returncode, wall, peak, cpu


def parse_seconds(csv_path: Path) -> float:
    """Wall seconds pyarrow takes to read the file's columns (uav_id as text, the rest float64): the input's parse."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    header = csv_path.open(encoding="utf-8").readline().strip().split(",")
    types = {h: pa.string() if h == "uav_id" else pa.float64() for h in header}
    t0 = time.perf_counter()
    table = pacsv.read_csv(csv_path, convert_options=pacsv.ConvertOptions(column_types=types))
    wall = time.perf_counter() - t0
    del table
    return wall


#: The libraries every `evaluate` imports before or while it reads (matplotlib loads in the figure child).
FLOOR_IMPORTS = ("numpy", "scipy.ndimage", "scipy.spatial", "scipy.linalg", "pyarrow.csv", "yaml",
                 "jsonschema")


def floor_seconds(csv_path: Path, runs: int = 5) -> tuple[float, float]:
    """(best wall seconds of a fresh interpreter that imports FLOOR_IMPORTS and parses the file, of one that only
    imports them): the least any evaluation of the file costs on this machine, and its start-up part."""
    imports = "; ".join(f"import {m}" for m in FLOOR_IMPORTS)
    parse = (f"; types = {{h: pyarrow.string() if h == 'uav_id' else pyarrow.float64() for h in "
             f"open({str(csv_path)!r}).readline().strip().split(',')}}; pyarrow.csv.read_csv({str(csv_path)!r}, "
             f"convert_options=pyarrow.csv.ConvertOptions(column_types=types))")
    best = []
    for code in (imports + parse, imports):
        walls = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            walls.append(time.perf_counter() - t0)
        best.append(min(walls))
    return best[0], best[1]


def evaluate_case(csv_path: Path, out: Path, timed_runs: int) -> dict:
    args = ["evaluate", str(csv_path), "--out", str(out), "--quiet", "--mission", str(csv_path.parent / "mission.yaml")]
    runs = []
    parse = parse_seconds(csv_path)
    floor, startup_s = floor_seconds(csv_path)
    for _ in range(timed_runs):
        status, wall, _, cpu = run_cli(args)
        timing = json.loads((out / "report.json").read_text(encoding="utf-8")).get("timing", {})
        runs.append((wall, cpu, timing))
    status_s, sampled_wall, peak, cpu_s = run_cli(args, sample_memory=True)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    figures = sorted(p.name for p in (out / "figures").glob("*.png"))
    if not runs:  # the memory-sampled run is the only one
        status = status_s
        runs.append((sampled_wall, cpu_s, report.get("timing", {})))
    wall, cpu, timing = sorted(runs, key=lambda r: r[0])[len(runs) // 2]  # the median run
    counts = (len(report["events"]), len(report["findings"]))
    return {"status": status, "wall": wall, "walls": [r[0] for r in runs], "sampled_wall": sampled_wall, "rss": peak,
            "counts": counts,
            "cpu": cpu, "timing": timing, "duration": report["mission"]["duration_s"],
            "violations": len(report["violations"]), "figures": figures, "parse": parse,
            "floor": floor, "floor_startup": startup_s}


def mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def print_case(n: int, duration: float, r: dict) -> bool:
    ratio = r["duration"] / r["wall"]
    target = TARGET_X.get((n, int(duration)))
    show = (n, duration) == SHOW
    ok_x = target is None or ratio >= target
    limit = TARGET_SHOW_GB if show else TARGET_RSS_GB
    ok_rss = r["rss"] <= limit * 1e9
    goal = f"target >= {target:g}x  {mark(ok_x)}" if target else "(time reported)" if show else "(growth point)"
    runs = ", ".join(f"{w:.2f}" for w in r["walls"])
    print(f"{n:>5} vehicles x {duration:>4g} s: wall {r['wall']:7.2f} s = {ratio:7.1f}x real time   {goal};  "
          f"peak memory (PSS) {r['rss'] / 1e9:5.2f} GB  target <= {limit} GB  {mark(ok_rss)};  "
          f"exit {r['status']}, "
          f"{r['violations']} violation(s), {len(r['figures'])} figure(s); CPU {r['cpu']:.2f} s")
    print(f"      wall of the runs (s): {runs} (median shown); with the memory sampler: {r['sampled_wall']:.2f};  "
          f"the input's parse alone (pyarrow): {r['parse']:.2f} s, evaluation = {r['wall'] / r['parse']:.1f}x it")
    floor = (f"      the floor here (a fresh interpreter importing {', '.join(FLOOR_IMPORTS)} and parsing the file): "
             f"{r['floor']:.2f} s (start-up and imports {r['floor_startup']:.2f} s) = "
             f"{r['duration'] / r['floor']:.0f}x real time at most")
    if target:
        budget = r["duration"] / target
        floor += f"; the target allows {budget:.2f} s: {budget - r['floor']:.2f} s left for the evaluation"
    print(floor)
    stages = r["timing"]
    accounted = sum(stages.values())
    parts = "  ".join(f"{k} {v:.2f}" for k, v in stages.items())
    print(f"      stages (s): {parts}  | start-up, figures, writing and exit {r['wall'] - accounted:.2f}")
    return ok_x and ok_rss


def slope(xs: list[float], ys: list[float]) -> float:
    lx, ly = np.log(xs), np.log(np.maximum(ys, 1e-6))
    return float(np.polyfit(lx, ly, 1)[0])


def startup(tmp: Path, data: Path) -> bool:
    helps = [run_cli(["--help"])[1] for _ in range(3)]
    empty = tmp / "empty.csv"
    empty.write_text("t,uav_id,x,y,z\n", encoding="utf-8")
    starts = []
    for _ in range(3):
        status, wall, _, _ = run_cli(["evaluate", str(empty), "--out", str(tmp / "empty_out"), "--quiet"])
        assert status == 2, status
        starts.append(wall)
    h, s = min(helps), min(starts)
    print(f"start-up: `--help` {h:.3f} s  target < {TARGET_HELP_S} s  {mark(h < TARGET_HELP_S)};  "
          f"`evaluate` until it has read a (header-only) CSV {s:.3f} s  target < {TARGET_START_S} s  "
          f"{mark(s < TARGET_START_S)}   (best of 3)")
    n, duration = SMALL
    csv_path = flight_csv(data, n, duration)
    smalls = sorted(run_cli(["evaluate", str(csv_path), "--mission", str(csv_path.parent / "mission.yaml"), "--out",
                             str(tmp / "small_out"), "--quiet"])[1] for _ in range(5))
    m = smalls[2]
    print(f"a small flight ({n} vehicles x {duration:g} s) end to end, report and figures: {m:.2f} s  "
          f"target < {TARGET_SMALL_S} s  {mark(m < TARGET_SMALL_S)}   (median of 5: "
          f"{', '.join(f'{w:.2f}' for w in smalls)})")
    return h < TARGET_HELP_S and s < TARGET_START_S and m < TARGET_SMALL_S


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "uav_bench_scale"))
    ap.add_argument("--skip-growth", action="store_true", help="only the target flights")
    ap.add_argument("--skip-show", action="store_true", help="without the 5,000-vehicle flight")
    ap.add_argument("--runs", type=int, default=TIMED_RUNS, help="unwatched runs per target flight (median)")
    args = ap.parse_args()
    data = Path(args.data)
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "uav_debate_eval", quiet=1)
    ok = True
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        ok &= startup(tmp, data)
        results: dict[tuple[int, float], dict] = {}
        cases = [(100, 600.0), (1024, 120.0)]
        if not args.skip_growth:
            cases += [(n, 120.0) for n in GROWTH_SIZES if n != 1024]
        if not args.skip_show:
            cases.append(SHOW)
        for n, duration in cases:
            csv_path = flight_csv(data, n, duration)
            timed = args.runs if (n, int(duration)) in TARGET_X else 0 if (n, duration) == SHOW else 1
            results[(n, duration)] = r = evaluate_case(csv_path, tmp / f"out_{n}_{duration:g}", timed)
            ok &= print_case(n, duration, r)
        n, duration = CHOREOGRAPHY
        r = evaluate_case(choreography_csv(data, n, duration), tmp / "out_choreography", 0)
        print(f"choreography, {n} vehicles x {duration:g} s: wall {r['wall']:.2f} s = {duration / r['wall']:.1f}x real "
              f"time, peak memory (PSS) {r['rss'] / 1e9:.2f} GB, CPU {r['cpu']:.2f} s; {r['counts'][0]} events, "
              f"{r['counts'][1]} findings (time reported)")
        if not args.skip_growth:
            sizes = list(GROWTH_SIZES)
            runs = [results[(n, 120.0)] for n in sizes]
            walls = [r["wall"] for r in runs]
            line = f"growth against vehicle count ({', '.join(map(str, sizes))} vehicles x 120 s): wall ~ N^" \
                   f"{slope(sizes, walls):.2f}"
            stages = [k for k in runs[-1]["timing"] if all(k in r["timing"] for r in runs)]
            line += "; " + ", ".join(f"{k} N^{slope(sizes, [r['timing'][k] for r in runs]):.2f}" for k in stages)
            print(line + "   (1.0 = linear; reference only)")
    print(f"targets met: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
