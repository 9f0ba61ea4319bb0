"""One REP 105 rule for Odometry twists, live and offline: rotate from child_frame_id unless it is empty or
the header's frame; the per-message and the array rotation agree."""

import numpy as np
import pytest

from uav_debate_eval.core.frames import odometry_velocity, rotate, rotate_many, twist_is_in_body_frame

YAW90 = (0.0, 0.0, np.sqrt(0.5), np.sqrt(0.5))


@pytest.mark.parametrize(("child", "header", "body"), [
    ("uav1/base_link", "map", True), ("base_link", "odom", True), ("", "map", False), ("map", "map", False),
    ("/map", "map", False), ("uav1", "", True)])
def test_twist_frame_rule(child, header, body):
    assert twist_is_in_body_frame(child, header) is body


def test_odometry_velocity_rotates_only_a_body_frame_twist():
    assert odometry_velocity("base_link", "map", YAW90, (1.0, 0.0, 0.5)) == pytest.approx((0.0, 1.0, 0.5))
    # world-frame twist (child = header frame): an orientation does not turn it
    assert odometry_velocity("map", "map", YAW90, (1.0, 0.0, 0.5)) == (1.0, 0.0, 0.5)
    assert odometry_velocity("base_link", "map", (0.0, 0.0, 0.0, 0.0), (1.0, 2.0, 3.0)) == (1.0, 2.0, 3.0)


def test_scalar_and_array_rotation_agree():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(50, 4)) * rng.uniform(0.1, 3.0, size=(50, 1))  # not normalised on purpose
    v = rng.normal(size=(50, 3))
    many = rotate_many(q, v)
    assert np.allclose(many, [rotate(qi, vi) for qi, vi in zip(q, v, strict=True)])
    assert np.allclose(np.linalg.norm(many, axis=1), np.linalg.norm(v, axis=1))
