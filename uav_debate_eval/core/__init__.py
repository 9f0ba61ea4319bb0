"""ROS-free core: the swarm data model, ingest, streaming buffers and mission files.

The names below are loaded on first use (PEP 562), so `from uav_debate_eval.core.errors import InputError`
does not import numpy, YAML and the data model: the CLI's `--help` and start-up stay fast.
"""

from importlib import import_module

_EXPORTS = {
    "InputError": "errors", "MissionError": "errors",
    "Constraints": "mission", "Geofence": "mission", "Mission": "mission", "load_mission": "mission_file",
    "parse_mission": "mission_file",
    "Event": "records", "Violation": "records",
    "StreamingSwarm": "streaming", "VehicleRing": "streaming",
    "IngestReport": "records", "SwarmTrajectory": "trajectory", "Track": "track",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
