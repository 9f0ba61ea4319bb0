"""The live graph's DDS profile (config/fastdds_show.xml): set for Fast DDS unless the user set one, and a valid
Fast DDS profile with the default transports and a shared-memory queue for a show's bursts."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from uav_debate_eval.live.config import find_config
from uav_debate_eval.live.dds import PROFILE, use_show_profile

NS = {"f": "http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles"}


@pytest.mark.parametrize("rmw", [None, "rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp"])
def test_fast_dds_gets_the_packaged_profile(rmw):
    environ = {} if rmw is None else {"RMW_IMPLEMENTATION": rmw}
    said = use_show_profile(environ)
    assert environ["FASTRTPS_DEFAULT_PROFILES_FILE"] == str(find_config(PROFILE)) and "8,192" in said


@pytest.mark.parametrize("environ", [{"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/mine.xml"},
                                     {"FASTDDS_DEFAULT_PROFILES_FILE": "/etc/mine.xml"},
                                     {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}])
def test_a_users_profile_or_another_rmw_is_left_alone(environ):
    before = dict(environ)
    assert use_show_profile(environ) is None and environ == before


def test_the_profile_keeps_the_default_transports_with_a_larger_shared_memory_queue():
    root = ET.parse(find_config(PROFILE)).getroot()
    kinds = {d.findtext("f:transport_id", namespaces=NS): d for d in root.iterfind(".//f:transport_descriptor", NS)}
    assert sorted(d.findtext("f:type", namespaces=NS) for d in kinds.values()) == ["SHM", "UDPv4"]
    shm = next(d for d in kinds.values() if d.findtext("f:type", namespaces=NS) == "SHM")
    assert int(shm.findtext("f:port_queue_capacity", namespaces=NS)) >= 8 * 1000  # 8 bursts of 1,000 vehicles
    participant = root.find("f:participant", NS)
    assert participant.get("is_default_profile") == "true"
    used = [t.text for t in participant.iterfind("f:rtps/f:userTransports/f:transport_id", NS)]
    assert sorted(used) == sorted(kinds) and participant.findtext("f:rtps/f:useBuiltinTransports", namespaces=NS) == (
        "false")
