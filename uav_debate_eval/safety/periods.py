"""Each live vehicle's typical interval between samples, and the bursts it reveals: two samples a fraction of the
period apart were stamped on delivery (a motion-capture client), so the step between them was measured over a
period, not over the few microseconds between their stamps (`quality.updates` takes such steps over a baseline
offline)."""

from __future__ import annotations

import numpy as np

from uav_debate_eval.quality.updates import BURST_FRACTION

#: The weight of a new interval in a slot's period; an interval counts at most twice the period, so a silence does
#: not make the next intervals look like bursts.
PERIOD_GAIN = 0.1


class SlotPeriods:
    """The period per monitor slot (0: no interval seen yet)."""

    def __init__(self) -> None:
        self.period = np.zeros(0)

    def grow(self, extra: int) -> None:
        self.period = np.concatenate([self.period, np.zeros(extra)])

    def interval(self, k: int, dt: float) -> float:
        """The interval one slot's step (`dt` > 0 after the last sample) was measured over: `dt`, which updates the
        period, or the period for a burst (its later pose was measured a period after the earlier one)."""
        p = float(self.period[k])
        if dt < BURST_FRACTION * p:
            return p
        self.period[k] = (1 - PERIOD_GAIN) * p + PERIOD_GAIN * min(dt, 2 * p) if p else dt
        return dt

    def intervals(self, k: np.ndarray, dt: np.ndarray, moved: np.ndarray) -> np.ndarray:
        """`interval` of many slots at once (rows not `moved` are returned as they are)."""
        p = self.period[k]
        burst = moved & (dt < BURST_FRACTION * p)
        steady = moved & ~burst
        if steady.any():
            ps, d = p[steady], dt[steady]
            self.period[k[steady]] = np.where(ps > 0, (1 - PERIOD_GAIN) * ps + PERIOD_GAIN * np.minimum(d, 2 * ps), d)
        return np.where(burst, p, dt) if burst.any() else dt
