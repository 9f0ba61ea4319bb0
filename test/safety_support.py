"""The small box mission the safety tests share: 0.5 m separation, 3 m/s, 2 m/s vertical, a 10 x 10 x 4 m fence."""

from __future__ import annotations

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.mission_file import parse_mission

BOX_CONSTRAINTS = """
constraints:
  min_separation_m: 0.5
  max_speed_mps: 3.0
  max_vertical_speed_mps: 2.0
  geofence: {min: [-5, -5, 0], max: [5, 5, 4]}
  stale_timeout_s: 0.5
"""


def box_mission(thresholds: str = "") -> Mission:
    """The box mission, with an optional `thresholds: {...}` YAML line."""
    return parse_mission(BOX_CONSTRAINTS + thresholds)
