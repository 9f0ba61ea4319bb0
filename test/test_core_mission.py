"""Mission YAML: strict constraints (typos are errors with a line number), lenient elsewhere."""

import numpy as np
import pytest

from uav_debate_eval.core import MissionError, parse_mission
from uav_debate_eval.core.mission_file import mission_to_yaml

GOOD = """\
mission:
  name: swap6
  type: formation
constraints:
  min_separation_m: 0.5
  max_speed_mps: 3.0
  max_vertical_speed_mps: 2.0
  geofence:
    min: [-5.0, -5.0, 0.0]
    max: [5.0, 5.0, 4.0]
  stale_timeout_s: 0.5
colour: blue
"""


def test_contract_example_parses_and_round_trips():
    m = parse_mission(GOOD, "m.yaml")
    c = m.constraints
    assert (c.min_separation_m, c.max_speed_mps, c.max_vertical_speed_mps, c.stale_timeout_s) == (0.5, 3.0, 2.0, 0.5)
    assert c.geofence.min == (-5.0, -5.0, 0.0) and c.geofence.max == (5.0, 5.0, 4.0)
    assert m.warnings == ["m.yaml:12: colour: unknown key, ignored"]
    again = parse_mission(mission_to_yaml(m))
    assert again.constraints == m.constraints and again.name == "swap6"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("constraints:\n  min_separation: 0.5\n", "m.yaml:2: constraints.min_separation: unknown constraint"),
        ("constraints:\n  max_speed_mps: fast\n", "m.yaml:2: constraints.max_speed_mps: expected a number"),
        ("constraints:\n  max_speed_mps: -1\n", "m.yaml:2: constraints.max_speed_mps: must be > 0"),
        ("constraints:\n  geofence: {min: [0, 0], max: [1, 1, 1]}\n", "m.yaml:2: constraints.geofence.min"),
        ("constraints:\n  geofence: {min: [2, 0, 0], max: [1, 1, 1]}\n", "must be below max"),
        ("mission: [1, 2\n", "m.yaml:2: malformed YAML"),
        ("weights: {safety: x}\n", "weights.safety: expected a number"),
    ],
)
def test_bad_missions_name_line_and_key(text, message):
    with pytest.raises(MissionError, match=message.replace("[", r"\[").replace(".", r"\.")):
        parse_mission(text, "m.yaml")


def test_geofence_distance_box_and_polygon():
    m = parse_mission("constraints:\n  geofence:\n    min: [-5, -5, 0]\n    max: [5, 5, 4]\n"
                      "    polygon: [[0, 0], [4, 0], [4, 4], [0, 4]]\n")
    g = m.constraints.geofence
    d = g.outside_distance(np.array([[2.0, 2.0, 1.0], [6.0, 2.0, 1.0], [-1.0, 2.0, 1.0], [2.0, 2.0, 5.0]]))
    np.testing.assert_allclose(d, [-1.0, 2.0, 1.0, 1.0])


@pytest.mark.parametrize("text", ["1.5", "-2.", "1.5e+3", "1.0E-2", "3", "-7", "0", "-0.0", "012", "0x1f", "1_000",
                                  "1_0.5", ".inf", "-.nan", "1:30", "1__0.5", "190:20:30.15", "00", "+0", "0o17"])
def test_numbers_read_as_yaml_reads_them(text):
    """The plain-number fast path gives safe_load's value and type for every form, YAML 1.1's own included."""
    import yaml

    from uav_debate_eval.core.mission_file import _LOADER, _scalar

    node = yaml.compose(f"a: {text}", Loader=_LOADER).value[0][1]
    want, got = yaml.safe_load(f"a: {text}")["a"], _scalar(node)
    assert type(got) is type(want) and repr(got) == repr(want)
