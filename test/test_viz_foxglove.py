"""The Foxglove view without ROS: a WebSocket client on loopback sees the advertised channels, the scene,
the plots' series and the veto going true with its constraint and vehicles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from foxglove_client import FoxgloveClient

from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.live.veto_history import VetoEvidence
from uav_debate_eval.viz.foxglove_live import LiveView
from uav_debate_eval.viz.scene import TOPICS

ROOT = Path(__file__).resolve().parents[1]
MISSION = parse_mission("name: t\nconstraints: {min_separation_m: 0.5, max_speed_mps: 3.0, "
                        "geofence: {min: [-10, -10, 0], max: [10, 10, 5]}}\n", "t.yaml")


def test_live_view_serves_every_channel_and_the_veto(tmp_path: Path):
    view = LiveView(MISSION, port=0)
    client = FoxgloveClient(f"ws://127.0.0.1:{view.port}")
    try:
        client.wait_channels(set(TOPICS.values()))
        client.subscribe([TOPICS["veto"], TOPICS["kinematics"], TOPICS["scene"], TOPICS["verdict"]])
        got: dict[str, object] = {}
        for _ in range(100):  # the subscription takes effect asynchronously: publish until all four arrived
            for k in range(5):
                view.on_pose("a", 100.0 + k * 0.1, (0.0, 0.0, 2.0), (1.0, 0.0, 0.0))
                view.on_pose("b", 100.0 + k * 0.1, (0.4, 0.0, 2.0), (0.0, 2.0, 0.0))
            view.tick()
            view.on_veto(True, [VetoEvidence("safety/min_separation", 2, "violated by a, b",
                                             {"uavs": "a,b", "value": 0.4, "limit": 0.5, "t": 100.3})])
            view.on_report({"verdict": {"label": "risky", "vetoed": True, "summary": "near miss"}, "violations": [
                {"constraint": "min_separation", "t_start": 0.3, "t_end": 0.4, "uavs": ["a", "b"]}],
                "live": {"segment": {"id": "S1", "t_start": 0.0, "t_end": 0.4}}})
            for topic, _t, payload in client.messages(0.2):
                got.setdefault(topic, payload)
            if len(got) == 4:
                break
    finally:
        client.close()
        view.close()
    veto = got[TOPICS["veto"]]
    assert veto["veto"] is True and veto["constraint"] == "min_separation" and veto["uavs"] == ["a", "b"]
    assert veto["value"] == 0.4 and veto["limit"] == 0.5 and veto["t"] == pytest.approx(0.3)
    kin = got[TOPICS["kinematics"]]
    assert kin["min_separation"] == pytest.approx(0.4) and kin["speeds"] == {"a": 1.0, "b": 2.0}
    assert kin["max_speed"] == 2.0 and kin["max_speed_limit"] == 3.0
    assert isinstance(got[TOPICS["scene"]], bytes) and len(got[TOPICS["scene"]]) > 100  # protobuf SceneUpdate
    verdict = got[TOPICS["verdict"]]
    assert verdict["label"] == "risky" and verdict["findings"][0]["sentence"] == "min_separation a, b"


def test_layout_shows_the_views_channels():
    layout = json.loads((ROOT / "config" / "foxglove_layout.json").read_text())
    text = json.dumps(layout["configById"])
    for name in ("scene", "veto", "verdict", "kinematics", "status", "annotations"):
        assert TOPICS[name] in text, name


def test_scene_pairs_by_margin_and_every_part_drawn():
    import numpy as np

    from uav_debate_eval.viz.scene import closest_pairs, margin_level, scene

    assert [margin_level(d, 0.5) for d in (0.4, 0.5, 1.0, 1.01)] == ["red", "amber", "amber", "green"]
    pos = np.array([[0.0, 0.0, 2.0], [0.4, 0.0, 2.0], [5.0, 0.0, 2.0], [1.2, 0.0, 2.0]])
    pairs = closest_pairs(pos, 0.5)  # within 3 x 0.5 m, nearest first
    assert [(i, j, level) for i, j, _d, level in pairs] == [(0, 1, "red"), (1, 3, "amber"), (0, 3, "green")]
    assert pairs[0][2] == 0.4 and len(closest_pairs(pos[:1], 0.5)) == 0
    latest = {u: (1.0, *p, 0.0, 0.0, 0.0) for u, p in zip("abcd", pos.tolist(), strict=True)}
    plain = scene(1_000_000_000, latest, {}, MISSION).encode()
    full = scene(1_000_000_000, latest, {"a": [(-1.0, 0.0, 2.0), (0.0, 0.0, 2.0)]}, MISSION, vetoed=["a"],
                 cpa=[((0.0, 0.0, 2.0), (0.4, 0.0, 2.0))]).encode()
    assert len(full) > len(plain) > 200  # trails and CPA lines add to the protobuf SceneUpdate


def test_a_show_scale_scene_labels_and_trails_only_the_vehicles_that_matter():
    """Past DETAIL_MAX_VEHICLES every vehicle keeps its sphere, but only those in the veto, in a drawn close pair or
    at a CPA warning's ends carry a label and a trail (1,024 labels and trails were most of the 50 s an MCAP export
    of 1,024 vehicles x 120 s took, and 670 of its 817 MB); a smaller swarm is labelled and trailed whole."""
    import numpy as np

    from uav_debate_eval.viz.scene import DETAIL_MAX_VEHICLES, scene

    def names_drawn(n: int, **kw) -> set[str]:
        names = [f"v{k:04d}x" for k in range(n)]  # no name inside another
        grid = np.array([[3.0 * (k % 40), 3.0 * (k // 40), 10.0] for k in range(n)])
        grid[7] = grid[6] + [0.3, 0.0, 0.0]  # one close pair: v0006x, v0007x
        latest = {u: (1.0, *p, 0.0, 0.0, 0.0) for u, p in zip(names, grid.tolist(), strict=True)}
        trails = {u: [tuple(p), tuple(p)] for u, p in zip(names, grid.tolist(), strict=True)}
        cpa = [(latest[names[20]][1:4], latest[names[21]][1:4])]
        encoded = scene(1_000_000_000, latest, trails, MISSION, cpa=cpa, **kw).encode()
        return {u for u in names if u.encode() in encoded}

    big = names_drawn(DETAIL_MAX_VEHICLES + 1, vetoed=["v0050x"])
    assert big == {"v0006x", "v0007x", "v0020x", "v0021x", "v0050x"}
    assert len(names_drawn(DETAIL_MAX_VEHICLES)) == DETAIL_MAX_VEHICLES
