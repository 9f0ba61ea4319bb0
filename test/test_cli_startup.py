"""Start-up stays light (issue 15): `--help` loads no numerical or plotting library, and `evaluate` reads its
input before it loads the evaluation stages and matplotlib."""

from __future__ import annotations

import subprocess
import sys

from uav_debate_eval.debate.baselines import METHODS
from uav_debate_eval.debate.suite import ALL_METHODS

HEAVY = ("numpy", "scipy", "matplotlib", "yaml", "pyarrow", "distributed", "rich")


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_help_parser_loads_no_heavy_library():
    loaded = _loaded_after("from uav_debate_eval.cli import build_parser\nbuild_parser().format_help()")
    assert not {m for m in HEAVY if m in loaded}


def test_evaluate_reads_before_loading_the_stages(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("t,uav_id,x,y,z\n", encoding="utf-8")
    code = (f"from uav_debate_eval.cli import main\nassert main(['evaluate', {str(empty)!r}, '--out', "
            f"{str(tmp_path / 'out')!r}, '--quiet']) == 2")
    loaded = _loaded_after(code)
    assert "pyarrow" in loaded  # it did read the file
    assert not {"matplotlib", "scipy", "uav_debate_eval.safety.checker", "uav_debate_eval.debate.engine"} & loaded


def test_compare_choices_match_the_baselines():
    assert ("debate", *METHODS) == ALL_METHODS


def test_rules_evaluation_loads_no_llm_client(tmp_path):
    """The rules backend needs no LLM client library (openai alone took ~0.4 s to import)."""
    from uav_debate_eval.sim.scenarios import simulate

    simulate("formation", seed=0, duration_s=20.0).write(tmp_path / "f", formats=("csv",))
    csv_path = str(tmp_path / "f" / "trajectory.csv")
    code = (f"from uav_debate_eval.cli import main\nassert main(['evaluate', {csv_path!r}, "
            f"'--out', {str(tmp_path / 'out')!r}, '--quiet']) in (0, 3, 4)")
    loaded = _loaded_after(code)
    assert "uav_debate_eval.debate.engine" in loaded  # it did evaluate
    assert not {"openai", "llama_cpp", "httpx"} & loaded


def test_the_report_writer_loads_no_plotting_library():
    """The figures are drawn in a child process: writing the text reports needs no matplotlib."""
    loaded = _loaded_after("import uav_debate_eval.report.writer")
    assert "matplotlib" not in loaded and "uav_debate_eval.report.captions" in loaded
