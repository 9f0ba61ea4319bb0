"""Golden reports: the built-in scenario suite evaluated through the CLI path (CSV -> read -> evaluate), rules backend.

Issue 15 demands identical reports before and after the speed work, apart from timing fields. Each flight's
report dict is canonicalised (timing removed, the temporary directory replaced by a fixed token, keys sorted)
and stored as a SHA-256 per top-level section in test/fixtures/golden_reports.json, so a mismatch names the
section that changed. Besides the suite: a larger grid flight (exercises the across-vehicle paths) and a messy
CSV (rows shuffled, duplicated, NaN and blank cells) for the CSV reader.

Regenerate (only when a report change is intended, e.g. a contract change):
    PYTHONPATH=. python test/golden_reports.py --write [--dump DIR]
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "fixtures" / "golden_reports.json"
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


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, allow_nan=False).encode()).hexdigest()[:16]


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


def evaluate_entry(spec: str, overrides: dict, messy: bool) -> dict:
    """Simulate, write the contract CSV + mission.yaml, and evaluate it as `evaluate CSV` does (no figures)."""
    from uav_debate_eval.io.loader import load_inputs
    from uav_debate_eval.runner.job import JobOptions, debate_config, load_mission_for
    from uav_debate_eval.runner.pipeline import evaluate
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
        ev = evaluate(traj, mission, debate_config(JobOptions(no_cache=True)), inputs=[str(csv_path)],
                      notes=notes)
        return canonical(ev.report, tmp)


def section_digests(report: dict) -> dict[str, str]:
    return {key: digest(value) for key, value in sorted(report.items())}


def main(argv: list[str]) -> int:
    dump = Path(argv[argv.index("--dump") + 1]) if "--dump" in argv else None
    out: dict[str, dict[str, str]] = {}
    for entry, (spec, overrides, messy) in suite().items():
        report = evaluate_entry(spec, overrides, messy)
        out[entry] = section_digests(report)
        if dump is not None:
            dump.mkdir(parents=True, exist_ok=True)
            (dump / f"{entry.replace(':', '_')}.json").write_text(json.dumps(report, indent=1, sort_keys=True))
        print(entry, digest(report), file=sys.stderr)
    if "--write" in argv:
        GOLDEN.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {GOLDEN}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
