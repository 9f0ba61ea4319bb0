"""ROS-free core: the swarm data model, ingest, streaming buffers and mission files."""

from uav_debate_eval.core.errors import InputError, MissionError
from uav_debate_eval.core.mission import Constraints, Geofence, Mission, load_mission, parse_mission
from uav_debate_eval.core.records import Event, Violation
from uav_debate_eval.core.streaming import StreamingSwarm, VehicleRing
from uav_debate_eval.core.trajectory import IngestReport, SwarmTrajectory, Track

__all__ = [
    "Constraints",
    "Event",
    "Geofence",
    "IngestReport",
    "InputError",
    "Mission",
    "MissionError",
    "StreamingSwarm",
    "SwarmTrajectory",
    "Track",
    "VehicleRing",
    "Violation",
    "load_mission",
    "parse_mission",
]
