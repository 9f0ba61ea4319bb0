"""Launch files and parameter files name only what exists: executables, files, declared parameters.

`launch` and `launch_ros` are not installed here, so the launch files are read with `ast`; the nodes
are instantiated with real rclpy to list the parameters they declare. A colcon build in a temporary
workspace proves the package installs like any ament_python package.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ros_domain import leased_domain

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.py"))
CONFIG_FILES = sorted(p for p in (ROOT / "config").iterdir() if p.suffix in (".yaml", ".json"))
#: every file the package installs into share/<package>/config (the DDS profile beside the YAML and JSON)
PACKAGED_CONFIG = sorted(p for p in (ROOT / "config").iterdir() if p.suffix in (".yaml", ".json", ".xml"))
PACKAGE = "uav_debate_eval"


def console_scripts() -> dict[str, str]:
    """name -> "module:function" from setup.py's entry_points, read without running setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    entries = [e.value for e in value.elts]
                    return {e.split("=")[0].strip(): e.split("=")[1].strip() for e in entries}
    raise AssertionError("setup.py has no console_scripts")


def _const(node: ast.AST | None):
    return node.value if isinstance(node, ast.Constant) else None


def _dict_keys(node: ast.AST, names: dict[str, ast.Dict]) -> list[str]:
    """Literal keys of a dict expression, following `**name` and plain names bound to dict literals."""
    if isinstance(node, ast.Name) and node.id in names:
        node = names[node.id]
    if not isinstance(node, ast.Dict):
        return []
    keys: list[str] = []
    for k, v in zip(node.keys, node.values, strict=True):
        keys += _dict_keys(v, names) if k is None else [_const(k)]
    return keys


def launch_nodes(path: Path) -> list[dict]:
    """Every launch_ros Node(...) call: package, executable and the literal parameter keys it sets."""
    tree = ast.parse(path.read_text())
    names = {a.targets[0].id: a.value for a in ast.walk(tree) if isinstance(a, ast.Assign)
             and isinstance(a.targets[0], ast.Name) and isinstance(a.value, ast.Dict)}
    out = []
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Node":
            kw = {k.arg: k.value for k in call.keywords}
            keys: list[str] = []
            if isinstance(kw.get("parameters"), ast.List):
                for item in kw["parameters"].elts:
                    keys += _dict_keys(item, names)
            out.append({"package": _const(kw.get("package")), "executable": _const(kw.get("executable")),
                        "name": _const(kw.get("name")), "params": keys})
    return out


def string_constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def declared_arguments(path: Path) -> set[str]:
    return {_const(c.args[0]) for c in ast.walk(ast.parse(path.read_text()))
            if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "DeclareLaunchArgument"}


def used_configurations(path: Path) -> set[str]:
    return {_const(c.args[0]) for c in ast.walk(ast.parse(path.read_text()))
            if isinstance(c, ast.Call) and getattr(c.func, "id", None) == "LaunchConfiguration"}


def included_arguments(path: Path) -> dict[str, set[str]]:
    """launch file name -> keys of launch_arguments passed to IncludeLaunchDescription."""
    out: dict[str, set[str]] = {}
    for call in ast.walk(ast.parse(path.read_text())):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "IncludeLaunchDescription":
            names = [s for s in string_constants_of(call) if s.endswith(".launch.py")]
            keys: set[str] = set()
            for k in call.keywords:
                if k.arg == "launch_arguments":
                    d = k.value.func.value if isinstance(k.value, ast.Call) else k.value
                    keys |= {_const(x) for x in d.keys}
            for name in names:
                out[name] = keys
    return out


