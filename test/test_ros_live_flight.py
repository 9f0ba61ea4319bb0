"""One flight, one truth, over real DDS: `live --sim` plays a built-in formation flight (waypoints and formation
offsets in its mission) and writes the flight report; `evaluate` of the same simulated flight, and `evaluate` of
the MCAP `live` recorded, must agree with it. One live run per scenario (each is CPU-heavy), shared by the
assertions below through module fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from ros_domain import leased_domain
from test_ros_live import STALE_S, _NoAliases, run_live

from uav_debate_eval.cli import main
from uav_debate_eval.report.schema import validate_report

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: faults and flight length (s): the near miss needs 29 s of flight, the 2-s dropout starts at 6 s
SCENARIOS = {"near_miss": (["near_miss"], 30.0), "dropout": (["telemetry_dropout"], 20.0), "clean": ([], 20.0)}
#: Stream seconds per wall second: the flight report is `evaluate` of the poses taped (reliable QoS, none lost), so
#: the playback rate changes no value it is compared on.
SPEED = 2.0
SEVERE = ("hazard", "warning")


def _config(tmp: Path, faults: list[str], duration_s: float) -> tuple[Path, Path, object]:
    """Parameter file for `live --sim`, the mission file and the simulated flight itself (the same seed)."""
    from uav_debate_eval.core.mission_file import mission_to_yaml
    from uav_debate_eval.sim.scenarios import simulate

    sim = simulate("formation", seed=3, duration_s=duration_s, faults=faults)
    sim.mission.constraints.stale_timeout_s = STALE_S  # as test_ros_live: 2 shared cores
    mission = tmp / "mission.yaml"
    mission.write_text(mission_to_yaml(sim.mission))
    monitor = {"use_sim_time": True, "uav_names": list(sim.traj.uav_ids), "mission_file": str(mission),
               "pose_qos": "reliable"}
    cfg = {
        "swarm_sim": {"ros__parameters": {"scenario": "formation", "seed": 3, "duration_s": duration_s,
                                          "faults": faults, "speed": SPEED, "publish_clock": True,
                                          "start_delay_s": 2.0, "pose_qos": "reliable", "wait_for_subscribers": 1}},
        "safety_verifier": {"ros__parameters": dict(monitor)},
        "dsl_builder": {"ros__parameters": {**monitor, "segment_mode": "window", "window_s": duration_s / 2,
                                            "idle_flush_s": 2.0}},
        "debate_panel": {"ros__parameters": {**monitor, "llm_backend": "rules", "max_pending": 6}},
    }
    path = tmp / "live.yaml"
    path.write_text(yaml.dump(cfg, Dumper=_NoAliases))
    return path, mission, sim


def _fly(tmp: Path, faults: list[str], duration_s: float) -> SimpleNamespace:
    """`live --sim` to the end of the flight; then `evaluate` of the simulated flight and of the recorded MCAP."""
    config, mission, sim = _config(tmp, faults, duration_s)
    out, log = tmp / "out", tmp / "live.log"
    with leased_domain() as domain:
        rc = run_live(["--config", str(config), "--out", str(out), "--llm", "rules", "--sim", "--quiet"], domain, log)
    text = log.read_text()
    assert rc == 0 and (out / "flight" / "report.json").is_file(), text[-3000:]
    sim.write(tmp / "sim", formats=("csv",))
    main(["evaluate", str(tmp / "sim" / "trajectory.csv"), "--mission", str(mission), "--out", str(tmp / "offline"),
          "--quiet"])
    main(["evaluate", str(out / "flight" / "flight.mcap"), "--mission", str(mission), "--out", str(tmp / "replay"),
          "--quiet"])

    def read(folder: Path) -> dict:
        return json.loads((folder / "report.json").read_text())

    return SimpleNamespace(flight=read(out / "flight"), offline=read(tmp / "offline"), replay=read(tmp / "replay"),
                           where=out / "flight", log=text, sim=sim)


@pytest.fixture(scope="module", params=list(SCENARIOS))
def flown(request, tmp_path_factory):
    return _fly(tmp_path_factory.mktemp(request.param), *SCENARIOS[request.param])


def _severe(report: dict) -> set[tuple[str, tuple[str, ...]]]:
    return {(f["kind"], tuple(f["uavs"])) for f in report["findings"] if f["severity"] in SEVERE}


def test_the_flight_report_agrees_with_evaluate_of_the_same_flight(flown):
    flight, offline = flown.flight, flown.offline
    validate_report(flight)
    assert flight["verdict"]["label"] == offline["verdict"]["label"], flown.log[-2000:]
    period = offline["mission"]["sample_period_s"]
    assert [(v["constraint"], v["uavs"]) for v in flight["violations"]] == \
        [(v["constraint"], v["uavs"]) for v in offline["violations"]]
    for live_v, off_v in zip(flight["violations"], offline["violations"], strict=True):
        assert abs(live_v["t_start"] - off_v["t_start"]) <= period + 1e-6
        assert abs(live_v["t_end"] - off_v["t_end"]) <= period + 1e-6
    assert _severe(flight) == _severe(offline)


def test_no_waypoint_the_flight_reached_is_called_missed(flown):
    from uav_debate_eval.metrics.coordination import waypoint_status

    status = waypoint_status(flown.sim.traj, flown.sim.mission)
    all_reached = {u for u, s in status.items() if all(r for r, _ in s)}
    assert all_reached, "the scenario's route is flown"
    for report in [flown.flight, *_segment_reports(flown.where)]:  # the segments judge only what was due
        missed = {u for f in report["findings"] if f["kind"] == "waypoint_miss" for u in f["uavs"]}
        assert not missed & all_reached, f"{missed & all_reached} reached every waypoint of the whole flight"


def _segment_reports(flight_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(flight_dir.parent.glob("0000[0-9]_S*/report.json"))]


def test_the_flight_report_has_figures_the_live_record_and_a_header(flown):
    flight, where = flown.flight, flown.where
    assert sorted(p.name for p in (where / "figures").glob("*.png")), "no figures"
    live = flight["live"]
    assert [s["id"] for s in live["segments"]][:2] == ["S1", "S2"]
    assert live["tape"]["samples"] == flown.sim.traj.n_samples, "live played poses before it listened"
    assert live["session"]["topics"] == ["/swarm/safety/poses"], "a topic per vehicle: the verifier's relay is read"
    assert flight["inputs"][0].startswith("live ROS 2 session: 5 vehicles") and "/clock" in flight["inputs"][0]
    assert len(live["headline"]) >= len({v["constraint"] for v in flight["violations"]})
    html = (where / "report.html").read_text()
    assert "Inputs: n/a" not in html and f"report schema {flight['schema_version']}" in html and "0.1.0" in html
    if flight["violations"]:
        assert live["veto_episodes"], "the live veto was raised"
        assert flight["verdict"]["recommendations"]


def test_the_recorded_mcap_replays_to_the_flight_report(flown):
    flight, replay = flown.flight, flown.replay
    assert replay["verdict"]["label"] == flight["verdict"]["label"]
    assert replay["violations"] == flight["violations"]
    assert replay["findings"] == flight["findings"]
