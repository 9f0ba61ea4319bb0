"""Every topic and service name of the live graph, and the latched QoS, defined once.

Names are relative: with no namespace they resolve to CONTRACT.md §5's absolute names
(`swarm/safety/veto` -> `/swarm/safety/veto`); under a namespace the whole graph moves with it.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

# CONTRACT.md §5
VETO_TOPIC = "swarm/safety/veto"  # std_msgs/Bool, latched
STATUS_TOPIC = "swarm/safety/status"  # diagnostic_msgs/DiagnosticArray
DSL_TOPIC = "swarm/dsl"  # std_msgs/String
REPORT_TOPIC = "swarm/evaluation/report"  # std_msgs/String, report JSON

# beyond the contract
MARKERS_TOPIC = "swarm/safety/markers"  # visualization_msgs/MarkerArray (RViz)
SEGMENT_TOPIC = "swarm/segment"  # std_msgs/String JSON: {id, t_start, t_end, reason, uavs}
TRUTH_TOPIC = "swarm/sim/truth"  # std_msgs/String JSON: the simulator's ground truth
SIM_END_TOPIC = "swarm/sim/end"  # std_msgs/String JSON {"t_end": last stamp}: the simulated flight is over
TRIGGER_SERVICE = "swarm/evaluation/trigger"  # std_srvs/Trigger
#: std_msgs/UInt8MultiArray (core.pose_relay): the poses the verifier received, passed on every RELAY_PERIOD_S to
#: `live`'s other process (a message costs the verifier ~2 ms at a show's size: not one per 20-ms check);
#: latched(RELAY_DEPTH): 10 s of them, kept until that process has them (a 1,000-vehicle message is ~70 KB)
POSE_RELAY_TOPIC = "swarm/safety/poses"
RELAY_PERIOD_S = 0.1
RELAY_DEPTH = 100


def latched(depth: int = 1) -> QoSProfile:
    """Reliable, transient local: a late joiner (or a restarted node) gets the last `depth` messages."""
    return QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=depth, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)
