"""`live --sim --foxglove 0` over real DDS: a WebSocket client on loopback gets the advertised channels and
sees the veto go true during the simulator's near miss, with its constraint and vehicles."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from foxglove_client import FoxgloveClient
from test_ros_live import _env, _write_config
from test_ros_live_end import _live_sim

from uav_debate_eval.viz.scene import TOPICS

pytestmark = [pytest.mark.ros, pytest.mark.slow]


def test_foxglove_client_sees_the_near_miss_veto(tmp_path: Path, ros_domain: int):
    env = {**_env(ros_domain), "COLUMNS": "250"}
    config, scenario = _write_config(tmp_path, ["near_miss"], 30.0)
    near = next(f for f in scenario["truth"] if f["kind"] == "near_miss")
    out, log = tmp_path / "out", tmp_path / "live.log"
    live = _live_sim(config, out, env, log, "--foxglove", "0")
    client = None
    vetoes, kinds = [], set()
    try:
        end = time.monotonic() + 90
        while not (m := re.search(r"ws://127\.0\.0\.1:(\d+)", log.read_text())) and time.monotonic() < end:
            time.sleep(0.2)
        assert m, log.read_text()[-3000:]
        client = FoxgloveClient(f"ws://127.0.0.1:{m.group(1)}")
        client.wait_channels({TOPICS[k] for k in ("poses", "veto", "status", "report", "scene")})
        client.subscribe([TOPICS["veto"], TOPICS["poses"], TOPICS["scene"], TOPICS["kinematics"]])
        for topic, _t, payload in client.messages(150.0):
            kinds.add(topic)
            if topic == TOPICS["veto"] and payload["veto"]:
                vetoes.append(payload)  # the Bool first, then again with the status's constraint and vehicles
                if payload["constraint"] is not None:
                    break
    finally:
        if client is not None:
            client.close()
        os.killpg(live.pid, signal.SIGINT)
        live.wait(timeout=120)
    assert vetoes, f"no veto on the Foxglove channel (got {sorted(kinds)}):\n{log.read_text()[-3000:]}"
    veto = vetoes[-1]
    assert veto["constraint"] == "min_separation" and set(near["uavs"]) <= set(veto["uavs"])
    assert near["t_start"] - 1.0 <= veto["t"] <= near["t_end"] + 1.0  # flight time
    assert {TOPICS["poses"], TOPICS["scene"], TOPICS["kinematics"]} <= kinds
