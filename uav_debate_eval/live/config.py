"""Where the live monitor's files come from: packaged config files, the mission, ROS 2 parameter YAML."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import yaml

from uav_debate_eval.core.errors import InputError
from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.mission_file import load_mission

PACKAGE = "uav_debate_eval"


def find_config(name: str) -> Path:
    """A file of the package's config/ directory: the ament share/ copy (colcon, or a sourced install), else
    the copy inside the package (a wheel: `pip install .`), else the source tree's (editable installs)."""
    package = Path(__file__).resolve().parents[1]
    candidates = [package / "config" / name, package.parent / "config" / name]
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
        with contextlib.suppress(PackageNotFoundError, OSError):  # OSError: no AMENT_PREFIX_PATH (pip install)
            candidates.insert(0, Path(get_package_share_directory(PACKAGE)) / "config" / name)
    except ImportError:  # no ament index (pip-only install)
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
        raise InputError(f"{path}: cannot read config: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: malformed YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping of node names to ros__parameters")
    out: dict[str, dict[str, Any]] = {}
    for key, body in doc.items():
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters"), dict):
            raise InputError(f"{path}: {key}: expected a 'ros__parameters' mapping")
        out[str(key).rstrip("/").split("/")[-1] or "**"] = dict(body["ros__parameters"])
    common = out.pop("**", {})
    return {"**": common, **{name: {**common, **params} for name, params in out.items()}}
