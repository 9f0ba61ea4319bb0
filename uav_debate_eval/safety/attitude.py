"""Loss of control (constraint `attitude_control`, CONTRACT.md §2): roll or pitch further from the autopilot's own
attitude target than `max_attitude_error_deg` for longer than `attitude_error_hold_s`.

Targets are compared only while the vehicle is armed in a mode that controls attitude: disarmed, the target
follows the attitude; in ACRO or MANUAL there is no attitude target to miss.
"""

from __future__ import annotations

import numpy as np

from uav_debate_eval.core.records import Violation
from uav_debate_eval.io.ardupilot_log import true_runs


def attitude_violations(attitude: dict[str, tuple], limit_deg: float, hold_s: float
                        ) -> tuple[list[tuple[Violation, float]], float | None]:
    """(violations with the time control is regained, the worst error seen while controlled)."""
    out: list[tuple[Violation, float]] = []
    worst: float | None = None
    for u, (t, actual, target, controlled) in sorted(attitude.items()):
        err = np.abs((actual - target + 180.0) % 360.0 - 180.0)  # wrapped, per axis
        worst_axis = err.max(axis=1)
        if controlled.any():
            w = float(worst_axis[controlled].max())
            worst = w if worst is None else max(worst, w)
        for a, b in true_runs((worst_axis > limit_deg) & controlled):
            if t[b] - t[a] < hold_s:
                continue
            k = a + int(np.argmax(worst_axis[a:b + 1]))
            axis = int(np.argmax(err[k]))
            name = ("roll", "pitch")[axis]
            detail = (f"{u} lost attitude control at {t[a]:.1f} s: {name} {actual[k, axis]:.0f}° against its "
                      f"{target[k, axis]:.0f}° target ({err[k, axis]:.0f}° off) for {t[b] - t[a]:.1f} s")
            v = Violation("attitude_control", float(t[a]), float(t[b]), [u], float(err[k, axis]), limit_deg,
                          detail, b - a + 1)
            out.append((v, float(t[b])))
    return out, worst

