"""MAVROS pairing: a vehicle's measured velocity replaces the derived one (world frame before body frame), and
global position fixes put several vehicles' local frames into one world frame."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from uav_debate_eval.core.arming import first_and_changes, landed_state
from uav_debate_eval.core.frames import rotate_many
from uav_debate_eval.io.mavros_fixes import fix_offsets, placed_note, track_at, valid_fix, velocity_at
from uav_debate_eval.io.rosbag.columns import Columns, stamped_messages
from uav_debate_eval.io.rosbag.topics import EXTENDED_STATE, STATE, TF_STATIC, TWIST

if TYPE_CHECKING:
    from rosbags.highlevel import AnyReader

    from uav_debate_eval.io.rosbag.raw_messages import Raw


#: mavros_msgs' State and ExtendedState as shipped (uav_debate_eval/msgs/mavros_msgs): ROS 2's type store has none.
MSG_DIR = Path(__file__).resolve().parent.parent.parent / "msgs" / "mavros_msgs" / "msg"
STATE_MSG = MSG_DIR / "State.msg"


def shipped_types() -> dict:
    """The shipped mavros_msgs types for a rosbags type store (a bag's own definitions take precedence)."""
    from rosbags.typesys import get_types_from_msg

    return {**get_types_from_msg(STATE_MSG.read_text(), STATE),
            **get_types_from_msg((MSG_DIR / "ExtendedState.msg").read_text(), EXTENDED_STATE)}


def apply_companions(reader: AnyReader, companions: dict[str, str], types: dict[str, str], raws: dict[str, Raw],
                     cols: Columns, notes: list[str]) -> None:
    """Measured velocity replaces derived velocity (local beats body); a local frame's first global fix is kept
    for `place_by_fix`; the state's arming and the extended state's landing for the flight's events
    (safety.parked)."""
    for comp, topic in sorted(companions.items(), key=lambda kv: "velocity_body" in kv[0]):
        if comp == TF_STATIC:
            continue
        raw = raws.get(comp)
        if topic not in cols.block_of or raw is None or not len(raw):
            continue
        if types[comp] not in reader.typestore.fielddefs:  # no definition in the bag or here: the poses alone
            notes.append(f"{comp}: {types[comp]} has no definition in the bag; not read")
            continue
        k, uav = cols.block_of[topic]
        meta = cols.meta[uav]
        msgs, header, t, keep = stamped_messages(reader, raw, types[comp], comp, notes)
        t = t[keep]
        msgs = [m for m, ok in zip(msgs, keep, strict=True) if ok]
        if len(t) < 2:
            continue
        if types[comp] == STATE:
            meta.arming = first_and_changes(t, [bool(m.armed) for m in msgs])
        elif types[comp] == EXTENDED_STATE:  # on the ground or not; undefined says nothing
            known = [(at, state) for at, m in zip(t, msgs, strict=True)
                     if (state := landed_state(m.landed_state)) is not None]
            meta.landing = first_and_changes([at for at, _ in known], [state for _, state in known])
        elif types[comp] == TWIST:
            if meta.velocity:
                continue
            vel = velocity_at(cols.t[k], t, np.array([(m.twist.linear.x, m.twist.linear.y, m.twist.linear.z)
                                                      for m in msgs]))
            if comp.endswith("velocity_body") or (comp.endswith("/velocity") and _body_frame(msgs[0])):
                vel = rotate_many(cols.quat[k], vel)
            cols.vel[k] = vel
            meta.velocity = comp
            notes.append(f"{uav}: velocity measured by {comp}")
        elif meta.frame == "local":
            fix = np.array([(m.latitude, m.longitude, m.altitude) for m in msgs])
            ok = [valid_fix(*row) for row in fix.tolist()]
            if any(ok):
                first = ok.index(True)
                meta.fix = (float(t[first]), fix[first])


def place_by_fix(cols: Columns, notes: list[str]) -> None:
    """Put every local frame with a global fix into the first such vehicle's local frame (the world frame)."""
    fixed = {u: (k, fix) for k, u in cols.block_of.values() if (fix := cols.meta[u].fix) is not None}
    if len(fixed) < 2:
        return
    anchor = next(iter(fixed))  # the first pose topic (topics are read in sorted order), as live (io.mavros_fixes)
    offsets = fix_offsets(anchor, {u: fix for u, (_, fix) in fixed.items()},
                          lambda u, t: track_at(cols.t[fixed[u][0]], cols.pos[fixed[u][0]], t))
    for u, (k, _) in fixed.items():
        cols.pos[k] = cols.pos[k] + offsets[u]
        cols.meta[u].frame = ""
        notes.append(placed_note(u, anchor, offsets[u]))


#: The frame ids of a body-frame twist (MAVROS 0.28's `local_position/velocity`: `base_link`; `fcu`, `base_link_frd`).
BODY_FRAMES = ("base_link", "base_link_frd", "fcu")


def _body_frame(msg: Any) -> bool:
    """Whether a TwistStamped is in the vehicle's body frame, by its header's frame id."""
    return str(getattr(getattr(msg, "header", None), "frame_id", "")).strip("/") in BODY_FRAMES
