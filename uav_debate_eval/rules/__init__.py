"""Mission rules in Signal Temporal Logic (CONTRACT.md §2a), ROS-free, evaluated: the flight's signals on the common
grid (signals), the vectorised robustness (evaluator), the interval bounds that prune pairs (bounds), the offline
check with its report entries (check) and the online monitor for the live verifier (streams, monitor). The formula
language itself (syntax, spec) is uav_debate_eval.stl, below core; this package sits above safety and quality.

Names load on first use (PEP 562).
"""

from importlib import import_module

_EXPORTS = {
    "FormulaError": "uav_debate_eval.stl.syntax", "parse_formula": "uav_debate_eval.stl.syntax",
    "Rule": "uav_debate_eval.stl.spec", "make_rule": "uav_debate_eval.stl.spec",
    "RuleResult": f"{__name__}.check", "check_rules": f"{__name__}.check",
    "RuleMonitor": f"{__name__}.monitor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
