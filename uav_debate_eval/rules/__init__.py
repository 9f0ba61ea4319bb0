"""Mission rules in Signal Temporal Logic (CONTRACT.md §2a), ROS-free: the formula language (syntax), the rules a
mission states (spec), the flight's signals on the common grid (signals), the vectorised robustness (evaluator), the
offline check with its report entries (check) and the online monitor for the live verifier (monitor).

Names load on first use (PEP 562): the mission loader imports only the syntax and the spec.
"""

from importlib import import_module

_EXPORTS = {
    "FormulaError": "syntax", "parse_formula": "syntax",
    "Rule": "spec", "make_rule": "spec",
    "RuleResult": "check", "check_rules": "check",
    "RuleMonitor": "monitor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
