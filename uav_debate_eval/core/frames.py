"""Frames of pose input, one rule for the live and the offline path.

REP 105 / nav_msgs/Odometry: the pose is in header.frame_id, the twist in child_frame_id. The twist is
rotated into the world (header) frame by the pose's orientation unless child_frame_id is empty or names
the header's frame (a publisher that already gives world-frame velocity). A zero quaternion (unset
orientation) counts as identity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


def yaw_matrix(yaw_deg: float) -> np.ndarray:
    """The rotation about z by `yaw_deg` (a local frame's heading in the world frame, mission `frames:`): apply as
    `points @ yaw_matrix(yaw).T`."""
    yaw = np.radians(yaw_deg)
    return np.array([[np.cos(yaw), -np.sin(yaw), 0.0], [np.sin(yaw), np.cos(yaw), 0.0], [0.0, 0.0, 1.0]])


class WorldPlacement:
    """Live poses of vehicles in local frames moved into the world frame by the mission's `frames:` origins (yaw,
    then translation: what the flight report's evaluation does to the same samples, quality.frames.place_frames)."""

    def __init__(self, origins: Mapping[str, Any]):
        """`origins`: vehicle -> core.mission.FrameOrigin."""
        self._frames = {u: (yaw_matrix(f.yaw_deg), np.asarray(f.origin, dtype=float)) for u, f in origins.items()}

    def __call__(self, uav: str, pos: Vec3, vel: Vec3 | None) -> tuple[Vec3, Vec3 | None]:
        """The pose in the world frame (a vehicle without an origin as it came)."""
        frame = self._frames.get(uav)
        if frame is None:
            return pos, vel
        rot, origin = frame
        x, y, z = (rot @ np.asarray(pos, dtype=float) + origin).tolist()
        if vel is None:
            return (x, y, z), None
        vx, vy, vz = (rot @ np.asarray(vel, dtype=float)).tolist()
        return (x, y, z), (vx, vy, vz)
