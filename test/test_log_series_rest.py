"""When the end of an autopilot log is a crash: the vehicle came to rest on its side (io.log_series.rest_on_side)."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.io.log_series import rest_on_side


def _flight(tail_roll: np.ndarray, seconds: float = 6.0, rate_hz: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Boot µs and (roll, pitch) in degrees: level flight, then `tail_roll` over the log's last samples."""
    t = np.arange(int(seconds * rate_hz)) / rate_hz * 1e6
    roll = np.zeros(len(t))
    roll[len(t) - len(tail_roll):] = tail_roll
    return t, np.column_stack([roll, np.zeros(len(t))])


def test_a_vehicle_that_tipped_over_and_lies_still_crashed():
    t, actual = _flight(np.full(25, 95.0))
    armed = np.ones(len(t), bool)
    at, words = rest_on_side(t / 1e6, actual, armed)
    assert at == 3.5 and words == "it came to rest on its side (95° tilt)"
    assert rest_on_side(t / 1e6, actual) is not None  # a log that does not say whether it was armed


def test_a_disarmed_vehicle_turned_by_hand_did_not_crash():
    """A real ArduCopter 3.2 tlog of a compass calibration: never armed, roll turning -35 -> -130 -> -126 deg over
    its last half second. Before, the last second past 60 deg of tilt made it 'crashed'."""
    tail = np.concatenate([np.linspace(-61.0, -108.0, 12), [-130.0, -128.0, -126.0]])
    t, actual = _flight(tail)
    t = t / 1e6
    assert rest_on_side(t, actual, np.zeros(len(t), bool)) is None  # never armed
    assert rest_on_side(t, actual, np.ones(len(t), bool)) is None  # armed, but still turning: held, not at rest
    still = _flight(np.full(15, -126.0))[1]
    assert rest_on_side(t, still, np.zeros(len(t), bool)) is None
    assert rest_on_side(t, still, np.ones(len(t), bool)) is not None


def test_a_vehicle_inverted_from_its_first_sample_did_not_crash_in_the_log():
    """A simulator's submarine lying inverted from boot (roll -179.9 deg throughout): no upright sample, no crash."""
    t = np.arange(60) / 10.0
    actual = np.column_stack([np.full(60, -179.9), np.zeros(60)])
    assert rest_on_side(t, actual, np.ones(60, bool)) is None
