"""The per-pose separation pre-check reads neighbouring cells only, and finds exactly what the full comparison finds."""

import math

import numpy as np
import pytest

from uav_debate_eval.core.mission import Constraints, Mission
from uav_debate_eval.safety.monitor import SafetyMonitor
from uav_debate_eval.safety.near_index import CellIndex


def test_cells_find_exactly_the_points_within_the_radius():
    rng = np.random.default_rng(7)
    index = CellIndex(1.0)
    pts = rng.uniform(-3, 3, size=(400, 3))
    for k, p in enumerate(pts.tolist()):
        index.move(k, *p)
    for k in range(0, 400, 3):  # move a third of them, some across cells
        pts[k] += rng.normal(0, 0.4, 3)
        index.move(k, *pts[k].tolist())
    index.move(5, math.nan, 0.0, 0.0)  # not a position: out of the index
    index.remove(6)
    assert len(index) == 398
    for q in rng.uniform(-3, 3, size=(200, 3)):
        d = np.linalg.norm(pts - q, axis=1)
        expected = {k for k in np.flatnonzero(d < 0.5).tolist() if k not in (5, 6, 11)}
        assert set(index.within(*q.tolist(), 0.5, skip=11)) == expected


def test_a_radius_beyond_the_cell_is_refused():
    with pytest.raises(ValueError, match="exceeds half the cell side"):
        list(CellIndex(1.0).within(0.0, 0.0, 0.0, 0.6))


def test_pre_check_equals_the_full_comparison_on_a_moving_swarm():
    """A 10 x 10 grid 1 m apart with jitter, observed pose by pose: the pre-check says 'too close' exactly when some
    other stored vehicle is within the limit (the O(N) comparison it replaces), also after the dict form."""
    limit = 0.6
    mon = SafetyMonitor(Mission(constraints=Constraints(min_separation_m=limit)))
    rng = np.random.default_rng(3)
    names = [f"uav{k}" for k in range(100)]
    base = np.array([[k % 10, k // 10, 5.0] for k in range(100)], dtype=float)
    pos = base.copy()
    mon.update(0.0, {u: (0.0, *p) for u, p in zip(names, pos.tolist(), strict=True)})
    said, truth = [], []
    for step in range(1, 30):
        t = step * 0.1
        for k in rng.permutation(100).tolist():
            p = base[k] + rng.normal(0, 0.25, 3)
            others = np.delete(pos, k, axis=0)
            truth.append(bool((np.linalg.norm(others - p, axis=1) < limit).any()))
            said.append(mon.would_violate(names[k], (t, *p.tolist())))
            mon.observe(names[k], (t, *p.tolist()))
            pos[k] = p
    assert said == truth
    assert 50 < sum(truth) < len(truth) - 50  # both answers were exercised
