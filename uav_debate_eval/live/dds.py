"""The DDS settings the live graph starts with: Fast DDS's shared-memory receive queue sized for a show's bursts
(config/fastdds_show.xml says why). A profile the user set wins; another RMW ignores the file."""

from __future__ import annotations

from collections.abc import MutableMapping

from uav_debate_eval.live.config import find_config

#: The variables Fast DDS reads its XML profiles from (2.x, as in Jazzy; 3.x).
PROFILE_VARIABLES = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
PROFILE = "fastdds_show.xml"


def use_show_profile(environ: MutableMapping[str, str]) -> str | None:
    """Point Fast DDS at the packaged profile in `environ` (the processes started after inherit it) unless a profile
    is set already or the RMW is not Fast DDS; returns what was done, for the start-up lines, or None."""
    if any(environ.get(name) for name in PROFILE_VARIABLES):
        return None
    if not environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp").startswith("rmw_fastrtps"):
        return None
    path = find_config(PROFILE)
    environ["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(path)
    return (f"DDS: Fast DDS with a shared-memory queue of 8,192 messages ({path}; set "
            "FASTRTPS_DEFAULT_PROFILES_FILE to use your own)")
