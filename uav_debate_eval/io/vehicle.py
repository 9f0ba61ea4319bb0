"""What kind of vehicle an autopilot log comes from: its class, firmware, and whether it was simulated.

The class sets the reach the data-quality pass judges jumps and glitches by: a plane covers 75 m between 1-Hz
telemetry fixes in ordinary cruise, which a multirotor cannot.
"""

from __future__ import annotations

import re

#: Firmware names in MSG/VER (ArduCopter V4.5.1, APM:Copter V3.4-rc2, ArduPlane V4.2.3, ArduRover, ArduSub).
_FIRMWARE = re.compile(r"\b(ArduCopter|APM:Copter|ArduPlane|APM:Plane|ArduRover|APM:Rover|Rover|ArduSub|APM:Sub|"
                       r"AntennaTracker|Blimp|AP_Periph)\b[^\n]*?V?\d+\.\d+[\w.\-]*")
_CLASS_OF = {"copter": "multirotor", "plane": "fixed_wing", "rover": "rover", "sub": "underwater"}
#: MAVLink MAV_TYPE -> class (HEARTBEAT type).
MAV_TYPE_CLASS = {1: "fixed_wing", 2: "multirotor", 3: "multirotor", 4: "multirotor", 10: "rover", 11: "rover",
                  12: "underwater", 13: "multirotor", 14: "multirotor", 15: "multirotor", 19: "vtol", 20: "vtol",
                  21: "vtol", 22: "vtol", 23: "vtol", 24: "vtol", 25: "vtol", 29: "multirotor", 35: "multirotor"}


def firmware_of(strings: list[str]) -> str:
    """The first firmware string among the log's messages ('' when none names one)."""
    for s in strings:
        m = _FIRMWARE.search(s)
        if m:
            return m.group(0).strip()
    return ""


def class_of_firmware(firmware: str, params: dict) -> str:
    """The vehicle class a firmware string (and Q_ENABLE for quadplanes) names; 'unknown' when it names none."""
    low = firmware.lower()
    kind = next((k for k in ("copter", "plane", "rover", "sub") if k in low), "")
    if kind == "plane" and float(params.get("Q_ENABLE", 0) or 0) > 0:
        return "vtol"
    if not kind:
        if float(params.get("Q_ENABLE", 0) or 0) > 0:
            return "vtol"
        if "LIM_ROLL_CD" in params or "TRIM_ARSPD_CM" in params or "AIRSPEED_CRUISE" in params:
            return "fixed_wing"
        if "ANGLE_MAX" in params and "WPNAV_SPEED" in params:
            return "multirotor"
        return "unknown"
    return _CLASS_OF[kind]


def is_sitl(params: dict) -> bool:
    """ArduPilot's simulator logs its own SIM_* parameters."""
    return any(str(k).startswith("SIM_") for k in params)


def describe_vehicle(log, params: dict, strings: list[str]) -> None:
    """Fill a VehicleLog's vehicle_class, firmware and sitl from the log's messages and parameters."""
    log.firmware = firmware_of(strings)
    log.vehicle_class = class_of_firmware(log.firmware, params)
    log.sitl = is_sitl(params)
