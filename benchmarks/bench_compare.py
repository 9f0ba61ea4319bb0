"""MORE vs SAMRE on the built-in pairs (each scenario clean vs with its fault, both orders).

Per protocol: agreement of the panel's winner (before the verifier's override) and of the final winner with the
deterministic deltas (the flight without a hard-constraint violation, else the higher overall score; level within
0.01 is a tie), swap-audit consistency, tokens per comparison, rounds and stop reasons.

    python benchmarks/bench_compare.py                       # rules backend, every pair, both orders
    python benchmarks/bench_compare.py --backend local --pairs 2 --orders 1
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

from uav_debate_eval.compare_flights.flights import Flight
from uav_debate_eval.compare_flights.protocol import ProtocolConfig, compare_pair
from uav_debate_eval.runner.pipeline import evaluate
from uav_debate_eval.sim.scenarios import simulate

PAIRS = [("formation", "near_miss"), ("surveillance", "geofence_exit"), ("swap", "overspeed"),
         ("formation", "altitude_drop"), ("tracking", "sharp_turn"), ("surveillance", "telemetry_dropout")]
TARGETS = {"agreement": 1.0, "swap_consistency": 1.0}


def _flight(key: str, scenario: str, faults: list[str]) -> Flight:
    sim = simulate(scenario, seed=0, faults=faults)
    return Flight(key, [f"{scenario}:{','.join(faults) or 'clean'}"], [evaluate(sim.traj, sim.mission)])


def deterministic_winner(a: Flight, b: Flight) -> str:
    if a.vetoed != b.vetoed:
        return b.key if a.vetoed else a.key
    sa, sb = a.reports[0]["scores"]["overall"], b.reports[0]["scores"]["overall"]
    return "tie" if abs(sa - sb) < 0.01 else a.key if sa > sb else b.key


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="rules", choices=("rules", "local"))
    ap.add_argument("--pairs", type=int, default=len(PAIRS))
    ap.add_argument("--orders", type=int, default=2, choices=(1, 2))
    ap.add_argument("--protocols", nargs="+", default=["more", "samre"])
    args = ap.parse_args()
    backend = None
    if args.backend == "local":
        from uav_debate_eval.debate.llm.factory import LLMConfig, make_backend

        backend = make_backend(LLMConfig(backend="local"))
    cases = []
    for scenario, fault in PAIRS[: args.pairs]:
        clean, faulty = _flight("A", scenario, []), _flight("B", scenario, [fault])
        cases.append((f"{scenario}:{fault}", clean, faulty))
        if args.orders == 2:
            cases.append((f"{scenario}:{fault} (swapped)", Flight("A", faulty.inputs, faulty.runs),
                          Flight("B", clean.inputs, clean.runs)))
    print(f"backend {args.backend}, {len(cases)} comparisons per protocol")
    for proto in args.protocols:
        cfg = ProtocolConfig(protocol=proto, compact=args.backend == "local")
        rows, start = [], time.perf_counter()
        for name, a, b in cases:
            r = asyncio.run(compare_pair(a, b, cfg, backend))
            truth = deterministic_winner(a, b)
            rows.append((name, truth, r))
            print(f"  {proto:5s} {name:40s} truth {truth:3s} panel {r['panel_winner']:3s} final {r['winner']:3s} "
                  f"audit {'ok' if r['bias_audit']['consistent'] else 'SWAP'} rounds {r['rounds']} "
                  f"stop {r['stop_reason']:12s} tokens {r['tokens']['total']} failures {len(r['failures'])}")
        n = len(rows)
        panel = sum(r["panel_winner"] == t for _, t, r in rows) / n
        final = sum(r["winner"] == t for _, t, r in rows) / n
        swap = sum(r["bias_audit"]["consistent"] for _, _, r in rows) / n
        tokens = sum(r["tokens"]["total"] for _, _, r in rows) / n
        stops = Counter(r["stop_reason"] for _, _, r in rows)
        llm_judge = sum(r["judge"]["by"] == "llm" for _, _, r in rows)
        print(f"{proto}: agreement panel {panel:.2f} / final {final:.2f} (target {TARGETS['agreement']:.2f}); "
              f"swap consistency {swap:.2f} (target {TARGETS['swap_consistency']:.2f}); tokens/comparison "
              f"{tokens:.0f}{' (estimated)' if backend is None else ''}; stop reasons {dict(stops)}; "
              f"llm judge answered {llm_judge}/{n}; {time.perf_counter() - start:.1f} s")
    if backend is not None:
        asyncio.run(backend.aclose())


if __name__ == "__main__":
    main()
