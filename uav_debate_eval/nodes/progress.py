"""The terminal view of `uav-debate-eval live`: segments, veto edges and reports as they happen (rich)."""

from __future__ import annotations

import json
import time

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from std_msgs.msg import Bool, String

from uav_debate_eval.live.veto_history import status_evidence
from uav_debate_eval.nodes.topics import REPORT_TOPIC, SEGMENT_TOPIC, STATUS_TOPIC, TRUTH_TOPIC, VETO_TOPIC, latched


class ProgressNode(Node):
    """Prints the live pipeline's progress (segments, veto edges, reports) with rich; used by `live`."""

    def __init__(self, console, quiet: bool = False, **kwargs):
        super().__init__("live_progress", **kwargs)
        self.console = console
        self.quiet = quiet
        self._veto: bool | None = None
        self._status: list[str] = []
        self._kinds_shown: set[str] = set()  # the veto kinds said since the veto rose
        self._unheard = ""  # the verifier's last list of configured vehicles it has no pose from
        self._t0 = time.monotonic()
        self._t_ref: float | None = None  # first stream time seen: progress shows flight time from it
        self.create_subscription(Bool, VETO_TOPIC, self._on_veto, latched())
        self.create_subscription(DiagnosticArray, STATUS_TOPIC, self._on_status, 10)
        self.create_subscription(String, SEGMENT_TOPIC, self._on_segment, latched(10))
        self.create_subscription(String, REPORT_TOPIC, self._on_report, latched())
        self.create_subscription(String, TRUTH_TOPIC, self._on_truth, latched())

    def _on_truth(self, msg) -> None:
        """A simulated flight: its time zero is the reference, and the injected faults are shown up front."""
        truth = json.loads(msg.data)
        self._t_ref = truth["stamp_base"]
        for f in truth["faults"]:
            if f.get("expect_constraint"):
                self._say(f"simulator injects {f['kind']} ({', '.join(f['uavs'])}) at flight "
                          f"t={f['t_start']:.2f}-{f['t_end']:.2f} s (expect {f['expect_constraint']})")

    def _say(self, text: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]{time.monotonic() - self._t0:6.1f}s[/] {text}")

    def _rel(self, t: float) -> float:
        if self._t_ref is None:
            self._t_ref = t
        return t - self._t_ref

    def _on_status(self, msg) -> None:
        self._status = []
        degraded_only = True
        unheard = ""
        for status in msg.status:
            ev = status_evidence(status)
            if ev.t is not None:
                self._rel(ev.t)
            if ev.name == "safety/unheard":
                unheard = str(ev.values.get("uavs", ""))
                if unheard != self._unheard:
                    self._say(f"[yellow]{ev.message}[/]")
            if ev.level >= 2 and not ev.name.endswith("/veto"):
                when = f" at flight t={self._rel(ev.t):.2f} s" if ev.t is not None else ""
                self._status.append(f"{ev.name}: {ev.message}{when}")
                degraded_only &= ev.name == "safety/verifier"
        self._unheard = unheard
        kind = "verifier degraded (fail-safe: it cannot vouch for the swarm)" if degraded_only else "hazard"
        if self._veto and self._status and kind not in self._kinds_shown:  # a hazard during a degraded veto too
            self._kinds_shown.add(kind)
            self._say(f"   [red]veto kind: {kind}[/]")
            for line in self._status[:3]:
                self._say(f"   [red]{line}[/]")

    def _on_veto(self, msg) -> None:
        if msg.data == self._veto:
            return
        first, self._veto = self._veto is None, bool(msg.data)
        self._kinds_shown.clear()
        if msg.data:
            self._say("[bold red]VETO ON[/]")
        elif not first:  # the monitor's first (latched) state is no edge: nothing was restored
            self._say("[green]veto off[/] (margins restored for the hold time)")

    def _on_segment(self, msg) -> None:
        seg = json.loads(msg.data)
        self._say(f"segment {seg['id']} closed ({seg['reason']}): flight t=[{self._rel(seg['t_start']):.1f}, "
                  f"{self._rel(seg['t_end']):.1f}] s, "
                  f"{len(seg.get('uavs', []))} vehicles, DSL {seg.get('dsl_tokens', 0)} tokens -> panel")

    def _on_report(self, msg) -> None:
        report = json.loads(msg.data)
        seg = report.get("live", {}).get("segment", {}).get("id", "?")
        verdict, debate = report["verdict"], report["debate"]
        rounds = debate.get("rounds", [])
        agents = sorted({r["agent"] for rnd in rounds for r in rnd.get("responses", [])})
        colour = {"safe": "green", "borderline": "yellow", "risky": "red"}.get(verdict["label"], "blue")
        self._say(f"report {seg}: [bold {colour}]{verdict['label']}[/]{' (vetoed)' if verdict['vetoed'] else ''}; "
                  f"debate L{debate['layer']} {len(rounds)} round(s), {len(agents)} agents, backend "
                  f"{debate['backend']}, {debate['tokens']['prompt'] + debate['tokens']['completion']} tokens")
        for v in report["violations"][:3]:
            worst = f"{v['worst_value']:.3g}" if isinstance(v["worst_value"], float) else v["worst_value"]
            self._say(f"   violation {v['constraint']} {', '.join(v['uavs'])}: worst {worst} (limit {v['limit']}) "
                      f"flight t=[{v['t_start']:.1f}, {v['t_end']:.1f}] s")  # reports are in flight time


