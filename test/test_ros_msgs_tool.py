"""tools/ros_msgs.py (issue 34): which .msg files set-up builds, and the cache key that lets a re-run skip it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("ros_msgs_tool", ROOT / "tools" / "ros_msgs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["ros_msgs_tool"] = module
    spec.loader.exec_module(module)
    return module


def test_subset_is_the_monitor_messages_and_their_px4_dependencies(tool, tmp_path):
    dirs = tool.msg_dirs(None, "v1.16")
    files = tool.selected(dirs["px4_msgs"][0], tool.PX4_SUBSET)
    assert {f.stem for f in files} >= set(tool.PX4_SUBSET)
    pkg = tmp_path / "msg"
    pkg.mkdir()
    (pkg / "A.msg").write_text("B b  # uses B\nuint8 x\n")
    (pkg / "B.msg").write_text("C[] cs\n")
    (pkg / "C.msg").write_text("float32 y\n")
    (pkg / "D.msg").write_text("float32 z\n")
    assert [f.stem for f in tool.selected(tmp_path, ("A",))] == ["A", "B", "C"]
    assert len(tool.selected(tmp_path, None)) == 4
    with pytest.raises(SystemExit, match="no Z.msg"):
        tool.selected(tmp_path, ("Z",))


def test_cache_key_follows_the_definitions(tool, tmp_path):
    (tmp_path / "A.msg").write_text("uint8 x\n")
    key = tool.definitions_hash([tmp_path / "A.msg"])
    assert key == tool.definitions_hash([tmp_path / "A.msg"])
    (tmp_path / "A.msg").write_text("uint16 x\n")
    assert key != tool.definitions_hash([tmp_path / "A.msg"])


def test_every_shipped_px4_version_tf2_msgs_and_mavros_msgs_are_there(tool):
    for version in tool.PX4_VERSIONS:
        src, deps = tool.msg_dirs(None, version)["px4_msgs"]
        assert (src / "msg" / "VehicleLocalPosition.msg").is_file() and deps == ["builtin_interfaces"]
    tf2, deps = tool.msg_dirs(None, "v1.16")["tf2_msgs"]
    assert (tf2 / "msg" / "TFMessage.msg").read_text().strip() == "geometry_msgs/TransformStamped[] transforms"
    assert (tf2 / "LICENSE").is_file() and (tf2.parent / "px4_msgs" / "LICENSE").is_file()
    mavros, deps = tool.msg_dirs(None, "v1.16")["mavros_msgs"]  # the live input's arming (nodes.mavros_state)
    fields = [ln.split()[:2] for ln in (mavros / "msg" / "State.msg").read_text().splitlines()
              if ln.split() and not ln.startswith("#") and "=" not in ln]
    assert fields[:3] == [["std_msgs/Header", "header"], ["bool", "connected"], ["bool", "armed"]]
    assert deps == ["std_msgs"] and (mavros / "LICENSE").is_file()
    with pytest.raises(SystemExit, match="no msg/ folder"):
        tool.msg_dirs(ROOT / "docs", "v1.16")
