"""Loss of control and crashes (constraint attitude_control, CONTRACT.md §2): a DataFlash log whose attitude
leaves the autopilot's own target, checked only armed and in a mode that controls attitude."""

from pathlib import Path

import numpy as np
import pytest
from ardupilot_logs import evaluate_log

from uav_debate_eval.core.mission_file import parse_mission
from uav_debate_eval.io.dataflash import read_dataflash
from uav_debate_eval.sim.dataflash import EKF2_FORMATS, GOOD_FLAGS, DataFlashWriter

STABILIZE, ACRO, EV_ARMED, EV_DISARMED = 0, 1, 10, 11


#: ArduPilot 4.x's STAT (written every ~0.2 s): whether the vehicle is armed, flying, crashed.
STAT_FORMAT = {"STAT": (90, "QbfBBBBBB", "TimeUS,isFlying,isFlyProb,Armed,Safety,Crash,Still,Stage,Hit")}


def write_flight(path: Path, lose_control: bool, crash: bool, acro: bool = False, disarmed_swing: bool = False,
                 stat_armed: bool | None = None) -> None:
    """A 40-s hover in STABILIZE; from 20 s roll swings up to 100° away from its 0° target for 3 s (lose_control);
    then the vehicle lies at 75° roll to the end (crash, with ERR CRASH_CHECK). `stat_armed`: no EV ARMED, STAT
    messages saying armed or not instead (a log whose firmware writes no arming event)."""
    w = DataFlashWriter(path, formats={**EKF2_FORMATS, **STAT_FORMAT})
    w.write("MSG", 0, "ArduCopter V3.4.6")
    w.write("PARM", 0, "AHRS_EKF_TYPE", 2, 2)
    if stat_armed is None:
        w.write("EV", 900_000, EV_ARMED)
    w.write("MODE", 1_000_000, ACRO if acro else STABILIZE, ACRO if acro else STABILIZE, 2)
    for i in range(400):
        t = 1_000_000 + 100_000 * i
        s = t / 1e6 - 1.0
        roll = 2.0
        if lose_control and 20.0 <= s < 23.0:
            roll = 30.0 + 70.0 * (s - 20.0) / 3.0
        if crash and s >= 23.0:
            roll = 75.0
        if disarmed_swing and s >= 30.0:
            roll = 90.0
        if crash and i == 231:
            w.write("ERR", t, 12, 1)
        if disarmed_swing and i == 290:
            w.write("EV", t, EV_DISARMED)
        w.write("NKF1", t, 0, 0, 0, 0, 0, 0, 0, 0, 0, -5.0, 0, 0, 0)
        w.write("NKF4", t, 0.1, 0.1, 0.1, 0.1, 0.1, 0.0, 0, 0, 0, 0, GOOD_FLAGS & 0xFFFF, 0, 0)
        w.write("ATT", t, 0.0, roll, 0.0, 1.0, 0, 0, 0, 0)
        if stat_armed is not None and i % 2 == 0:
            w.write("STAT", t, int(stat_armed), float(stat_armed), int(stat_armed), 2, 0, 0, 3, 0)
    w.close()


def test_reader_keeps_attitude_targets_and_crash(tmp_path):
    path = tmp_path / "crash.bin"
    write_flight(path, lose_control=True, crash=True)
    log = read_dataflash(path, "v")
    t, actual, target, controlled = log.attitude
    assert len(t) == 400 and controlled.all() and actual[-1, 0] == pytest.approx(75.0)
    (crash,) = [e for e in log.events if e.type == "crash"]
    assert "crash check" in crash.label and "came to rest on its side (75° tilt)" in crash.label
    assert not any(e.extra.get("subsystem") == "CRASH_CHECK" for e in log.events if e.type != "crash")


def run(tmp_path, name, **kw) -> tuple[int, dict]:
    path = tmp_path / f"{name}.bin"
    write_flight(path, **kw)
    return evaluate_log(path, tmp_path / name)


