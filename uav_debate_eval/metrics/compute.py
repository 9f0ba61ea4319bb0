"""Entry point: all metrics of a flight and the weighted category scores (paper: 0.35 / 0.40 / 0.25).

Category score = mean of its applicable metric scores (None when none applies). Overall =
sum(w_c * s_c) / sum(w_c) over the categories whose score is not None, with w_c from
mission.weights, so a single vehicle (coordination None) is scored on flight control and
safety with their weights renormalised.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uav_debate_eval.core.mission import Mission
from uav_debate_eval.core.trajectory import SwarmTrajectory
from uav_debate_eval.metrics.coordination import coordination
from uav_debate_eval.metrics.flight import flight_control
from uav_debate_eval.metrics.kinematics import smooth_tracks
from uav_debate_eval.metrics.safety_metrics import safety_details
from uav_debate_eval.metrics.scoring import mean_score
from uav_debate_eval.metrics.swarm import adopt_checker_pairs, close_approaches, separation, snapshots

CATEGORIES = ("flight_control", "coordination", "safety")


@dataclass
class MetricsResult:
    scores: dict[str, float | None]
    details: dict[str, dict[str, dict]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        def r(x):
            return None if x is None else float(x)

        return {
            "scores": {k: r(v) for k, v in self.scores.items()},
            "details": {
                cat: {m: {**d, "score": r(d["score"]), "value": r(d["value"])} for m, d in metrics.items()}
                for cat, metrics in self.details.items()
            },
        }


def run_checker(traj: SwarmTrajectory, mission: Mission, predict: bool = True, flight=None):
    """The deterministic safety checker's result, or None when the safety package is not installed; `flight`: the
    result of the flight `traj` is a window of (its grid steps are shared)."""
    try:
        from uav_debate_eval.safety.checker import check_trajectory
    except ModuleNotFoundError:
        return None
    return check_trajectory(traj, mission, predict=predict, flight=flight)


def overall(scores: dict[str, float | None], weights: dict[str, float]) -> float | None:
    """Weighted mean over the applicable categories (weights renormalised)."""
    parts = [(weights.get(c, 0.0), s) for c, s in scores.items() if c in CATEGORIES and s is not None]
    total = sum(w for w, _ in parts)
    return sum(w * s for w, s in parts) / total if total > 0 else None


def covers_same_span(safety, traj: SwarmTrajectory) -> bool:
    """Whether a SafetyResult was computed over (about) the same time span as `traj`.

    A whole-flight result passed with a segment window would score the segment with the flight's
    worst separation, violations and margins.
    """
    tol = 2.0 * (traj.sample_period or 0.1)
    t = safety.separation.t
    if len(t):
        return abs(float(t[0]) - traj.t_start) <= tol and abs(float(t[-1]) - traj.t_end) <= tol
    return all(v.t_start >= traj.t_start - tol and v.t_end <= traj.t_end + tol for v in safety.violations)


def compute_metrics(traj: SwarmTrajectory, mission: Mission, safety=None) -> MetricsResult:
    """Flight-control, coordination and safety metrics with documented formulas (see each module).

    `safety` is the checker's SafetyResult for this trajectory; when None, or when it covers a
    different time span (a whole-flight result with a segment window), the checker is run on `traj`.
    """
    if safety is None or not covers_same_span(safety, traj):  # the metrics read no predictive warning
        safety = run_checker(traj, mission, predict=False, flight=safety)
    kins = smooth_tracks(list(traj.tracks.values()))
    multi = len(traj.tracks) >= 2
    snap = snapshots(traj) if multi else None
    if snap is not None:
        adopt_checker_pairs(snap, safety)
    # close approaches first: for large swarms their per-step kd-trees also give the separation
    approaches = close_approaches(snap, mission.thresholds.proximity(mission.constraints)) if snap is not None else []
    sep = separation(snap) if snap is not None else None
    details: dict[str, dict[str, dict]] = {"flight_control": flight_control(kins)}
    safety_part = safety_details(traj, mission, sep, approaches, safety)
    details["coordination"] = coordination(traj, mission, snap) or {}  # last: see coordination()
    details["safety"] = safety_part
    scores: dict[str, float | None] = {c: mean_score(details[c]) for c in CATEGORIES}
    scores["overall"] = overall(scores, mission.weights)
    return MetricsResult(scores, details)
