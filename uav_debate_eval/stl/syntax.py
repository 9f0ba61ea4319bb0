"""The mission rules' formula language (CONTRACT.md §2a): rtamt's discrete-time STL subset, parsed to a small AST.

Grammar, loosest first (`->` groups to the right, the others to the left):

    formula  := or ('->' formula)?
    or       := and ('or' and)*
    and      := binary ('and' binary)*
    binary   := unary (('until' | 'since') bound? unary)*
    unary    := 'not' unary | ('always' | 'eventually' | 'historically' | 'once') bound? unary
              | expr ('<' | '<=' | '>' | '>=') expr | '(' formula ')'
    expr     := term (('+' | '-') term)*
    term     := NUMBER '*' term | '-' term | NUMBER | SIGNAL | 'abs' '(' expr ')' | '(' expr ')'
    bound    := '[' NUMBER (',' | ':') NUMBER ']'      (seconds of flight time)

A parse error is a :class:`FormulaError` with the column (1-based) in the formula text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

KEYWORDS = {"not", "and", "or", "always", "eventually", "historically", "once", "until", "since", "abs"}
UNARY_TEMPORAL = ("always", "eventually", "historically", "once")
FUTURE = ("always", "eventually", "until")
COMPARISONS = ("<=", ">=", "<", ">")


class FormulaError(ValueError):
    """A formula that does not parse or names what its rule cannot read; `column` is 1-based."""

    def __init__(self, message: str, column: int):
        super().__init__(message)
        self.message, self.column = message, column


# --- the AST: expressions (numbers per step) and formulas (robustness per step) ---


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Signal:
    name: str  # e.g. "z", "separation", "a.vz"
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Arith:
    op: str  # "+", "-", "*" (a number times an expression), "neg", "abs"
    left: Expr
    right: Expr | None = None


Expr = Num | Signal | Arith


@dataclass(frozen=True)
class Compare:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not:
    arg: Formula


@dataclass(frozen=True)
class Logic:
    op: str  # "and", "or", "->"
    left: Formula
    right: Formula


@dataclass(frozen=True)
class Temporal:
    """always / eventually / historically / once over [lo, hi] seconds (hi None: unbounded, lo 0)."""

    op: str
    lo: float
    hi: float | None
    arg: Formula


@dataclass(frozen=True)
class Binary:
    """until / since over [lo, hi] seconds (hi None: unbounded)."""

    op: str
    lo: float
    hi: float | None
    left: Formula
    right: Formula


Formula = Compare | Not | Logic | Temporal | Binary

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)"
                    r"|(?P<op><=|>=|->|[<>()\[\],:+\-*]))")


@dataclass(frozen=True)
class _Tok:
    kind: str  # "num", "name", "kw", "op", "end"
    text: str
    column: int


def tokenize(text: str) -> list[_Tok]:
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            out.append(_Tok("end", "", pos + 1))
            return out
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FormulaError(f"unexpected character {text[pos]!r}", pos + 1)
        kind = m.lastgroup or "op"
        word = m.group(kind)
        col = m.start(kind) + 1
        out.append(_Tok("kw" if kind == "name" and word in KEYWORDS else kind, word, col))
        pos = m.end()


class _Parser:
    def __init__(self, text: str):
        self.toks = tokenize(text)
        self.i = 0

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self, text: str | None = None, kind: str | None = None) -> _Tok | None:
        t = self.tok
        if (text is None or t.text == text) and (kind is None or t.kind == kind) and t.kind != "end":
            self.i += 1
            return t
        return None

    def expect(self, text: str, what: str) -> _Tok:
        t = self.take(text)
        if t is None:
            raise self.error(f"expected {what}")
        return t

    def error(self, why: str) -> FormulaError:
        t = self.tok
        found = "the end of the formula" if t.kind == "end" else repr(t.text)
        return FormulaError(f"{why}, found {found}", t.column)

    def parse(self) -> Formula:
        f = self.formula()
        if self.tok.kind != "end":
            raise self.error("expected 'and', 'or', '->', 'until', 'since' or the end")
        return f

    def formula(self) -> Formula:
        left = self.disjunction()
        if self.take("->"):
            return Logic("->", left, self.formula())
        return left

    def disjunction(self) -> Formula:
        f = self.conjunction()
        while self.take("or"):
            f = Logic("or", f, self.conjunction())
        return f

    def conjunction(self) -> Formula:
        f = self.binary()
        while self.take("and"):
            f = Logic("and", f, self.binary())
        return f

    def binary(self) -> Formula:
        f = self.unary()
        while self.tok.text in ("until", "since"):
            op = self.take()
            assert op is not None
            lo, hi = self.bound(op.text)
            f = Binary(op.text, lo, hi, f, self.unary())
        return f

    def unary(self) -> Formula:
        if self.take("not"):
            return Not(self.unary())
        if self.tok.text in UNARY_TEMPORAL:
            op = self.take()
            assert op is not None
            lo, hi = self.bound(op.text)
            return Temporal(op.text, lo, hi, self.unary())
        if self.tok.text == "(":  # a parenthesised formula, or a comparison that starts with '('
            start = self.i
            try:
                return self.comparison()
            except FormulaError:
                self.i = start
            self.take("(")
            f = self.formula()
            self.expect(")", "')'")
            return f
        return self.comparison()

    def comparison(self) -> Compare:
        left = self.expr()
        op = self.tok.text if self.tok.kind == "op" else ""
        if op not in COMPARISONS:
            raise self.error("expected a comparison (<, <=, >, >=)")
        self.i += 1
        return Compare(op, left, self.expr())

    def bound(self, op: str) -> tuple[float, float | None]:
        if not self.take("["):
            return 0.0, None
        lo_tok = self.tok
        lo = self.number(f"the lower bound of {op}")
        if not (self.take(",") or self.take(":")):
            raise self.error("expected ',' between the bounds")
        hi = self.number(f"the upper bound of {op}")
        self.expect("]", "']'")
        if hi < lo:
            raise FormulaError(f"{op}[{lo:g}, {hi:g}]: the upper bound is below the lower bound", lo_tok.column)
        return lo, hi

    def number(self, what: str) -> float:
        t = self.take(kind="num")
        if t is None:
            raise self.error(f"expected a number for {what}")
        return float(t.text)

    def expr(self) -> Expr:
        e = self.term()
        while self.tok.text in ("+", "-") and self.tok.kind == "op":
            op = self.take()
            assert op is not None
            e = Arith(op.text, e, self.term())
        return e

    def term(self) -> Expr:
        if self.take("-"):
            return Arith("neg", self.term())
        t = self.tok
        if t.kind == "num":
            self.i += 1
            if self.take("*"):
                return Arith("*", Num(float(t.text)), self.term())
            return Num(float(t.text))
        if t.kind == "name":
            self.i += 1
            return Signal(t.text, t.column)
        if self.take("abs"):
            self.expect("(", "'(' after abs")
            e = self.expr()
            self.expect(")", "')'")
            return Arith("abs", e)
        if self.take("("):
            e = self.expr()
            self.expect(")", "')'")
            return e
        raise self.error("expected a signal, a number, abs(...) or '('")


def parse_formula(text: str) -> Formula:
    """The AST of one formula; FormulaError (with its column) when it does not parse."""
    return _Parser(text).parse()


def signals_of(node: Formula | Expr) -> list[Signal]:
    """Every signal a formula or expression reads, in order of appearance."""
    if isinstance(node, Signal):
        return [node]
    if isinstance(node, Num):
        return []
    if isinstance(node, Arith):
        return signals_of(node.left) + (signals_of(node.right) if node.right is not None else [])
    if isinstance(node, Compare):
        return signals_of(node.left) + signals_of(node.right)
    if isinstance(node, Not | Temporal):
        return signals_of(node.arg)
    return signals_of(node.left) + signals_of(node.right)


def constants_of(node: Formula | Expr) -> list[float]:
    """Every number a formula or expression compares with or adds (the scale of its thresholds)."""
    if isinstance(node, Num):
        return [node.value]
    if isinstance(node, Signal):
        return []
    if isinstance(node, Arith):
        if node.op == "*":  # the factor is a scale, not a threshold
            return constants_of(node.right) if node.right is not None else []
        return constants_of(node.left) + (constants_of(node.right) if node.right is not None else [])
    if isinstance(node, Not | Temporal):
        return constants_of(node.arg)
    return constants_of(node.left) + constants_of(node.right)


def future_horizon(node: Formula) -> float | None:
    """How far past a step the formula reads (seconds; None: to the end of the flight): the delay of a live decision."""
    if isinstance(node, Compare):
        return 0.0
    if isinstance(node, Not):
        return future_horizon(node.arg)
    if isinstance(node, Logic):
        a, b = future_horizon(node.left), future_horizon(node.right)
        return None if a is None or b is None else max(a, b)
    if isinstance(node, Temporal):
        inner = future_horizon(node.arg)
        if node.op in ("historically", "once"):
            return inner
        return None if inner is None or node.hi is None else node.hi + inner
    a, b = future_horizon(node.left), future_horizon(node.right)
    if a is None or b is None:
        return None
    if node.op == "since":
        return max(a, b)
    return None if node.hi is None else node.hi + max(a, b)


def to_text(node: Formula | Expr) -> str:
    """The formula written back, fully parenthesised (the same AST when parsed again)."""
    if isinstance(node, Num):
        return repr(node.value)
    if isinstance(node, Signal):
        return node.name
    if isinstance(node, Arith):
        if node.op == "abs":
            return f"abs({to_text(node.left)})"
        if node.op == "neg":
            return f"(-{to_text(node.left)})"
        assert node.right is not None
        return f"({to_text(node.left)} {node.op} {to_text(node.right)})"
    if isinstance(node, Compare):
        return f"({to_text(node.left)} {node.op} {to_text(node.right)})"
    if isinstance(node, Not):
        return f"(not {to_text(node.arg)})"
    if isinstance(node, Logic):
        return f"({to_text(node.left)} {node.op} {to_text(node.right)})"
    bound = "" if node.hi is None else f"[{node.lo!r}, {node.hi!r}]"
    if isinstance(node, Temporal):
        return f"({node.op}{bound} {to_text(node.arg)})"
    return f"({to_text(node.left)} {node.op}{bound} {to_text(node.right)})"
