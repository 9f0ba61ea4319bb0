"""Write every report (or comparison) file at once: built in a temporary directory beside out_dir, then moved.

A failure while rendering leaves out_dir as it was (no half-written report). Files we own in an
existing out_dir are replaced; anything else there is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from uav_debate_eval.report.html import render_html
from uav_debate_eval.report.markdown import render_markdown
from uav_debate_eval.report.precision import rounded
from uav_debate_eval.report.schema import validate_report

OUTPUTS = ("report.json", "report.md", "report.html", "transcript.jsonl", "figures")


def write_reports(evaluation: Any, out_dir: str | Path, *, figures: bool = True) -> Path:
    """Validate the report, render JSON/Markdown/HTML/transcript/figures (numbers rounded once, as
    report.precision says) and move them into out_dir."""
    out_dir = Path(out_dir)
    report = rounded(evaluation.report)
    job = getattr(evaluation, "figure_job", None)
    if job is not None:
        evaluation.figure_job = None  # drawn once
    try:
        validate_report(report)
        with staged(out_dir, OUTPUTS) as tmp:
            pngs = _figures(evaluation, job) if figures else {}
            write_pngs(tmp / "figures", pngs)
            (tmp / "report.json").write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")
            (tmp / "report.md").write_text(render_markdown(report, list(pngs)), encoding="utf-8")
            (tmp / "report.html").write_text(render_html(report, pngs), encoding="utf-8")
            with (tmp / "transcript.jsonl").open("w", encoding="utf-8") as fh:
                for row in evaluation.transcript:
                    fh.write(json.dumps(_plain(row), allow_nan=False, default=str) + "\n")
    finally:
        if job is not None:
            job.cancel()
    return out_dir


@contextlib.contextmanager
def staged(out_dir: Path, outputs: tuple[str, ...]) -> Iterator[Path]:
    """A temporary directory beside out_dir to write `outputs` into; moved into place only when the block ends
    without an error (else out_dir is left as it was)."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".tmp", dir=out_dir.parent))
    try:
        yield tmp
        _move_into_place(tmp, out_dir, outputs)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_pngs(folder: Path, pngs: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, png in pngs.items():
        (folder / f"{name}.png").write_bytes(png)


def _figures(evaluation: Any, job: Any) -> dict[str, bytes]:
    """The figures a FigureJob drew beside the evaluation (pipeline.evaluate(figures=True)), else drawn here
    (matplotlib loads only then)."""
    if job is not None:
        return job.pngs(evaluation.report["debate"])
    from uav_debate_eval.report.figures import render_figures

    return render_figures(evaluation)


def _plain(row: Any) -> Any:
    from uav_debate_eval.report.build import jsonable

    return jsonable(row.to_dict() if hasattr(row, "to_dict") else row)


def _move_into_place(tmp: Path, out_dir: Path, outputs: tuple[str, ...]) -> None:
    if not out_dir.exists():
        os.rename(tmp, out_dir)
        return
    if not out_dir.is_dir():
        raise NotADirectoryError(f"{out_dir}: exists and is not a directory")
    for name in outputs:
        src, dst = tmp / name, out_dir / name
        if src.is_dir() and dst.is_dir():
            old = out_dir / f".{name}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.rename(dst, old)
            os.rename(src, dst)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(src, dst)
