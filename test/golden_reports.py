"""Golden reports: the built-in scenario suite evaluated through the CLI path (CSV -> read -> evaluate), rules backend.

Each flight's report, as the tool writes it (report.precision.rounded: scores 4 decimals, metres, m/s and
seconds 3), canonicalised (timing removed, the temporary directory replaced by a fixed token) is stored whole in
test/fixtures/golden/<entry>.json. `differences` compares values, not bytes: text and structure exactly, each
number within one unit of the last decimal its key keeps (report.precision.decimals), so the last bits that differ
between BLAS kernels (OpenBLAS picks one by CPU) and a last-bit perturbation of the inputs change nothing.
Besides the suite: a larger grid flight (exercises the across-vehicle paths) and a messy CSV (rows shuffled,
duplicated, NaN and blank cells) for the CSV reader.

Regenerate (only when a report change is intended, e.g. a contract change):
    PYTHONPATH=. python test/golden_reports.py --write
Check entries in this process (the BLAS-kernel test runs it under OPENBLAS_CORETYPE):
    PYTHONPATH=. python test/golden_reports.py --check ENTRY [ENTRY ...]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
#: entry -> (scenario spec as in the compare suite, simulate() overrides, messy CSV?)
EXTRA = {"grid:n40": ("grid", {"n_uavs": 40, "duration_s": 60.0}, False),
         "grid:near_miss,overspeed:n90": ("grid:near_miss,overspeed", {"n_uavs": 90, "duration_s": 60.0}, False),
         "formation:near_miss:messy": ("formation:near_miss", {}, True)}
_DROP_KEYS = frozenset({"timing", "elapsed_s", "latency_s"})  # wall-clock measurements


def suite() -> dict[str, tuple[str, dict, bool]]:
    from uav_debate_eval.debate.comparison import DEFAULT_SUITE

    entries = {e: (e, {}, False) for e in DEFAULT_SUITE}
    entries.update(EXTRA)
    return entries


def canonical(obj: Any, tmp: str) -> Any:
    """Drop timing fields at any depth and the temporary directory from strings."""
    if isinstance(obj, dict):
        return {k: canonical(v, tmp) for k, v in sorted(obj.items()) if k not in _DROP_KEYS}
    if isinstance(obj, list):
        return [canonical(v, tmp) for v in obj]
    if isinstance(obj, str):
        return obj.replace(tmp, "<tmp>")
    return obj


def golden_path(entry: str) -> Path:
    return GOLDEN / f"{entry.replace(':', '_').replace(',', '+')}.json"


def load_golden(entry: str) -> dict:
    return json.loads(golden_path(entry).read_text(encoding="utf-8"))


def differences(got: Any, want: Any, key: str | None = None, where: str = "") -> list[str]:
    """Where two reports differ: structure and text exactly, numbers beyond one unit in the last decimal kept."""
    from uav_debate_eval.report.precision import decimals

    if isinstance(want, bool) or want is None or isinstance(want, str):
        return [] if got == want and type(got) is type(want) else [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, int | float):
        if isinstance(got, bool) or not isinstance(got, int | float):
            return [f"{where}: {got!r} != {want!r}"]
        return [] if abs(got - want) <= 1.01 * 10.0 ** -decimals(key) else [f"{where}: {got!r} != {want!r}"]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{where}: list of {len(got) if isinstance(got, list) else got!r} != list of {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want, strict=True))
                for d in differences(g, w, key, f"{where}[{i}]")]
    if not isinstance(got, dict) or set(got) != set(want):
        return [f"{where}: keys {sorted(got) if isinstance(got, dict) else got!r} != {sorted(want)}"]
    return [d for k in sorted(want) for d in differences(got[k], want[k], k, f"{where}.{k}")]


def _messy_csv(path: Path) -> None:
    """Shuffle the rows, duplicate some, blank a few cells and add a NaN row (contract §1 messy input)."""
    import numpy as np

    lines = path.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    rng = np.random.default_rng(7)
    rows = [rows[i] for i in rng.permutation(len(rows))]
    rows += rows[:25]  # exact duplicates
    for i in range(40, 60):  # blank z: the row is dropped (no position)
        cells = rows[i].split(",")
        cells[4] = ""
        rows[i] = ",".join(cells)
    rows.insert(100, "nan,uav1,nan,nan,nan" + ",0" * (header.count(",") - 4))
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")


def _nudge(traj) -> None:
    """Move every other position and velocity component by one unit in the last place (a last-bit perturbation)."""
    import numpy as np

    for track in traj.tracks.values():
        for arr in (track.pos, track.vel):
            flat = arr.reshape(-1)
            flat[::2] = np.nextafter(flat[::2], np.inf)


def evaluate_entry(spec: str, overrides: dict, messy: bool, nudge: bool = False) -> dict:
    """Simulate, write the contract CSV + mission.yaml, and evaluate it as `evaluate CSV` does (no figures); the
    report as written (rounded). `nudge`: perturb the positions read by one unit in the last place first."""
    from uav_debate_eval.commands.evaluate import debate_config
    from uav_debate_eval.io.loader import load_inputs
    from uav_debate_eval.report.precision import rounded
    from uav_debate_eval.runner.pipeline import evaluate, load_mission_for
    from uav_debate_eval.sim.scenarios import simulate

    name, _, faults = spec.partition(":")
    sim = simulate(name, seed=0, faults=[f for f in faults.split(",") if f] or None, **overrides)
    with tempfile.TemporaryDirectory() as tmp:
        sim.write(tmp, formats=("csv",))
        csv_path = Path(tmp) / "trajectory.csv"
        if messy:
            _messy_csv(csv_path)
        mission, notes = load_mission_for([csv_path], None)
        traj = load_inputs([csv_path], names=mission.uavs or None)
        if nudge:
            _nudge(traj)
        ev = evaluate(traj, mission, debate_config({"llm": "rules", "no_cache": True}), inputs=[str(csv_path)],
                      notes=notes)
        return canonical(rounded(ev.report), tmp)


def main(argv: list[str]) -> int:
    if "--check" in argv:
        entries = argv[argv.index("--check") + 1:]
        failed = 0
        for entry in entries:
            diffs = differences(evaluate_entry(*suite()[entry]), load_golden(entry))
            failed += bool(diffs)
            print(entry, "ok" if not diffs else f"{len(diffs)} differences: {diffs[:5]}")
        return 1 if failed else 0
    if "--write" in argv:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for entry, (spec, overrides, messy) in suite().items():
            report = evaluate_entry(spec, overrides, messy)
            golden_path(entry).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            print("wrote", golden_path(entry), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
