"""A telemetry log across reboots: the ground station records one session while the autopilot restarts (a parameter
change between two flights), so `time_boot_ms` starts again from zero inside the log. Each later boot's messages are
moved onto the first boot's clock through the log's own receive clock, which runs on across the reboot: the flights
follow one another with the reboot between them. Read on one boot clock, a later flight stamped from a few seconds
came before the earlier one, or the two were sorted into one another where their boot times overlapped."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.errors import InputError

#: The boot clock going back by more than this (ms) between two position messages received in order, to under half
#: its value: a reboot (a copy delayed on a second link goes back a little, not to near zero).
REBOOT_BACK_MS = 1000.0
#: More reboots than this in one log are two boot clocks interleaved: vehicles sharing a system id (SITL instances
#: all start as SYSID_THISMAV 1), whose positions would alternate in one track.
MAX_REBOOTS = 20


def rebase_boots(msgs: dict[str, list], source: str = "") -> int:
    """Move every later boot's `time_boot_ms` (in place) onto the first boot's clock; returns the reboots found.

    The boots are found on the position stream (LOCAL_POSITION_NED, else GLOBAL_POSITION_INT); each boot's offset to
    the receive clock is the median over its positions, and every message with a `time_boot_ms` goes to the boot whose
    offset places it nearest its own receive time (a heartbeat of the new boot received before its first position
    still goes to the new boot)."""
    stream = msgs.get("LOCAL_POSITION_NED") or msgs.get("GLOBAL_POSITION_INT") or []
    if len(stream) < 2:
        return 0
    boot_ms = np.array([m.time_boot_ms for m in stream], dtype=float)
    recv_ms = np.array([m._timestamp for m in stream]) * 1e3
    cuts = np.flatnonzero((np.diff(boot_ms) < -REBOOT_BACK_MS) & (boot_ms[1:] < 0.5 * boot_ms[:-1])) + 1
    if not len(cuts):
        return 0
    if len(cuts) > MAX_REBOOTS:
        raise InputError(f"{source}: system {stream[0].get_srcSystem()}: its boot clock goes back {len(cuts)} times "
                         f"among {len(stream)} positions: two autopilots with one system id (SYSID_THISMAV)? give "
                         "each vehicle its own")
    edges = np.concatenate([[0], cuts, [len(stream)]])
    offsets = np.array([np.median(recv_ms[a:b] - boot_ms[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)])
    for kind in msgs.values():
        if not kind or not hasattr(kind[0], "time_boot_ms"):
            continue
        boot = np.array([m.time_boot_ms for m in kind], dtype=float)
        recv = np.array([m._timestamp for m in kind]) * 1e3
        k = np.abs(recv[:, None] - boot[:, None] - offsets[None, :]).argmin(axis=1)
        for m, shift in zip(kind, (offsets[k] - offsets[0]).tolist(), strict=True):
            m.time_boot_ms = m.time_boot_ms + shift
    return len(cuts)
