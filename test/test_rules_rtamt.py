"""rtamt (the optional `test` extra) is the oracle: random formulas of the §2a subset on random traces give the
robustness rtamt's discrete-time offline monitor gives, to 1e-9 at every step, for every column at once."""

import numpy as np
import pytest

from uav_debate_eval.rules.evaluator import Evaluator
from uav_debate_eval.stl.syntax import Arith, Binary, Compare, Logic, Not, Num, Signal, Temporal, parse_formula

rtamt = pytest.importorskip("rtamt", reason="rtamt (pip install -e .[test]) is the oracle of this test")

SIGNALS = ("x", "y", "z")


def random_expr(rng, depth):
    roll = rng.integers(0, 5 if depth > 0 else 2)
    if roll == 0:
        return Signal(str(rng.choice(SIGNALS)))
    if roll == 1:
        return Num(float(np.round(rng.uniform(0, 3), 2)))
    if roll == 2:
        return Arith("abs", random_expr(rng, depth - 1))
    if roll == 3:
        return Arith("*", Num(float(np.round(rng.uniform(0, 3), 1))), random_expr(rng, depth - 1))
    return Arith(str(rng.choice(["+", "-"])), random_expr(rng, depth - 1), random_expr(rng, depth - 1))


def random_bound(rng):
    if rng.random() < 0.25:
        return 0.0, None
    lo = int(rng.integers(0, 4))
    return float(lo), float(lo + rng.integers(0, 6))


def random_formula(rng, depth):
    if depth == 0 or rng.random() < 0.2:
        return Compare(str(rng.choice(["<", "<=", ">", ">="])), random_expr(rng, 1), random_expr(rng, 1))
    roll = rng.integers(0, 4)
    if roll == 0:
        return Not(random_formula(rng, depth - 1))
    if roll == 1:
        return Logic(str(rng.choice(["and", "or", "->"])), random_formula(rng, depth - 1),
                     random_formula(rng, depth - 1))
    if roll == 2:
        lo, hi = random_bound(rng)
        return Temporal(str(rng.choice(["always", "eventually", "historically", "once"])), lo, hi,
                        random_formula(rng, depth - 1))
    lo, hi = random_bound(rng)
    return Binary(str(rng.choice(["until", "since"])), lo, hi, random_formula(rng, depth - 1),
                  random_formula(rng, depth - 1))


def rtamt_text(node) -> str:
    """rtamt's spelling, fully parenthesised, bounds as whole steps (dt = 1 s)."""
    if isinstance(node, Num):
        return repr(node.value)
    if isinstance(node, Signal):
        return node.name
    if isinstance(node, Arith):
        if node.op == "abs":
            return f"abs({rtamt_text(node.left)})"
        return f"({rtamt_text(node.left)} {node.op} {rtamt_text(node.right)})"
    if isinstance(node, Compare | Logic):
        return f"({rtamt_text(node.left)} {node.op} {rtamt_text(node.right)})"
    if isinstance(node, Not):
        return f"(not {rtamt_text(node.arg)})"
    bound = "" if node.hi is None else f"[{int(node.lo)},{int(node.hi)}]"
    if isinstance(node, Temporal):
        return f"({node.op}{bound}({rtamt_text(node.arg)}))"
    return f"({rtamt_text(node.left)} {node.op}{bound} {rtamt_text(node.right)})"


def oracle(text: str, columns: dict[str, np.ndarray]) -> np.ndarray:
    spec = rtamt.StlDiscreteTimeOfflineSpecification()
    for name in SIGNALS:
        spec.declare_var(name, "float")
    spec.spec = text
    spec.set_sampling_period(1, "s", 0.1)
    spec.parse()
    T = len(columns["x"])
    out = spec.evaluate({"time": list(range(T)), **{k: v.tolist() for k, v in columns.items()}})
    return np.array([v for _, v in out], dtype=float)


def ours(formula, trace: dict[str, np.ndarray]) -> np.ndarray:
    T, K = trace["x"].shape
    return Evaluator(lambda name: (trace[name], None), (T, K), 1.0).rob(formula)


def assert_same(a: np.ndarray, b: np.ndarray, text: str) -> None:
    assert np.array_equal(np.isposinf(a), np.isposinf(b)) and np.array_equal(np.isneginf(a), np.isneginf(b)), text
    finite = np.isfinite(b)
    assert np.allclose(a[finite], b[finite], rtol=0, atol=1e-9), text


def test_random_formulas_match_rtamt_at_every_step():
    rng = np.random.default_rng(2026)
    for case in range(250):
        formula = random_formula(rng, int(rng.integers(1, 4)))
        text = rtamt_text(formula)
        T, K = int(rng.integers(2, 25)), 3  # rtamt needs two samples
        trace = {name: np.round(rng.normal(0, 2, size=(T, K)), 3) for name in SIGNALS}
        mine = ours(formula, trace)
        for k in range(K):
            assert_same(mine[:, k], oracle(text, {n: v[:, k] for n, v in trace.items()}), f"case {case}: {text}")
        # our own parser reads rtamt's spelling to the same formula
        assert ours(parse_formula(text), trace).tobytes() == mine.tobytes(), text


@pytest.mark.parametrize("text,expected", [
    ("always[1,2](x >= 0)", [-2, -2, 0.5, -1, -1, np.inf]),
    ("(x >= 0) until[1,2] (y >= 0)", [2, 1, -2, 3, 0, -np.inf]),
    ("(x >= 0) since[0,1] (y >= 0)", [0, 2, 1, 1, 3, 0]),
])
def test_hand_worked_cases_agree_with_rtamt(text, expected):
    trace = {"x": np.array([3.0, 1.0, -2.0, 4.0, 0.5, -1.0]), "y": np.array([0.0, 2.0, 1.0, -1.0, 3.0, 0.0]),
             "z": np.zeros(6)}
    assert_same(oracle(text, trace), np.array(expected, dtype=float), text)
    assert_same(ours(parse_formula(text), {k: v[:, None] for k, v in trace.items()})[:, 0], np.array(expected), text)