def test_loss_of_control_without_mission_is_a_violation_with_a_crash_finding(tmp_path):
    code, rep = run(tmp_path, "crash", lose_control=True, crash=True)
    assert code == 3 and rep["verdict"]["label"] == "risky"
    (v,) = [v for v in rep["violations"] if v["constraint"] == "attitude_control"]
    assert v["limit"] == pytest.approx(45.0)
    assert v["t_start"] == pytest.approx(20.7, abs=0.15)  # roll passes 45° at 20.64 s
    assert "lost attitude control" in v["detail"] and "against its 0° target" in v["detail"]
    crash = [f for f in rep["findings"] if f["kind"] == "crash"]
    assert crash and crash[0]["severity"] == "hazard" and "came to rest on its side" in crash[0]["sentence"]


def test_controlled_flight_holds_attitude_control(tmp_path):
    code, rep = run(tmp_path, "clean", lose_control=False, crash=False)
    assert code == 0 and not rep["violations"] and "attitude_control held" in rep["verdict"]["summary"]


@pytest.mark.parametrize("kw, exit_code", [({"acro": True}, 4), ({"disarmed_swing": True}, 0)])
def test_no_target_to_miss_in_acro_or_disarmed(tmp_path, kw, exit_code):
    """ACRO throughout: no attitude target, so nothing is checked (inconclusive); a swing after the disarm is no
    loss of control."""
    code, rep = run(tmp_path, "free", lose_control=kw.get("acro", False), crash=False, **kw)
    assert code == exit_code and not [v for v in rep["violations"] if v["constraint"] == "attitude_control"]


def test_mission_sets_the_attitude_limit():
    m = parse_mission("mission: {name: m}\nconstraints:\n  max_attitude_error_deg: 30\n  attitude_error_hold_s: 1.5\n")
    assert m.constraints.max_attitude_error_deg == 30 and m.constraints.attitude_error_hold_s == 1.5
    assert "attitude_control" in m.constraints.checked


def test_arming_from_stat_when_the_log_has_no_arming_event(tmp_path):
    """A real ArduPlane 4.5 SITL log never armed writes no EV ARMED/DISARMED, only STAT Armed 0: its attitude on the
    ground was checked as controlled flight (and a vehicle tipped over there would be a crash). STAT now says."""
    ground = tmp_path / "ground.bin"
    write_flight(ground, lose_control=True, crash=False, stat_armed=False)
    log = read_dataflash(ground, "v")
    arming = [(e.label, e.extra) for e in log.events if e.type == "autopilot_event"]
    assert arming == [("DISARMED", {"source": "STAT", "initial": True})]
    assert not log.attitude[3].any()  # never controlled: the 100° swing is no loss of control
    code, rep = evaluate_log(ground, tmp_path / "ground")
    assert not rep["violations"] and "attitude_control" not in rep["mission"]["constraints_checked"]
    assert code == 4  # no parameters, no mission: nothing left to check on the ground
    flying = tmp_path / "flying.bin"
    write_flight(flying, lose_control=True, crash=False, stat_armed=True)
    assert read_dataflash(flying, "v").attitude[3].all()  # armed from its first STAT on: checked as before
    code, rep = evaluate_log(flying, tmp_path / "flying")
    assert code == 3 and [v["constraint"] for v in rep["violations"]] == ["attitude_control"]


def test_the_arming_before_the_first_sample_is_the_state_the_flight_starts_in(tmp_path):
    """EV ARMED logged 0.1 s before the first estimator sample (a real ArduCopter 3.3 log: 2.8 ms before), or a
    telemetry log's first heartbeat before its first position: left out as 'before the flight', so a log never armed
    read as armed (its ground time checked, a real ArduSub tlog inconclusive) and the home fell back to the first
    sample. It is now the state at the flight's start."""
    from uav_debate_eval.core.arming import arming_changes, disarmed_at
    from uav_debate_eval.io.loader import load_inputs

    path = tmp_path / "armed_early.bin"
    write_flight(path, lose_control=False, crash=False, disarmed_swing=True)
    traj = load_inputs([path])
    arming = sorted((e.t, e.extra["label"], e.extra.get("initial"), e.extra.get("set_at"))
                    for e in traj.ingest.log_events if e.type == "autopilot_event")
    assert arming == [(0.0, "ARMED", True, pytest.approx(-0.1)), (pytest.approx(29.0), "DISARMED", None, None)]
    assert not any("entries before the flight's first sample left out" in n for n in traj.ingest.notes)
    [changes] = arming_changes(traj.ingest.log_events).values()
    assert disarmed_at(changes, np.array([0.0, 10.0, 30.0])).tolist() == [False, False, True]
