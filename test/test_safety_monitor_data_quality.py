"""Live veto and data quality (CONTRACT.md §3b): the veto acts on a one-frame jump as on anything it sees, and the
status names the jump apart, so an operator can tell a glitch from a hazard; smooth motion raises no such name."""

from safety_support import box_mission

from uav_debate_eval.safety.monitor import SafetyMonitor
from uav_debate_eval.safety.status import ERROR, WARN, status_rows

LIMITS = {"min_separation": 0.5, "max_speed": 3.0, "max_vertical_speed": 2.0, "geofence": 0.0, "stale_data": 0.5}


def _fly(monitor: SafetyMonitor, xs: list[float], dt: float = 0.0125):
    state = None
    for i, x in enumerate(xs):
        t = i * dt
        monitor.observe("cf1", (t, x, 0.0, 1.0))
        monitor.observe("cf2", (t, 0.0, 3.0, 1.0))
        state = monitor.update(t)
    return state


def test_a_one_frame_jump_vetoes_and_is_named_a_data_quality_fault():
    xs = [0.01 * i for i in range(40)]
    xs[-1] = xs[-2] + 0.81  # a motion-capture swap: 0.81 m in 12.5 ms
    state = _fly(SafetyMonitor(box_mission()), xs)
    assert state.veto  # conservative: it acts on what it sees
    speed = next(a for a in state.active if a["constraint"] == "max_speed")
    assert speed["uavs"] == ["cf1"] and speed["data_quality"] == "position_jump"
    assert state.data_quality == [{"kind": "position_jump", "uavs": ["cf1"], "t": state.t, "limit": 15.0}]
    rows = {r.name: r for r in status_rows(state, LIMITS, {})}
    speed_row = rows["safety/max_speed"]
    assert speed_row.level == ERROR and speed_row.values["data_quality"] == "position_jump"
    dq = rows["safety/data_quality/position_jump"]
    assert dq.level == WARN and dq.values["uavs"] == "cf1" and "glitch" in dq.message


def test_a_real_overspeed_is_not_called_a_glitch():
    xs = [0.01 * i for i in range(40)] + [0.39 + 0.05 * i for i in range(1, 40)]  # 4 m/s, smooth
    state = _fly(SafetyMonitor(box_mission()), xs)
    speed = next(a for a in state.active if a["constraint"] == "max_speed")
    assert speed["value"] > 3.0 and "data_quality" not in speed and state.data_quality == []
    assert not any(r.name.startswith("safety/data_quality") for r in status_rows(state, LIMITS, {}))
