"""A plain `pip install .` (a wheel: no colcon, no ament index) still has the config files `live` needs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "uav_debate_eval"


@pytest.mark.slow
def test_wheel_ships_the_config_files_and_finds_them_installed(tmp_path: Path):
    src = tmp_path / "src"  # a copy, so the build leaves no build/ or egg-info behind in the checkout
    src.mkdir()
    for item in ("setup.py", "setup.cfg", "package.xml"):
        shutil.copy(ROOT / item, src / item)
    for item in ("resource", "launch", "config", PACKAGE):
        shutil.copytree(ROOT / item, src / item, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(src)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    configs = sorted(p.name for p in (ROOT / "config").iterdir() if p.suffix in (".yaml", ".json", ".xml"))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        zf.extractall(tmp_path / "site")
    assert sorted(n.split("/")[-1] for n in names if n.startswith(f"{PACKAGE}/config/")) == configs

    # Installed: the lookup `live` uses finds them inside the package, with no ament index to ask.
    env = {k: v for k, v in os.environ.items() if k != "AMENT_PREFIX_PATH"}
    env["PYTHONPATH"] = str(tmp_path / "site")
    code = ("import sys, uav_debate_eval\nfrom uav_debate_eval.live.config import find_config, read_params_file\n"
            "print(uav_debate_eval.__file__)\n"
            "for name in sys.argv[1:]: print(find_config(name))\n"
            "assert read_params_file(find_config('demo.yaml'))['swarm_sim']\n")
    proc = subprocess.run([sys.executable, "-c", code, *configs], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = (tmp_path / "site" / PACKAGE).resolve()
    paths = [Path(line).resolve() for line in proc.stdout.split()]
    assert paths[0].parent == site  # the unpacked wheel was imported, not the checkout
    assert paths[1:] == [site / "config" / name for name in configs]