def string_constants_of(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_launch_files_present():
    assert [p.name for p in LAUNCH_FILES] == ["demo.launch.py", "gazebo.launch.py", "monitor.launch.py",
                                              "px4_gz_swarm.launch.py"]


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_executables_files_and_arguments_exist(path: Path):
    scripts = console_scripts()
    nodes = launch_nodes(path)
    assert nodes or included_arguments(path), f"{path.name} starts no Node"
    for node in nodes:
        if node["package"] == PACKAGE:
            assert node["executable"] in scripts, f"{path.name}: {node['executable']} is not a console script"
            assert node["name"] == node["executable"], "config files key parameters by the node name"
    for text in string_constants(path):
        if text.endswith(".yaml"):
            assert (ROOT / "config" / text).is_file(), f"{path.name} names missing config/{text}"
        if text.endswith(".launch.py"):
            assert (ROOT / "launch" / text).is_file(), f"{path.name} includes missing launch/{text}"
    assert used_configurations(path) <= declared_arguments(path), f"{path.name}: undeclared LaunchConfiguration"
    for included, keys in included_arguments(path).items():
        assert keys <= declared_arguments(ROOT / "launch" / included), f"{path.name} -> {included}: {keys}"


def test_console_scripts_resolve():
    for name, target in console_scripts().items():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), name


# -- declared parameters (real rclpy nodes) ------------------------------------------------------------

@pytest.fixture(scope="module")
def declared(tmp_path_factory) -> dict[str, set[str]]:
    """executable -> parameter names its node declares, from instantiating each node class."""
    with leased_domain() as domain, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROS_DOMAIN_ID", str(domain))
        return _declared_parameters(tmp_path_factory.mktemp("panel"))


def _declared_parameters(out_dir: Path) -> dict[str, set[str]]:
    import rclpy
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    rclpy.init(args=[])
    result: dict[str, set[str]] = {}
    try:
        for name, target in console_scripts().items():
            module_name = target.split(":")[0]
            if not module_name.startswith(f"{PACKAGE}.nodes."):
                continue
            module = importlib.import_module(module_name)
            classes = [c for _, c in inspect.getmembers(module, inspect.isclass)
                       if issubclass(c, Node) and c is not Node and c.__module__ == module_name]
            assert len(classes) == 1, f"{module_name}: expected one Node subclass, found {classes}"
            overrides = [Parameter("output_dir", value=str(out_dir))] if name == "debate_panel" else []
            node = classes[0](parameter_overrides=overrides)
            try:
                result[name] = set(node._parameters)
            finally:
                node.destroy_node()
    finally:
        rclpy.shutdown()
    return result


@pytest.mark.ros
def test_every_node_declares_described_parameters(declared):
    assert set(declared) == {"safety_verifier", "dsl_builder", "debate_panel", "swarm_sim"}
    for name, params in declared.items():
        assert "use_sim_time" in params, name
    assert {"segment_mode", "window_s", "mission_file"} <= declared["dsl_builder"]
    assert {"llm_backend", "llm_model", "llm_base_url", "output_dir", "keep_reports", "mission_file"} \
        <= declared["debate_panel"]
    assert {"scenario", "seed", "faults", "uavs", "speed", "loop", "csv_file"} <= declared["swarm_sim"]
    for name in ("safety_verifier", "dsl_builder", "debate_panel"):
        assert {"uav_names", "pose_topic_pattern", "pose_type", "pose_qos"} <= declared[name], name


@pytest.mark.ros
@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_parameters_are_declared(path: Path, declared):
    for node in launch_nodes(path):
        if node["package"] == PACKAGE:
            assert set(node["params"]) <= declared[node["executable"]], (path.name, node)


@pytest.mark.ros
@pytest.mark.parametrize("path", [p for p in CONFIG_FILES if "ros__parameters" in p.read_text()],
                         ids=lambda p: p.name)
def test_config_parameters_are_declared(path: Path, declared):
    doc = yaml.safe_load(path.read_text())
    nodes = {key.rstrip("/").split("/")[-1] for key in doc} - {"**"}
    assert nodes <= set(declared), f"{path.name}: unknown nodes {nodes - set(declared)}"
    for key, body in doc.items():
        name = key.rstrip("/").split("/")[-1]
        targets = nodes if name == "**" else {name}
        for target in targets:
            unknown = set(body["ros__parameters"]) - declared[target]
            assert not unknown, f"{path.name}: {key}: {target} does not declare {sorted(unknown)}"


