"""Vehicle poses from a TF tree, one rule offline (a bag's /tf in order) and live (each message as it comes).

A transform into a world frame (map -> odom, earth -> map, map -> uav1/odom) links two frames and is held at its
latest value; a transform from a world frame to any other frame is a pose of the vehicle its child names, carried
up the links to the root (REP 105's map -> odom -> base_link: base_link in map; `odom` is no vehicle). A pose whose
tree stops below a top frame (at odom, or at a vehicle's own uav1/odom) waits up to LINK_WAIT_S for the link above
it, so the first poses are not left in odom while the rest are in map (a 5-m step between two poses read as
250 m/s); without a link by then the vehicle stays in its own frame.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uav_debate_eval.io.rosbag.topics import WORLD_FRAMES, frame_vehicle

#: How long (s of receive time) a vehicle's first poses wait for the link above their frame.
LINK_WAIT_S = 1.0


class TfPoses:
    """The poses of one TF topic's vehicles (`poses` per message, then `flush` at the end of a recording)."""

    def __init__(self, topic: str):
        self.topic = topic
        self.links: dict[str, tuple[str, np.ndarray, Any]] = {}  # child -> (parent, translation, rotation)
        self.roots: dict[str, str] = {}  # vehicle -> the root frame its poses are in
        self.linked: set[str] = set()  # the links a pose went through, for the note
        self._first: dict[str, float] = {}  # vehicle -> stamp of its first pose
        self._settled: set[str] = set()  # vehicles whose poses no longer wait
        self._waiting: dict[str, list[Any]] = {}  # vehicle -> its poses waiting for a link

    def poses(self, transforms: Any, received_s: float) -> list[tuple[Any, str, tuple, tuple]]:
        """(transform, vehicle, position, quaternion xyzw) of each vehicle pose that is ready after one message
        received at `received_s` (the poses that waited for a link come with the first one that does not)."""
        worlds = worlds_of(self.topic, transforms)
        top = worlds - {"odom"}
        vehicles = []
        for tr in transforms:
            parent, child = tr.header.frame_id.strip("/"), tr.child_frame_id.strip("/")
            if not (parent in worlds or _world_like(parent)):
                continue
            if _world_like(child):
                tv, q = tr.transform.translation, tr.transform.rotation
                self.links[child] = (parent, np.array([tv.x, tv.y, tv.z]), _rotation((q.x, q.y, q.z, q.w)))
            else:
                vehicles.append(tr)
        out: list[tuple[Any, str, tuple, tuple]] = []
        for tr in vehicles:
            uav = frame_vehicle(tr.child_frame_id)
            first = self._first.setdefault(uav, received_s)
            if uav not in self._settled and self._root(tr) not in top and received_s - first < LINK_WAIT_S:
                self._waiting.setdefault(uav, []).append(tr)
                continue
            self._settled.add(uav)
            out += [self._pose(w, uav) for w in self._waiting.pop(uav, [])] + [self._pose(tr, uav)]
        return out

    def flush(self) -> list[tuple[Any, str, tuple, tuple]]:
        """The poses still waiting when the recording ends, in the frame their tree reaches."""
        out = [self._pose(tr, uav) for uav, waiting in self._waiting.items() for tr in waiting]
        self._waiting.clear()
        return out

    def _up(self, frame: str) -> list[str]:
        """The linked frames from `frame` up (a loop in the links ends the walk)."""
        chain: list[str] = []
        while frame in self.links and frame not in chain:
            chain.append(frame)
            frame = self.links[frame][0]
        return chain

    def _root(self, tr: Any) -> str:
        frame = tr.header.frame_id.strip("/")
        chain = self._up(frame)
        return self.links[chain[-1]][0] if chain else frame

    def _pose(self, tr: Any, uav: str) -> tuple[Any, str, tuple, tuple]:
        tv, q = tr.transform.translation, tr.transform.rotation
        frame = tr.header.frame_id.strip("/")
        p, quat = (tv.x, tv.y, tv.z), (q.x, q.y, q.z, q.w)
        chain = self._up(frame)
        if chain:
            pos, rot = np.asarray(p, dtype=float), _rotation(quat)
            for link_frame in chain:
                frame, offset, link = self.links[link_frame]
                pos, rot = offset + link.apply(pos), link * rot
            self.linked.update(chain)
            p, quat = tuple(pos.tolist()), tuple(rot.as_quat().tolist())
        self.roots[uav] = frame
        return tr, uav, p, quat


def worlds_of(topic: str, transforms: Any) -> set[str]:
    """The world frames of one message: the usual names, and Gazebo's world (by topic, or the message's root)."""
    worlds = set(WORLD_FRAMES)
    gz_world = _gazebo_world(topic)
    if gz_world is not None:
        children = {tr.child_frame_id.strip("/") for tr in transforms}
        worlds |= {gz_world} if gz_world else {tr.header.frame_id.strip("/") for tr in transforms} - children
    return worlds


def _gazebo_world(topic: str) -> str | None:
    """`/world/<w>/...` -> <w>; `/model/<name>/pose` -> "" (the world is the message's root frame); else None."""
    parts = [p for p in topic.split("/") if p]
    if len(parts) >= 3 and parts[0] == "world":
        return parts[1]
    if len(parts) >= 3 and parts[0] == "model" and parts[-1] == "pose":
        return ""
    return None


def _world_like(frame: str) -> bool:
    """map, odom, world, ... and a vehicle's own (uav1/odom)."""
    return frame.rsplit("/", 1)[-1] in WORLD_FRAMES


def _rotation(q: tuple) -> Any:
    from scipy.spatial.transform import Rotation

    return Rotation.from_quat(q) if any(q) else Rotation.identity()  # an unset rotation (all zero) is none
