"""Mission files (CONTRACT.md §2): read strictly where a typo could switch a safety check off, and written back.

Errors name the file, the line and the key. Unknown keys inside ``constraints:`` are errors;
unknown keys elsewhere are collected in :attr:`Mission.warnings` and otherwise ignored.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml

from uav_debate_eval.core.errors import MissionError
from uav_debate_eval.core.mission import DEFAULT_WEIGHTS, VEHICLE_CLASSES, FrameOrigin, Geofence, Mission, Thresholds
from uav_debate_eval.stl.spec import QUANTIFIERS, RULE_ID, SEVERITIES, Rule, make_rule
from uav_debate_eval.stl.syntax import FormulaError

_CONSTRAINT_KEYS = {"min_separation_m", "max_speed_mps", "max_vertical_speed_mps", "geofence", "stale_timeout_s",
                    "max_attitude_error_deg", "attitude_error_hold_s"}
_TOP_KEYS = {"mission", "constraints", "thresholds", "weights", "uavs", "formation", "waypoints", "vehicles",
             "vehicle_class", "frames", "rules"}


class _Ctx:
    def __init__(self, source: str):
        self.source = source
        self.warnings: list[str] = []

    def fail(self, node: yaml.Node | None, key: str, why: str) -> MissionError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return MissionError(f"{self.source}{line}: {key}: {why}")

    def warn(self, node: yaml.Node, key: str, why: str) -> None:
        self.warnings.append(f"{self.source}:{node.start_mark.line + 1}: {key}: {why}")


def _mapping(ctx: _Ctx, node: yaml.Node, key: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        raise ctx.fail(node, key, "expected a mapping")
    out: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for k, v in node.value:
        name = str(k.value)
        if name in out:
            raise ctx.fail(k, f"{key}.{name}" if key else name, "duplicate key")
        out[name] = (k, v)
    return out


#: libyaml's composer when built (a 1,000-vehicle mission parses in milliseconds), and one scalar constructor
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALARS = yaml.constructor.SafeConstructor()
#: plain decimal numbers, which float() and int() read as YAML 1.1 does (_scalar)
_FLOAT, _INT = "tag:yaml.org,2002:float", "tag:yaml.org,2002:int"
_PLAIN_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_PLAIN_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")


def _scalar(node: yaml.ScalarNode):
    """The Python value of a resolved scalar (as safe_load gives it), without re-serialising the node.

    A plain decimal number (a show's mission holds ~12,000: formation offsets, waypoints) is read by float() or
    int() directly, 10x faster than the constructor; the forms where YAML 1.1 and Python disagree (.inf, octal
    012, 0x, 1:30, double underscores) are not plain and go to the constructor."""
    value = node.value
    if node.tag == _FLOAT and _PLAIN_FLOAT.fullmatch(value):
        return float(value)
    if node.tag == _INT and _PLAIN_INT.fullmatch(value):
        return int(value)
    make = _SCALARS.yaml_constructors.get(node.tag)
    return make(_SCALARS, node) if make is not None else value


def _number(ctx: _Ctx, node: yaml.Node, key: str, positive: bool = True) -> float:
    value = _scalar(node) if isinstance(node, yaml.ScalarNode) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ctx.fail(node, key, f"expected a number, got {node.value!r}" if isinstance(node, yaml.ScalarNode)
                       else "expected a number")
    if positive and value <= 0:
        raise ctx.fail(node, key, f"must be > 0, got {value}")
    return float(value)


def _vector(ctx: _Ctx, node: yaml.Node, key: str, n: int) -> tuple[float, ...]:
    if not isinstance(node, yaml.SequenceNode) or len(node.value) != n:
        raise ctx.fail(node, key, f"expected a list of {n} numbers")
    return tuple(_number(ctx, v, key, positive=False) for v in node.value)


def _point(ctx: _Ctx, node: yaml.Node, key: str) -> tuple[float, float, float]:
    x, y, z = _vector(ctx, node, key, 3)
    return x, y, z


def _point2(ctx: _Ctx, node: yaml.Node, key: str) -> tuple[float, float]:
    x, y = _vector(ctx, node, key, 2)
    return x, y


def _text(ctx: _Ctx, node: yaml.Node, key: str) -> str:
    if not isinstance(node, yaml.ScalarNode):
        raise ctx.fail(node, key, "expected text")
    return str(node.value)


def parse_mission(text: str, source: str = "<mission>") -> Mission:
    """Parse mission YAML text; raises MissionError with file:line: key: reason."""
    ctx = _Ctx(source)
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise MissionError(f"{source}{line}: malformed YAML: {problem}") from None
    mission = Mission(source=source)
    if root is None:
        return mission
    top = _mapping(ctx, root, "")
    for name, (knode, _) in top.items():
        if name not in _TOP_KEYS:
            ctx.warn(knode, name, "unknown key, ignored")

    if "mission" in top:
        for name, (knode, v) in _mapping(ctx, top["mission"][1], "mission").items():
            if name in ("name", "type", "description"):
                setattr(mission, name, _text(ctx, v, f"mission.{name}"))
            else:
                ctx.warn(knode, f"mission.{name}", "unknown key, ignored")

    if "constraints" in top and not (isinstance(top["constraints"][1], yaml.ScalarNode)
                                     and top["constraints"][1].value in ("", "null", "~")):
        c = mission.constraints
        for name, (knode, v) in _mapping(ctx, top["constraints"][1], "constraints").items():
            key = f"constraints.{name}"
            if name not in _CONSTRAINT_KEYS:
                raise ctx.fail(knode, key, "unknown constraint (a typo here would switch a safety check off); "
                               f"known: {', '.join(sorted(_CONSTRAINT_KEYS))}")
            if name == "geofence":
                c.geofence = _geofence(ctx, v)
            else:
                setattr(c, name, _number(ctx, v, key))

    if "thresholds" in top:
        th = mission.thresholds
        known = set(Thresholds.__dataclass_fields__)
        for name, (knode, v) in _mapping(ctx, top["thresholds"][1], "thresholds").items():
            if name in known:
                setattr(th, name, _number(ctx, v, f"thresholds.{name}"))
            else:
                ctx.warn(knode, f"thresholds.{name}", "unknown key, ignored")

    if "weights" in top:
        weights = {}
        for name, (knode, v) in _mapping(ctx, top["weights"][1], "weights").items():
            if name not in DEFAULT_WEIGHTS:
                raise ctx.fail(knode, f"weights.{name}", f"unknown category; known: {', '.join(DEFAULT_WEIGHTS)}")
            weights[name] = _number(ctx, v, f"weights.{name}", positive=False)
            if weights[name] < 0:
                raise ctx.fail(v, f"weights.{name}", "must be >= 0")
        mission.weights.update(weights)
        if sum(mission.weights.values()) <= 0:
            raise ctx.fail(top["weights"][1], "weights", "must not all be zero")

    if "uavs" in top:
        node = top["uavs"][1]
        if not isinstance(node, yaml.SequenceNode):
            raise ctx.fail(node, "uavs", "expected a list of vehicle names")
        mission.uavs = [_text(ctx, v, "uavs") for v in node.value]

    if "vehicles" in top:
        node = top["vehicles"][1]
        if not isinstance(node, yaml.SequenceNode):
            raise ctx.fail(node, "vehicles", "expected a list of vehicle ids or glob patterns")
        mission.vehicles = [_text(ctx, v, "vehicles") for v in node.value]

    if "vehicle_class" in top:
        node = top["vehicle_class"][1]
        mission.vehicle_class = _text(ctx, node, "vehicle_class")
        if mission.vehicle_class not in VEHICLE_CLASSES:
            raise ctx.fail(node, "vehicle_class", f"unknown class; known: {', '.join(VEHICLE_CLASSES)}")

    if "frames" in top:
        _frames(ctx, top["frames"][1], mission)

    if "formation" in top:
        for name, (knode, v) in _mapping(ctx, top["formation"][1], "formation").items():
            if name == "offsets":
                for u, (_, off) in _mapping(ctx, v, "formation.offsets").items():
                    mission.formation_offsets[u] = _point(ctx, off, f"formation.offsets.{u}")
            elif name == "tolerance_m":
                mission.formation_tolerance_m = _number(ctx, v, "formation.tolerance_m")
            else:
                ctx.warn(knode, f"formation.{name}", "unknown key, ignored")

    if "waypoints" in top:
        for name, (_, v) in _mapping(ctx, top["waypoints"][1], "waypoints").items():
            if name == "tolerance_m":
                mission.waypoint_tolerance_m = _number(ctx, v, "waypoints.tolerance_m")
                continue
            if not isinstance(v, yaml.SequenceNode):
                raise ctx.fail(v, f"waypoints.{name}", "expected a list of [x, y, z]")
            mission.waypoints[name] = [_point(ctx, p, f"waypoints.{name}") for p in v.value]

    if "rules" in top:
        mission.rules = _rules(ctx, top["rules"][1], mission.constraints.geofence is not None)

    mission.warnings = ctx.warnings
    return mission


_RULE_KEYS = ("id", "severity", "over", "stl")


def _rules(ctx: _Ctx, node: yaml.Node, geofence: bool) -> list[Rule]:
    """`rules:` (CONTRACT.md §2a): a formula that does not parse or names an unknown signal fails the load with the
    rule's id and the column of the error."""
    if not isinstance(node, yaml.SequenceNode):
        raise ctx.fail(node, "rules", "expected a list of rules (id, severity, over, stl)")
    rules: list[Rule] = []
    for i, item in enumerate(node.value):
        fields = _mapping(ctx, item, f"rules[{i}]")
        for name, (knode, _) in fields.items():
            if name not in _RULE_KEYS:
                raise ctx.fail(knode, f"rules[{i}].{name}", f"unknown key; known: {', '.join(_RULE_KEYS)}")
        for need in _RULE_KEYS:
            if need not in fields:
                raise ctx.fail(item, f"rules[{i}].{need}", "missing")
        rid = _text(ctx, fields["id"][1], f"rules[{i}].id")
        if not RULE_ID.match(rid):
            raise ctx.fail(fields["id"][1], f"rules[{i}].id", f"{rid!r}: use letters, digits, '_', '.' or '-'")
        if any(r.id == rid for r in rules):
            raise ctx.fail(fields["id"][1], f"rules[{i}].id", f"duplicate rule id {rid!r}")
        values = {}
        for key, allowed in (("severity", SEVERITIES), ("over", QUANTIFIERS)):
            values[key] = _text(ctx, fields[key][1], f"rule {rid}: {key}")
            if values[key] not in allowed:
                raise ctx.fail(fields[key][1], f"rule {rid}: {key}",
                               f"{values[key]!r}; expected one of {', '.join(allowed)}")
        stl_node = fields["stl"][1]
        stl = _text(ctx, stl_node, f"rule {rid}: stl")
        try:
            rules.append(make_rule(rid, values["severity"], values["over"], stl, geofence))
        except FormulaError as exc:
            raise ctx.fail(stl_node, f"rule {rid}: stl", f"column {exc.column} of {stl!r}: {exc.message}") from None
    return rules


def _frames(ctx: _Ctx, node: yaml.Node, mission: Mission) -> None:
    """`frames: shared`, or `frames: {uav: {origin: [x, y, z], yaw_deg: d}}` (then every frame is placed)."""
    if isinstance(node, yaml.ScalarNode):
        if node.value != "shared":
            raise ctx.fail(node, "frames", "expected 'shared' or a mapping of vehicle -> {origin, yaw_deg}")
        mission.frames_shared = True
        return
    for uav, (_, v) in _mapping(ctx, node, "frames").items():
        fields = _mapping(ctx, v, f"frames.{uav}")
        origin = FrameOrigin()
        for name, (knode, fv) in fields.items():
            if name == "origin":
                origin.origin = _point(ctx, fv, f"frames.{uav}.origin")
            elif name == "yaw_deg":
                origin.yaw_deg = _number(ctx, fv, f"frames.{uav}.yaw_deg", positive=False)
            else:
                raise ctx.fail(knode, f"frames.{uav}.{name}", "unknown key; known: origin, yaw_deg")
        mission.frame_origins[uav] = origin
    mission.frames_shared = True


def _geofence(ctx: _Ctx, node: yaml.Node) -> Geofence:
    fields = _mapping(ctx, node, "constraints.geofence")
    for name, (knode, _) in fields.items():
        if name not in ("min", "max", "polygon"):
            raise ctx.fail(knode, f"constraints.geofence.{name}", "unknown key; known: min, max, polygon")
    for need in ("min", "max"):
        if need not in fields:
            raise ctx.fail(node, f"constraints.geofence.{need}", "missing")
    lo = _point(ctx, fields["min"][1], "constraints.geofence.min")
    hi = _point(ctx, fields["max"][1], "constraints.geofence.max")
    if any(a >= b for a, b in zip(lo, hi, strict=True)):
        raise ctx.fail(fields["max"][1], "constraints.geofence", f"min {list(lo)} must be below max {list(hi)}")
    polygon = None
    if "polygon" in fields:
        pnode = fields["polygon"][1]
        if not isinstance(pnode, yaml.SequenceNode) or len(pnode.value) < 3:
            raise ctx.fail(pnode, "constraints.geofence.polygon", "expected at least 3 [x, y] points")
        polygon = [_point2(ctx, p, "constraints.geofence.polygon") for p in pnode.value]
    return Geofence(lo, hi, polygon)


def load_mission(path: str | Path) -> Mission:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MissionError(f"{path}: cannot read mission file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise MissionError(f"{path}: mission file is not UTF-8 text") from None
    return parse_mission(text, str(path))


def mission_to_yaml(m: Mission) -> str:
    """Serialise a mission back to YAML (used by the simulator to write a scenario's mission)."""
    c = m.constraints
    constraints = {k: getattr(c, k) for k in sorted(_CONSTRAINT_KEYS - {"geofence"}) if getattr(c, k) is not None
                   and (k != "attitude_error_hold_s" or c.max_attitude_error_deg is not None)}
    if c.geofence is not None:
        constraints["geofence"] = {"min": [float(x) for x in c.geofence.min],
                                   "max": [float(x) for x in c.geofence.max]}
        if c.geofence.polygon:
            constraints["geofence"]["polygon"] = [list(p) for p in c.geofence.polygon]
    doc: dict = {
        "mission": {"name": m.name, "type": m.type, "description": m.description},
        "constraints": constraints,
        "thresholds": {k: v for k, v in vars(m.thresholds).items() if v is not None},
        "weights": dict(m.weights),
    }
    if m.uavs:
        doc["uavs"] = list(m.uavs)
    if m.vehicles:
        doc["vehicles"] = list(m.vehicles)
    if m.vehicle_class != "multirotor":
        doc["vehicle_class"] = m.vehicle_class
    if m.frame_origins:
        doc["frames"] = {u: {"origin": list(f.origin), "yaw_deg": f.yaw_deg} for u, f in m.frame_origins.items()}
    elif m.frames_shared:
        doc["frames"] = "shared"
    if m.formation_offsets:
        doc["formation"] = {"offsets": {u: list(v) for u, v in m.formation_offsets.items()},
                            "tolerance_m": m.formation_tolerance_m}
    if m.rules:
        doc["rules"] = [{"id": r.id, "severity": r.severity, "over": r.over, "stl": r.stl} for r in m.rules]
    if m.waypoints:
        doc["waypoints"] = {u: [list(p) for p in pts] for u, pts in m.waypoints.items()}
        doc["waypoints"]["tolerance_m"] = m.waypoint_tolerance_m
    return yaml.safe_dump(doc, sort_keys=False)