def test_config_mission_files_exist():
    """mission_file values in the parameter files name packaged config files (resolved by name)."""
    for path in CONFIG_FILES:
        doc = yaml.safe_load(path.read_text())
        if not isinstance(doc, dict):
            continue
        for body in doc.values():
            mission = (body.get("ros__parameters") or {}).get("mission_file") if isinstance(body, dict) else None
            if mission:
                assert (ROOT / "config" / mission).is_file(), f"{path.name}: mission_file {mission} missing"


def test_the_monitor_launch_keeps_a_users_dds_profile_else_sets_the_packaged_one():
    """monitor.launch.py sets FASTRTPS_DEFAULT_PROFILES_FILE to the user's value, by default to the packaged profile
    (which exists and is installed)."""
    tree = ast.parse((ROOT / "launch" / "monitor.launch.py").read_text())
    calls = [n for n in ast.walk(tree)
             if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "SetEnvironmentVariable"]
    assert len(calls) == 1 and _const(calls[0].args[0]) == "FASTRTPS_DEFAULT_PROFILES_FILE"
    default = calls[0].args[1]
    assert getattr(default.func, "id", "") == "EnvironmentVariable" and _const(default.args[0]) == _const(
        calls[0].args[0])
    names = [c.value for c in ast.walk(tree) if isinstance(c, ast.Constant) and str(c.value).endswith(".xml")]
    assert names == ["fastdds_show.xml"] and (ROOT / "config" / names[0]) in PACKAGED_CONFIG


# -- colcon ------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_colcon_build_installs_the_package(tmp_path: Path):
    colcon = shutil.which("colcon") or str(Path(sys.executable).parent / "colcon")
    if not Path(colcon).exists():
        pytest.skip("colcon is not installed (requirements-dev.txt)")
    src = tmp_path / "src" / PACKAGE
    src.mkdir(parents=True)
    for item in ("setup.py", "setup.cfg", "package.xml", "resource", "launch", "config", PACKAGE):
        (src / item).symlink_to(ROOT / item)
    env = {**os.environ, "COLCON_HOME": str(tmp_path / ".colcon"), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([colcon, "build", "--base-paths", "src", "--packages-select", PACKAGE,
                           "--event-handlers", "console_cohesion-"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    prefix = tmp_path / "install" / PACKAGE
    share = prefix / "share" / PACKAGE
    assert (prefix / "share" / "ament_index" / "resource_index" / "packages" / PACKAGE).is_file()
    assert (share / "package.xml").is_file()
    assert sorted(p.name for p in (share / "launch").iterdir()) == [p.name for p in LAUNCH_FILES]
    assert sorted(p.name for p in (share / "config").iterdir()) == sorted(p.name for p in PACKAGED_CONFIG)
    scripts = prefix / "lib" / PACKAGE
    for name in console_scripts():
        assert (scripts / name).is_file(), f"console script {name} not installed in lib/{PACKAGE}"


def test_px4_gz_swarm_launch_spawns_instances_apart_and_monitors_px4_topics():
    """Static: the agent, N PX4 SITL instances at PX4_GZ_MODEL_POSE offsets (instance 0 starts Gazebo, the others
    join it), and the monitor on config/px4.yaml's px4_msgs input."""
    path = ROOT / "launch" / "px4_gz_swarm.launch.py"
    text = path.read_text()
    consts = string_constants(path)
    assert {"MicroXRCEAgent", "PX4_GZ_MODEL_POSE", "PX4_GZ_STANDALONE", "PX4_SIM_MODEL", "px4.yaml"} <= consts
    assert {"n", "spacing_m", "px4_dir", "mission_file"} <= declared_arguments(path)
    assert included_arguments(path)["monitor.launch.py"] <= declared_arguments(ROOT / "launch" / "monitor.launch.py")
    assert 'f"0,{k * spacing:g}"' in text and '"-i", str(k)' in text
    params = yaml.safe_load((ROOT / "config" / "px4.yaml").read_text())
    assert params["/**"]["ros__parameters"]["pose_type"] == "VehicleLocalPosition"
