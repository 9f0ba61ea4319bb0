"""Sub-commands of the `uav-debate-eval` CLI; each module exposes `register(subparsers)`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uav_debate_eval.runner.job import ReadOptions

#: The debate backends a command can pick with --llm.
LLM_BACKENDS = ("rules", "local", "openai")


def add_llm_options(parser, what: str) -> None:
    """--llm (default rules), --model and --base-url; `what` names the debate the backend runs."""
    parser.add_argument("--llm", default="rules", choices=LLM_BACKENDS,
                        help=f"{what} backend; rules is offline and deterministic (default)")
    parser.add_argument("--model", help="LLM model name (openai) or GGUF path (local)")
    parser.add_argument("--base-url", help="OpenAI-compatible server URL")


def add_read_options(parser: argparse.ArgumentParser) -> None:
    """--mission, --topics and --vehicles: how a flight is read (runner.job.ReadOptions), the same in every command."""
    parser.add_argument("--mission", help="mission YAML (default: the nearest mission.yaml: beside the input, then in "
                        "the folders above; else no constraint is checked)")
    parser.add_argument("--topics", nargs="+", metavar="T",
                        help="pose topics to read from bags (TOPIC or TOPIC=name, also comma-separated); "
                        "give INPUT first or end the list with --")
    parser.add_argument("--vehicles", metavar="REGEX",
                        help="which pose sources are vehicles (regex on the vehicle id or source topic/frame; "
                        "default: the mission's `vehicles:` globs, else every source)")


def read_options(args: argparse.Namespace) -> ReadOptions:
    """The ReadOptions of the arguments add_read_options declared."""
    from uav_debate_eval.runner.job import ReadOptions

    return ReadOptions(mission=args.mission, topics=tuple(args.topics or ()), vehicles=args.vehicles)
