"""Frames of pose input, one rule for the live and the offline path.

REP 105 / nav_msgs/Odometry: the pose is in header.frame_id, the twist in child_frame_id. The twist is
rotated into the world (header) frame by the pose's orientation unless child_frame_id is empty or names
the header's frame (a publisher that already gives world-frame velocity). A zero quaternion (unset
orientation) counts as identity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Vec3 = tuple[float, float, float]


def twist_is_in_body_frame(child_frame_id: str, header_frame_id: str) -> bool:
    """True when an Odometry twist must be rotated by the orientation into the header's frame."""
    child = child_frame_id.strip("/")
    return bool(child) and child != header_frame_id.strip("/")


def rotate(q: Sequence[float], v: Sequence[float]) -> Vec3:
    """Rotate one vector v by the quaternion q (x, y, z, w; normalised here, zero = identity)."""
    qx, qy, qz, qw = (float(c) for c in q)
    n = (qx * qx + qy * qy + qz * qz + qw * qw) ** 0.5
    if n == 0.0:
        return float(v[0]), float(v[1]), float(v[2])
    qx, qy, qz, qw = qx / n, qy / n, qz / n, qw / n
    vx, vy, vz = (float(c) for c in v)
    # t = 2 q_vec x v ; v' = v + w t + q_vec x t
    tx, ty, tz = 2 * (qy * vz - qz * vy), 2 * (qz * vx - qx * vz), 2 * (qx * vy - qy * vx)
    return (vx + qw * tx + qy * tz - qz * ty, vy + qw * ty + qz * tx - qx * tz, vz + qw * tz + qx * ty - qy * tx)


def rotate_many(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """`rotate` for arrays: vectors v (n, 3) by quaternions q (n, 4, xyzw)."""
    norm = np.linalg.norm(q, axis=1, keepdims=True)
    q = np.where(norm > 0, q / np.where(norm > 0, norm, 1.0), np.array([0.0, 0.0, 0.0, 1.0]))
    u, w = q[:, :3], q[:, 3:4]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def odometry_velocity(child_frame_id: str, header_frame_id: str, q: Sequence[float], v: Sequence[float]) -> Vec3:
    """One Odometry message's linear velocity in the header's (world) frame."""
    if twist_is_in_body_frame(child_frame_id, header_frame_id):
        return rotate(q, v)
    return float(v[0]), float(v[1]), float(v[2])
