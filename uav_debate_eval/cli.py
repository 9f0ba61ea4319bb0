"""`uav-debate-eval`: one entry point, one sub-command module per job in uav_debate_eval.commands.

Each command module has `register(subparsers)` that adds its parser and sets `func(args) -> int`.
Bad input raises InputError: one line on stderr and exit status 2 (CONTRACT.md §4).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from uav_debate_eval import __version__
from uav_debate_eval.core import numeric_env
from uav_debate_eval.core.errors import InputError

#: Sub-command modules, in the order `--help` lists them.
COMMANDS = ("simulate", "evaluate", "dsl", "metrics", "live", "compare", "compare_flights")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uav-debate-eval",
        description="Evaluate UAV swarm flights: safety veto, trajectory DSL, LLM expert panel.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"uav_debate_eval.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"uav_debate_eval.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


numeric_env.apply()  # before any command imports numpy (each imports it lazily)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"uav-debate-eval {args.command}: error: {printable(str(exc).strip())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def printable(text: str) -> str:
    """`text` on one line: control characters escaped (a damaged log's bytes quoted in a reader's message)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def console() -> None:
    """The command line's entry point: main(), then exit without the garbage collector walking every object of a
    finished run (~0.1 s at the end of a large evaluation; the memory goes back with the process)."""
    import gc

    code = main()
    gc.disable()
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console()
