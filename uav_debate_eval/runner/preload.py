"""Load the evaluation stages while a large input is parsed: about 0.3 s of imports (scipy and the stages)
overlaps the read, whose parsers (pyarrow's CSV reader, numpy's sorts) run without the GIL. The thread is joined
before the evaluation starts (and so before any fork: a child must not inherit a half-held import lock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Inputs of at least this many bytes are parsed while the evaluation stages load in a thread (the parsers release
#: the GIL); a small input is read first, so bad input is reported before anything heavy loads.
PRELOAD_MIN_BYTES = 8_000_000
#: What the evaluation needs (scipy and the checker, metrics, DSL and debate stages: about 0.3 s), loaded before the
#: segments go to two cores, where each import would cost CPU the two processes need (scipy.fft, which the metrics'
#: cross-correlation loads on first use, was loaded by both); matplotlib loads only in the figure child
#: (report/figure_job.py).
_STAGES = ("scipy.fft", "uav_debate_eval.quality.assessment", "uav_debate_eval.safety.checker",
           "uav_debate_eval.metrics.compute", "uav_debate_eval.dsl.builder", "uav_debate_eval.dsl.segments",
           "uav_debate_eval.runner.segment_work", "uav_debate_eval.debate.engine")


def preload_stages(paths: list[Path]) -> Any:
    """Start loading the stages beside the read of a large input; returns the thread (join it) or None."""
    import threading

    size = sum(_size(p) for p in paths)
    if size < PRELOAD_MIN_BYTES:
        return None
    thread = threading.Thread(target=_import_stages, name="preload-stages", daemon=True)
    thread.start()
    return thread


def _import_stages() -> None:
    import importlib

    try:
        for name in _STAGES:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - the evaluation imports them again and reports what fails
        return


def _size(path: Path) -> int:
    try:
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size
    except OSError:
        return 0
