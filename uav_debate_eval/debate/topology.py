"""Who talks to whom in a round (RUMAD-style topology control): edge weights, the dual threshold, the policy.

The communication graph of a round is a weight matrix W (n x n): W[i, j] is how much agent i listens to agent j,
W[i, i] its self-weight. The dual threshold turns it into the round's plan:
- activation: an agent whose mean incoming weight (row i without the diagonal) is below its self-weight sits the
  round out and keeps its previous answer (no call, no tokens);
- visibility: an active agent sees the previous answer of neighbour j only when W[i, j] > theta_v.
Topologies: `full` (everyone active, everyone visible), `sparse` (a fixed ring: each agent sees the previous one),
`learned` (a small MLP policy maps a content-agnostic observation of the last round to W; trained with PPO by
benchmarks/train_topology.py, shipped as a .npz and evaluated here in numpy, with no training extra).
The first round of a segment has no previous answers: every agent answers it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uav_debate_eval.core.errors import InputError

TOPOLOGIES = ("full", "sparse", "learned")
POLICY_FILE = Path(__file__).with_name("topology_policy.npz")
LABEL_INDEX = {"safe": 0, "borderline": 1, "risky": 2}


@dataclass
class Plan:
    """One round's graph after the dual threshold."""

    weights: np.ndarray
    active: list[bool]
    visible: list[list[int]]  # per agent: the neighbours whose previous answer it sees

    def to_dict(self) -> dict:
        return {"weights": np.round(self.weights, 3).tolist(), "active": list(self.active),
                "visible": [list(v) for v in self.visible]}


def dual_threshold(weights: np.ndarray, theta_v: float) -> Plan:
    """Activation (mean incoming weight >= self-weight) and visibility (weight > theta_v) of a weight matrix."""
    w = np.asarray(weights, dtype=float)
    n = w.shape[0]
    if n == 1:
        return Plan(w, [True], [[]])
    off = ~np.eye(n, dtype=bool)
    incoming = np.array([w[i, off[i]].mean() for i in range(n)])
    active = [bool(incoming[i] >= w[i, i]) for i in range(n)]
    visible = [[j for j in range(n) if j != i and w[i, j] > theta_v] for i in range(n)]
    return Plan(w, active, visible)


def _jaccard(a: set, b: set) -> float:
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def _choices(r: Any) -> set:
    return {(c["id"], c["stance"]) for c in getattr(r, "choices", []) or []}


def observe(current: list[Any], previous: list[Any] | None, tokens_used: int, token_budget: int, round_index: int,
            max_rounds: int, layer: int) -> np.ndarray:
    """The content-agnostic observation of a round (never the text), for n agents:
    [agreement, confidence spread, flip share, tokens spent / budget, round / max rounds, layer / 3,
     upper triangle of the choice-similarity matrix, per agent: confidence, flipped, agrees with the majority]."""
    n = len(current)
    labels = [r.assessment for r in current]
    majority = max(set(labels), key=labels.count)
    agrees = np.array([x == majority for x in labels], dtype=float)
    conf = np.array([float(r.confidence) for r in current])
    flips = np.array([float(previous is not None and p is not None and p.assessment != r.assessment)
                      for r, p in zip(current, previous or [None] * n, strict=True)])
    sim = [_jaccard(_choices(current[i]), _choices(current[j])) for i in range(n) for j in range(i + 1, n)]
    head = [agrees.mean(), float(conf.std()), flips.mean(), min(1.0, tokens_used / max(token_budget, 1)),
            min(1.0, round_index / max(max_rounds, 1)), layer / 3.0]
    return np.concatenate([head, sim, conf, flips, agrees]).astype(np.float32)


def obs_size(n: int) -> int:
    return 6 + n * (n - 1) // 2 + 3 * n


class Policy:
    """The trained MLP (tanh hidden layers, linear head) in numpy: observation -> W in [0, 1]^(n x n)."""

    def __init__(self, layers: list[tuple[np.ndarray, np.ndarray]], n_agents: int, theta_v: float):
        self.layers, self.n_agents, self.theta_v = layers, n_agents, theta_v

    @classmethod
    def load(cls, path: str | Path = POLICY_FILE) -> Policy:
        try:
            data = np.load(path)
        except OSError as exc:
            raise InputError(f"{path}: cannot read topology policy: {exc}") from None
        k = int(data["n_layers"])
        layers = [(data[f"w{i}"], data[f"b{i}"]) for i in range(k)]
        return cls(layers, int(data["n_agents"]), float(data["theta_v"]))

    def weights(self, obs: np.ndarray) -> np.ndarray:
        h = np.asarray(obs, dtype=np.float64)
        for i, (w, b) in enumerate(self.layers):
            h = w @ h + b
            if i < len(self.layers) - 1:
                h = np.tanh(h)
        return action_to_weights(h, self.n_agents)


def action_to_weights(action: np.ndarray, n: int) -> np.ndarray:
    """A policy action in [-1, 1]^(n*n) -> edge weights in [0, 1]."""
    return (np.clip(np.asarray(action, dtype=float), -1.0, 1.0).reshape(n, n) + 1.0) / 2.0


class Controller:
    """Plans every round of a segment for one topology; `decide` may be replaced (training drives it)."""

    def __init__(self, topology: str, n: int, theta_v: float = 0.5, policy: Policy | None = None,
                 decide: Any = None):
        if topology not in TOPOLOGIES:
            raise InputError(f"debate.topology: must be one of {', '.join(TOPOLOGIES)}, got {topology!r}")
        self.topology, self.n, self.theta_v = topology, n, theta_v
        self.policy = policy
        if topology == "learned" and decide is None and n > 1:
            self.policy = policy or Policy.load()
            if self.policy.n_agents != n:
                raise InputError(f"debate.topology learned: the policy was trained for {self.policy.n_agents} "
                                 f"agents, the panel has {n}")
            self.theta_v = self.policy.theta_v
        self.decide = decide

    def plan(self, obs: np.ndarray | None) -> Plan:
        n = self.n
        if obs is None or n == 1 or self.topology == "full":
            return dual_threshold(np.ones((n, n)), self.theta_v)
        if self.topology == "sparse":  # a ring: agent i listens to agent i - 1 and to itself a little less
            w = np.full((n, n), 0.0)
            for i in range(n):
                w[i, (i - 1) % n] = 1.0
            np.fill_diagonal(w, 1.0 / max(n - 1, 1) - 1e-9)
            return dual_threshold(w, self.theta_v)
        if self.decide is not None:
            w = self.decide(obs)
        else:
            assert self.policy is not None  # a learned topology always loads its policy
            w = self.policy.weights(obs)
        return dual_threshold(w, self.theta_v)
