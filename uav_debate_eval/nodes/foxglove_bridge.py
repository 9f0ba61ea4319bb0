"""`foxglove_bridge` (inside `uav-debate-eval live --foxglove PORT`): feeds the ROS-free Foxglove view
(viz.foxglove_live) from the verifier's poses and the veto, status, DSL and report topics."""

from __future__ import annotations

import json

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from std_msgs.msg import Bool, String

from uav_debate_eval.live.veto_history import VetoEvidence, status_evidence
from uav_debate_eval.nodes.params import declare
from uav_debate_eval.nodes.pose_input import PoseInput
from uav_debate_eval.nodes.topics import DSL_TOPIC, REPORT_TOPIC, STATUS_TOPIC, VETO_TOPIC, latched
from uav_debate_eval.viz.foxglove_live import LiveView


class FoxgloveBridgeNode(Node):
    def __init__(self, view: LiveView, pose_source: PoseInput, **kwargs):
        super().__init__("foxglove_bridge", **kwargs)
        rate = declare(self, "view_rate_hz", 10.0, "scene and plot updates per second", lo=0.5, hi=60.0,
                       read_only=True)
        self.view = view
        self._errors: list[VetoEvidence] = []
        pose_source.add_listener(view.on_pose)
        self.create_subscription(Bool, VETO_TOPIC, self._on_veto, latched())
        self.create_subscription(DiagnosticArray, STATUS_TOPIC, self._on_status, 10)
        self.create_subscription(String, REPORT_TOPIC, self._on_report, latched())
        self.create_subscription(String, DSL_TOPIC, self._on_dsl, latched())
        self.create_timer(1.0 / rate, view.tick, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def _on_veto(self, msg: Bool) -> None:
        self.view.on_veto(msg.data, self._errors)

    def _on_report(self, msg: String) -> None:
        self.view.on_report(json.loads(msg.data))

    def _on_dsl(self, msg: String) -> None:
        self.view.on_dsl(msg.data)

    def _on_status(self, msg: DiagnosticArray) -> None:
        evidence = [status_evidence(s) for s in msg.status]
        errors = [e for e in evidence if e.level >= 2 and e.constraint is not None]
        if errors != self._errors and errors:  # the veto message carries no evidence: send it with the first error
            self.view.on_veto(True, errors)
        self._errors = errors
        self.view.on_status(evidence)
