"""When the end of an autopilot log is a crash: the vehicle came to rest on its side (io.log_series.rest_on_side)."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.io.log_series import rest_on_side


def _flight(tail_roll: np.ndarray, seconds: float = 6.0, rate_hz: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Boot µs (the readers' clock) and (roll, pitch) in degrees: level flight, then `tail_roll` over the log's last
    samples."""
    t = np.arange(int(seconds * rate_hz)) / rate_hz * 1e6
    roll = np.zeros(len(t))
    roll[len(t) - len(tail_roll):] = tail_roll
    return t, np.column_stack([roll, np.zeros(len(t))])


def test_a_vehicle_that_tipped_over_and_lies_still_crashed():
    t, actual = _flight(np.full(25, 95.0))
    armed = np.ones(len(t), bool)
    at, words = rest_on_side(t, actual, armed)
    assert at == 3.5e6 and words == "it came to rest on its side (95° tilt)"
    assert rest_on_side(t, actual) is not None  # a log that does not say whether it was armed


def test_a_disarmed_vehicle_turned_by_hand_did_not_crash():
    """A real ArduCopter 3.2 tlog of a compass calibration: never armed, roll turning -35 -> -130 -> -126 deg over
    its last half second. Before, the last second past 60 deg of tilt made it 'crashed'."""
    tail = np.concatenate([np.linspace(-61.0, -108.0, 12), [-130.0, -128.0, -126.0]])
    t, actual = _flight(tail)
    assert rest_on_side(t, actual, np.zeros(len(t), bool)) is None  # never armed
    assert rest_on_side(t, actual, np.ones(len(t), bool)) is None  # armed, but still turning: held, not at rest
    still = _flight(np.full(15, -126.0))[1]
    assert rest_on_side(t, still, np.zeros(len(t), bool)) is None
    assert rest_on_side(t, still, np.ones(len(t), bool)) is not None


def test_a_vehicle_inverted_from_its_first_sample_did_not_crash_in_the_log():
    """A simulator's submarine lying inverted from boot (roll -179.9 deg throughout): no upright sample, no crash."""
    t = np.arange(60) * 1e5
    actual = np.column_stack([np.full(60, -179.9), np.zeros(60)])
    assert rest_on_side(t, actual, np.ones(60, bool)) is None


def test_the_rules_are_in_the_readers_clock_and_an_inverted_vehicle_lies_still():
    """The readers give boot microseconds: the '1 s at rest' and 'still over the last second' rules had compared
    them with 1.0 (a vehicle tipped for its last 20 ms was 'crashed', the stillness window one sample). A vehicle at
    rest upside down reads roll across +-180 deg: still, not turning."""
    t = np.arange(100) * 10_000.0  # 100 Hz
    tipped = np.zeros((100, 2))
    tipped[-2:, 0] = 80.0  # tipped over for the last 20 ms: not at rest, but cut as it fell (a real autotune crash)
    assert rest_on_side(t, tipped, np.ones(100, bool)) == (980_000.0, "its log stops as it tips over (80° tilt)")
    assert rest_on_side(t, tipped, np.arange(100) < 90) is None  # disarmed by then: put down on its side
    t = np.arange(300) * 10_000.0
    inverted = np.zeros((300, 2))
    inverted[:, 0] = np.where(np.arange(300) < 20, 0.0, np.where(np.arange(300) % 2, 179.6, -179.7))
    at, words = rest_on_side(t, inverted, np.ones(300, bool))
    assert at == 200_000.0 and "180° tilt" in words
