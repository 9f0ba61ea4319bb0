"""Sub-commands of the `uav-debate-eval` CLI; each module exposes `register(subparsers)`."""

#: The debate backends a command can pick with --llm.
LLM_BACKENDS = ("rules", "local", "openai")


def add_llm_options(parser, what: str) -> None:
    """--llm (default rules), --model and --base-url; `what` names the debate the backend runs."""
    parser.add_argument("--llm", default="rules", choices=LLM_BACKENDS,
                        help=f"{what} backend; rules is offline and deterministic (default)")
    parser.add_argument("--model", help="LLM model name (openai) or GGUF path (local)")
    parser.add_argument("--base-url", help="OpenAI-compatible server URL")
