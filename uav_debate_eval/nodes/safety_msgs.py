"""The verifier's status rows and scene as ROS messages: DiagnosticArray and RViz markers."""

from __future__ import annotations

from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

from uav_debate_eval.core.mission import Geofence
from uav_debate_eval.safety.monitor import SafetyState
from uav_debate_eval.safety.status import StatusRow


def diagnostics(rows: list[StatusRow], stamp: Time) -> DiagnosticArray:
    arr = DiagnosticArray()
    arr.header.stamp = stamp
    for row in rows:
        st = DiagnosticStatus(name=row.name, hardware_id="swarm", level=bytes([row.level]), message=row.message)
        st.values = [KeyValue(key=k, value=v) for k, v in row.values.items()]
        arr.status.append(st)
    return arr


def safety_markers(state: SafetyState, latest: dict, fence: Geofence | None, frame_id: str, stamp: Time) -> MarkerArray:
    """Geofence box, violating pairs and stale vehicles for RViz (2 s lifetime; deleted when empty)."""
    out = MarkerArray()

    def marker(ns: str, kind: int, rgba: tuple, scale: float) -> Marker:
        m = Marker(ns=ns, id=0, type=kind, action=Marker.ADD)
        m.header.frame_id, m.header.stamp = frame_id, stamp
        m.pose.orientation.w = 1.0
        m.scale.x = m.scale.y = m.scale.z = scale
        m.color = ColorRGBA(r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3])
        m.lifetime = Duration(sec=2)
        return m

    def at(u: str) -> Point:
        return Point(x=float(latest[u][1]), y=float(latest[u][2]), z=float(latest[u][3]))

    if fence is not None:
        m = marker("geofence", Marker.LINE_LIST, (0.2, 0.6, 1.0, 0.8), 0.03)
        lo, hi = fence.min, fence.max
        corners = [(x, y, z) for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])]
        for a in range(8):
            for b in range(a + 1, 8):
                if sum(corners[a][k] != corners[b][k] for k in range(3)) == 1:
                    m.points += [Point(x=float(v[0]), y=float(v[1]), z=float(v[2])) for v in (corners[a], corners[b])]
        out.markers.append(m)
    pairs: list[list[str]] = next((a.get("pairs", []) for a in state.active if a["constraint"] == "min_separation"), [])
    m = marker("violating_pairs", Marker.LINE_LIST, (1.0, 0.1, 0.1, 1.0), 0.05)
    m.points = [at(u) for a, b in pairs if a in latest and b in latest for u in (a, b)]
    m.action = Marker.ADD if m.points else Marker.DELETE
    out.markers.append(m)
    m = marker("stale_vehicles", Marker.SPHERE_LIST, (1.0, 0.6, 0.0, 0.9), 0.3)
    m.points = [at(u) for u in state.stale if u in latest]
    m.action = Marker.ADD if m.points else Marker.DELETE
    out.markers.append(m)
    return out
