"""The Foxglove channels of `scene.TOPICS` on one foxglove-sdk Context (a live server's or an MCAP file's)."""

from __future__ import annotations

from typing import Any

import foxglove
from foxglove.channels import LogChannel, PosesInFrameChannel, SceneUpdateChannel

from uav_debate_eval.viz.scene import TOPICS

_NUM = {"type": ["number", "null"]}
JSON_SCHEMAS: dict[str, dict[str, Any]] = {
    "veto": {"type": "object", "properties": {"veto": {"type": "boolean"}, "constraint": {"type": ["string", "null"]},
                                              "uavs": {"type": "array", "items": {"type": "string"}},
                                              "value": _NUM, "limit": _NUM, "t": _NUM}},
    "status": {"type": "object", "properties": {"t": _NUM, "status": {"type": "array"}}},
    "report": {"type": "object"},
    "verdict": {"type": "object", "properties": {"label": {"type": "string"}, "vetoed": {"type": "boolean"},
                                                 "summary": {"type": "string"}, "findings": {"type": "array"}}},
    "kinematics": {"type": "object", "properties": {"t": _NUM, "min_separation": _NUM, "min_separation_limit": _NUM,
                                                    "speeds": {"type": "object"}, "max_speed": _NUM,
                                                    "max_speed_limit": _NUM}},
    "dsl": {"type": "object", "properties": {"text": {"type": "string"}}},
}


class Channels:
    """One channel per entry of TOPICS: typed for the scene, poses and annotations, JSON for the rest."""

    def __init__(self, context: foxglove.Context):
        self.scene = SceneUpdateChannel(TOPICS["scene"], context=context)
        self.poses = PosesInFrameChannel(TOPICS["poses"], context=context)
        self.annotations = LogChannel(TOPICS["annotations"], context=context)
        self.json = {name: foxglove.Channel(TOPICS[name], schema={"title": name, **schema}, message_encoding="json",
                                            context=context) for name, schema in JSON_SCHEMAS.items()}

    def log_json(self, name: str, msg: dict, log_time: int | None = None) -> None:
        self.json[name].log(msg, log_time=log_time)
