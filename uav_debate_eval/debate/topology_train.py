"""Train the learned debate topology with PPO (stable-baselines3, the optional `train` extra) and export it to .npz.

python -m uav_debate_eval.debate.topology_train --seed 0 --steps 4096 --out uav_debate_eval/debate/topology_policy.npz

Environment: one episode is one mission segment of the built-in suite debated by the rules agents under the
complexity router (the multi-round segments, where a topology has rounds to shape); one step is one round after
the first. The observation is topology.observe (content-agnostic); the action is the edge-weight matrix (n x n in
[-1, 1], mapped to [0, 1]); the engine applies the dual threshold. Reward: per round, the budget loss
-mu * (weight on the edges of active agents) / (n (n - 1)); at the end, label correctness of the segment's panel
label against the truth + hazard identification (injected hazards of the segment covered by an endorsed finding)
+ final consensus - lambda * tokens / 1000. The debate runs in a worker thread that blocks on each decision, so
the real engine is what is trained on. The exported policy is the actor's mean action (tanh MLP, linear head),
evaluated by topology.Policy in numpy.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from uav_debate_eval.debate.topology import POLICY_FILE, action_to_weights, dual_threshold, obs_size


def _segment_truth(truth: list[Any], t0: float, t1: float) -> tuple[str, list[Any]]:
    from uav_debate_eval.debate.comparison import hazards

    found = [f for f in hazards(truth) if f.t_start <= t1 and f.t_end >= t0]
    label = "risky" if any(f.expect_constraint for f in found) else "borderline" if found else "safe"
    return label, found


def episodes(config: Any, seed: int = 0) -> list[dict]:
    """Segments of the built-in suite that the full topology debates for more than one round."""
    from uav_debate_eval.debate.comparison import build_contexts, parse_suite_entry
    from uav_debate_eval.debate.engine import run_debate
    from uav_debate_eval.debate.suite import DEFAULT_SUITE
    from uav_debate_eval.sim.scenarios import simulate

    out = []
    for entry in DEFAULT_SUITE:
        name, faults = parse_suite_entry(entry)
        sim = simulate(name, seed=seed, faults=list(faults))
        for ctx in build_contexts(sim.traj, sim.mission)[0]:
            full = run_debate([ctx], sim.mission, replace(config, topology="full"))
            if len(full.rounds) > 1:
                label, found = _segment_truth(sim.truth, ctx.t_start, ctx.t_end)
                out.append({"entry": entry, "ctx": ctx, "mission": sim.mission, "label": label, "hazards": found,
                            "full_tokens": sum(full.tokens().values())})
    return out


def make_env(config: Any, pool: list[dict], n: int, lam: float, mu: float) -> Any:
    import gymnasium as gym

    class TopologyEnv(gym.Env):
        """One segment per episode, one round per step; the engine runs in a thread and waits for each action."""

        def __init__(self) -> None:
            self.observation_space = gym.spaces.Box(0.0, 1.0, (obs_size(n),), np.float32)
            self.action_space = gym.spaces.Box(-1.0, 1.0, (n * n,), np.float32)
            self.log: list[dict] = []

        def _decide(self, obs: np.ndarray) -> np.ndarray:
            self._out.put(("obs", obs))
            return action_to_weights(self._in.get(), n)

        def _run(self, ep: dict) -> None:
            from uav_debate_eval.debate.engine import run_debate

            try:
                res = run_debate([ep["ctx"]], ep["mission"], replace(config, topology="learned"),
                                 decide=self._decide)
                self._out.put(("done", res))
            except Exception as exc:  # surfaced in step(), never swallowed
                self._out.put(("error", exc))

        def _next(self) -> tuple[str, Any]:
            kind, value = self._out.get()
            if kind == "error":
                raise value
            return kind, value

        def reset(self, seed: int | None = None, options: dict | None = None):
            super().reset(seed=seed)
            self._ep = pool[int(self.np_random.integers(len(pool)))]
            self._in: queue.Queue = queue.Queue()
            self._out: queue.Queue = queue.Queue()
            self._return = 0.0
            threading.Thread(target=self._run, args=(self._ep,), daemon=True).start()
            kind, value = self._next()
            if kind != "obs":  # every pooled segment has a second round; guard anyway
                raise RuntimeError(f"{self._ep['entry']}: the debate ended before its first decision")
            return value, {}

        def step(self, action: np.ndarray):
            plan = dual_threshold(action_to_weights(action, n), 0.5)
            active = np.array(plan.active, dtype=float)
            off = ~np.eye(n, dtype=bool)
            w = action_to_weights(action, n)
            reward = -mu * float((w * active[:, None])[off].sum()) / (n * (n - 1))
            self._in.put(np.asarray(action))
            kind, value = self._next()
            if kind == "obs":
                self._return += reward
                return value, reward, False, False, {}
            reward += self._final(value)
            self._return += reward
            tokens = sum(value.tokens().values())
            self.log.append({"entry": self._ep["entry"], "segment": self._ep["ctx"].segment_id,
                             "reward": round(self._return, 4), "tokens": tokens,
                             "full_tokens": self._ep["full_tokens"], "rounds": len(value.rounds)})
            return np.zeros(obs_size(n), np.float32), reward, True, False, {}

        def _final(self, res: Any) -> float:
            from uav_debate_eval.debate.comparison import hazards_chosen

            seg = res.segments[0]
            label = float(seg.panel_label == self._ep["label"])
            found = self._ep["hazards"]
            hazard = hazards_chosen(res, found)[0] / len(found) if found else 1.0
            agree = seg.rounds[-1].consensus.get("overall", 0.0) if seg.rounds else 0.0
            return label + hazard + agree - lam * sum(res.tokens().values()) / 1000.0

    return TopologyEnv()


def export(model: Any, path: Path, n: int, theta_v: float) -> None:
    """The actor (policy MLP + action head) as plain arrays for topology.Policy."""
    import torch

    linears = [m for m in model.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    linears.append(model.policy.action_net)
    arrays: dict[str, Any] = {"n_layers": np.array(len(linears)), "n_agents": np.array(n), "theta_v": np.array(theta_v)}
    for i, lin in enumerate(linears):
        arrays[f"w{i}"] = lin.weight.detach().cpu().numpy().astype(np.float64)
        arrays[f"b{i}"] = lin.bias.detach().cpu().numpy().astype(np.float64)
    np.savez_compressed(path, **arrays)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=4096, help="PPO timesteps (debate rounds)")
    ap.add_argument("--lam", type=float, default=0.1, help="token cost per 1000 tokens")
    ap.add_argument("--mu", type=float, default=0.2, help="budget loss on active edges")
    ap.add_argument("--out", default=str(POLICY_FILE))
    ap.add_argument("--curve", default="topology_training_curve.json", help="reward and tokens per episode")
    args = ap.parse_args(argv)

    import torch
    from stable_baselines3 import PPO

    from uav_debate_eval.debate.config import DebateConfig

    torch.set_num_threads(1)
    config = DebateConfig(router="complexity")
    n = 3
    t0 = time.perf_counter()
    pool = episodes(config)
    env = make_env(config, pool, n, args.lam, args.mu)
    model = PPO("MlpPolicy", env, seed=args.seed, n_steps=256, batch_size=64, n_epochs=5, learning_rate=3e-3,
                gamma=0.95, policy_kwargs={"net_arch": {"pi": [16], "vf": [16]}}, verbose=0)
    model.learn(total_timesteps=args.steps)
    export(model, Path(args.out), n, 0.5)
    elapsed = time.perf_counter() - t0
    log = env.log
    Path(args.curve).write_text(json.dumps({"seed": args.seed, "steps": args.steps, "seconds": elapsed,
                                            "pool": len(pool), "episodes": log}, indent=1), encoding="utf-8")
    k = max(1, len(log) // 10)
    print(f"{len(pool)} segments, {len(log)} episodes, {args.steps} steps in {elapsed:.0f} s; wrote {args.out}")
    print("episodes   mean reward   mean tokens   (full topology on the same segments)")
    for i in range(0, len(log), k):
        chunk = log[i:i + k]
        print(f"{i + 1:>4}-{i + len(chunk):<5} {np.mean([e['reward'] for e in chunk]):>12.3f} "
              f"{np.mean([e['tokens'] for e in chunk]):>13.0f}   ({np.mean([e['full_tokens'] for e in chunk]):.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
