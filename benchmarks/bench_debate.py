"""Debate cost and routing on the simulator's built-in suite, each figure next to the paper's target.

python benchmarks/bench_debate.py [--backend rules|local] [--scenarios ...]

- tokens per mission and per segment of each router layer (rules: estimated with dsl.tokens.count_tokens on the
  prompts and answers the agents would exchange; local/openai: the server's counts);
- rounds per layer, and the mean rounds per segment with the router + stopping rules vs a fixed 3-round debate
  (paper: 3 -> 1.4);
- share of simple segments (no violation in the segment, no injected hazard overlapping it) routed to L1
  (paper: ~65 %);
- wall time per mission;
- prompt tokens by part (role, header, dsl, metrics, safety, findings, valid_ids, previous, repair) over the suite,
  and the part of the prompts that is the per-round shared prefix a KV / prompt cache reuses;
- tokens per mission by call kind (agent answers, citation repairs, judge calls);
- the issue-23 target: at most 4.2k tokens per mission on average and no mission over 12k (rules estimated; local
  counted by the model's own tokenizer, without the disk cache); issue 13's was 8.4k.

--router / --topology / --full-prompts pick the setting (default: the default configuration).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

from uav_debate_eval.debate.comparison import DEFAULT_SUITE, build_contexts, hazards, parse_suite_entry
from uav_debate_eval.debate.engine import DebateConfig, run_debate
from uav_debate_eval.debate.router import segment_violations
from uav_debate_eval.sim.scenarios import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="rules", choices=("rules", "local", "openai"))
    ap.add_argument("--model")
    ap.add_argument("--scenarios", nargs="+", default=list(DEFAULT_SUITE))
    ap.add_argument("--router", choices=("sparse", "complexity"), default="sparse")
    ap.add_argument("--topology", choices=("full", "sparse", "learned"), default=DebateConfig().topology)
    ap.add_argument("--full-prompts", action="store_true", help="the prompts before issue 13 (no lean prompts)")
    ap.add_argument("--no-fixed", action="store_true",
                    help="skip the fixed 3-round reference debate (it doubles a local model's run time)")
    args = ap.parse_args()
    cfg = DebateConfig(backend=args.backend, model=args.model, router=args.router, topology=args.topology,
                       lean_prompts=not args.full_prompts)
    if args.backend != "rules":
        from uav_debate_eval.debate.llm.factory import LLMConfig

        # no disk cache: a hit counts 0 tokens, and the benchmark measures what a mission costs
        cfg = replace(cfg, llm=LLMConfig(backend=args.backend, model=args.model, use_cache=False))
    fixed = replace(cfg, router="complexity", topology="full", max_rounds={1: 3, 2: 3, 3: 3},
                    min_rounds={1: 3, 2: 3, 3: 3}, token_budget=10**9)
    parts: dict[str, int] = {}

    per_layer: dict[int, dict[str, list[float]]] = {k: {"tokens": [], "rounds": []} for k in (1, 2, 3)}
    mission_tokens, mission_time, simple_l1, simple_n, fixed_rounds, routed_rounds = [], [], 0, 0, [], []
    stops: dict[str, int] = {}
    calls: dict[str, list[int]] = {}  # call kind -> [calls, tokens]
    for entry in args.scenarios:
        name, faults = parse_suite_entry(entry)
        sim = simulate(name, faults=faults)
        contexts, _ = build_contexts(sim.traj, sim.mission)
        t0 = time.perf_counter()
        res = run_debate(contexts, sim.mission, cfg)
        mission_time.append(time.perf_counter() - t0)
        tok = res.tokens()
        mission_tokens.append(tok["prompt"] + tok["completion"])
        for k, v in {**res.token_parts(), "completion": tok["completion"]}.items():
            parts[k] = parts.get(k, 0) + v
        for row in res.transcript:
            if row.get("kind") in ("agent", "judge"):
                kind = "judge" if row["kind"] == "judge" else "repair" if row.get("attempt") else "agent"
                c = calls.setdefault(kind, [0, 0])
                c[0] += 1
                c[1] += row["prompt_tokens"] + row["completion_tokens"]
        for seg, ctx in zip(res.segments, contexts, strict=True):
            per_layer[seg.route.layer]["tokens"].append(seg.tokens["prompt"] + seg.tokens["completion"])
            per_layer[seg.route.layer]["rounds"].append(len(seg.rounds))
            routed_rounds.append(len(seg.rounds))
            stops[seg.stop_reason] = stops.get(seg.stop_reason, 0) + 1
            hazard = any(f.t_start <= seg.t_end and f.t_end >= seg.t_start for f in hazards(sim.truth))
            if not segment_violations(ctx.safety, seg.t_start, seg.t_end) and not hazard:
                simple_n += 1
                simple_l1 += seg.route.layer == 1
        if not args.no_fixed:
            fixed_rounds += [len(s.rounds) for s in run_debate(contexts, sim.mission, fixed).segments]
        print(f"{entry:<28} segments={len(contexts)} layers={[s.route.layer for s in res.segments]} "
              f"rounds={[len(s.rounds) for s in res.segments]} tokens={mission_tokens[-1]} "
              f"time={mission_time[-1]:.3f}s")

    est = " (estimated)" if args.backend == "rules" else ""
    print(f"\nbackend {res.backend} / {res.model}, {len(args.scenarios)} missions")
    mean_tokens = statistics.mean(mission_tokens)
    print(f"router {cfg.router}, topology {cfg.topology}, lean prompts {cfg.lean_prompts}")
    print(f"tokens per mission{est}: mean {mean_tokens:.0f}, max {max(mission_tokens)}  (target, issue 23: mean <= "
          f"4200 with rules, no flight over 12000: {'met' if mean_tokens <= 4200 else 'mean NOT met'}, "
          f"{'met' if max(mission_tokens) <= 12000 else 'max NOT met'})")
    cached = parts.pop("cache_reusable", 0)
    n = len(args.scenarios)
    print("tokens per mission by call kind: " + ", ".join(f"{k} {v[1] / n:.0f} ({v[0] / n:.1f} calls)"
                                                          for k, v in sorted(calls.items())))
    print("tokens per mission by part: " + ", ".join(f"{k} {v / n:.0f}" for k, v in parts.items()))
    print(f"  of the prompts, the shared per-round prefix reusable from a KV / prompt cache: {cached / n:.0f} per "
          f"mission -> processed tokens per mission {mean_tokens - cached / n:.0f}")
    for k, d in per_layer.items():
        if d["rounds"]:
            print(f"  L{k}: {len(d['rounds'])} segments, tokens/segment {statistics.mean(d['tokens']):.0f}, "
                  f"rounds/segment {statistics.mean(d['rounds']):.2f}")
    print(f"simple segments routed to L1: {simple_l1}/{simple_n} = {simple_l1 / max(simple_n, 1):.0%}  "
          "(target ~65 %)")
    fixed_mean = f"{statistics.mean(fixed_rounds):.2f}" if fixed_rounds else "(skipped)"
    print(f"mean rounds per segment: fixed 3-round debate {fixed_mean} -> router + stopping "
          f"{statistics.mean(routed_rounds):.2f}  (target 3 -> 1.4)")
    print(f"stop reasons: {dict(sorted(stops.items()))}")
    print(f"time per mission: mean {statistics.mean(mission_time):.3f} s, max {max(mission_time):.3f} s  "
          "(rules: offline, no target)")


if __name__ == "__main__":
    main()
