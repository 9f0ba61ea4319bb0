"""Every constant of the debate protocol in one dataclass, loadable from YAML (`debate:` mapping or top level)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from uav_debate_eval.core.errors import InputError

if TYPE_CHECKING:
    from uav_debate_eval.debate.llm.factory import LLMConfig

MODES = ("adversarial", "collaborative")
PROMPT_STYLES = ("auto", "full", "compact")
ROTATIONS = ("round_robin", "adaptive")
JUDGES = ("auto", "vote", "llm")
ROUTERS = ("sparse", "complexity")


@dataclass
class DebateConfig:
    """Protocol constants; defaults are the paper's. `llm` is a debate.llm LLMConfig for the llm backends."""

    backend: str = "rules"  # rules | local | openai | any name make_backend knows
    model: str | None = None
    mode: str = "adversarial"
    max_rounds: dict[int, int] = field(default_factory=lambda: {1: 1, 2: 3, 3: 5})  # per router layer
    min_rounds: dict[int, int] = field(default_factory=lambda: {1: 1, 2: 2, 3: 3})  # before early stop/convergence
    # prompt + completion tokens per mission (D3's budgeted stopping; debate.agenda spends it by priority)
    token_budget: int = 4096
    answer_tokens: int = 256  # completion cap of one agent's call (a choice answer with its aspects fits)
    early_stop_similarity: float = 0.92  # stop when Sim(S_r, S_r-1) exceeds it
    score_gap_eps: float = 0.02  # convergence: |mean score_r - mean score_r-1| below it
    tau_q: float = 0.7  # meta-cognitive quality threshold
    novelty_min: float = 0.3  # Q_novelty below it suggests termination
    stop_on_low_novelty: bool = False  # make that suggestion a stopping rule
    # complexity < t1 -> L1, < t2 -> L2, else L3; calibrated on the simulator's built-in suite (benchmarks/)
    router_thresholds: tuple[float, float] = (0.45, 0.7)
    router_weights: dict[str, float] = field(default_factory=lambda: {
        "events": 0.35, "violations": 0.35, "speed_entropy": 0.15, "heading_entropy": 0.15})
    router_event_rate_ref: float = 6.0  # events per minute that count as "dense" (term saturates at 1)
    router_bins: int = 8
    red_fraction: float = 0.4
    rotation: str = "round_robin"
    uncertainty_lambda: float = 0.5  # U_intra = lambda F + (1 - lambda) M
    low_confidence_u_sys: float = 0.5  # U_sys above it marks the evaluation low-confidence
    jury_in_l3: bool = True
    # vote (deterministic) | llm (one judge call per segment) | auto (llm for LLM backends); with the sparse router
    # the call is made only when labels stay open and no veto fixes the segment's label
    judge: str = "auto"
    panel_may_raise: bool = False  # let a non-safe panel raise a verifier "safe" to "borderline"
    quote_rel_tol: float = 0.02
    quote_abs_tol: float = 0.011
    min_evidence: int = 3
    max_evidence: int = 5
    agent_timeout_s: float = 120.0  # one agent's own call (time spent queueing for the model is not counted)
    parallel_agents: int = 0  # agents of a round called at once; 0 = all (the local backend: always 1)
    prompt_style: str = "auto"  # full | compact (small local models) | auto (compact for the local backend)
    dsl_budget_tokens: int | None = None  # per-segment DSL size; None = 1500, or 400 with compact prompts
    quoted_evidence: bool | None = None  # evidence quotes exact facts of its id (None: with compact prompts)
    choices: bool = True  # agents choose among verified findings (False: free-text claims and evidence)
    # sparse: a segment with no finding near a limit is settled by one agent in L1, a vetoed segment is never L3
    # (the veto fixes its label), agents that agree with high confidence stop, L3 only when the labels stay split;
    # complexity: the complexity score alone picks the layer and every agent debates every round
    router: str = "sparse"
    settled_agents: int = 1  # sparse router: agents that answer a segment with nothing notable (rules verdict)
    veto_rounds: int = 1  # sparse router: rounds of a vetoed segment (the veto fixes its label)
    # sparse router: all labels equal and mean confidence >= it ends the segment (0.5: the panel agrees and is not
    # guessing among the three labels; a small local model answers 0.5 often, and a further round of a unanimous
    # panel cannot change the vote)
    agree_confidence: float = 0.5
    topology: str = "full"  # full | sparse | learned (debate.topology: who answers and whom each agent sees)
    theta_v: float = 0.5  # visibility threshold of the edge weights (learned: the policy file's own)
    topology_policy: str | None = None  # learned topology's .npz (None: the shipped one)
    lean_prompts: bool = True  # shared data as one prefix, relevant ids only, compact DSL when nothing is notable
    temperature: float = 0.2
    max_tokens: int = 512
    seed: int = 0
    personas_file: str | None = None
    personas: list[dict] = field(default_factory=list)  # extra / replacing persona entries
    llm: LLMConfig | None = None  # built from the `llm:` mapping of a config file

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InputError(f"debate.mode: must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.rotation not in ROTATIONS:
            raise InputError(f"debate.rotation: must be one of {', '.join(ROTATIONS)}, got {self.rotation!r}")
        if self.judge not in JUDGES:
            raise InputError(f"debate.judge: must be one of {', '.join(JUDGES)}, got {self.judge!r}")
        if self.router not in ROUTERS:
            raise InputError(f"debate.router: must be one of {', '.join(ROUTERS)}, got {self.router!r}")
        from uav_debate_eval.debate.topology import TOPOLOGIES

        if self.topology not in TOPOLOGIES:
            raise InputError(f"debate.topology: must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}")
        if self.prompt_style not in PROMPT_STYLES:
            raise InputError(f"debate.prompt_style: must be one of {', '.join(PROMPT_STYLES)}, "
                             f"got {self.prompt_style!r}")
        for name in ("max_rounds", "min_rounds"):
            rounds = {int(k): int(v) for k, v in getattr(self, name).items()}
            if sorted(rounds) != [1, 2, 3] or min(rounds.values()) < 1:
                raise InputError(f"debate.{name}: need layers 1, 2, 3 with at least one round each")
            setattr(self, name, rounds)
        self.router_thresholds = tuple(float(x) for x in self.router_thresholds)  # type: ignore[assignment]
        if self.token_budget < 1 or self.answer_tokens < 1:
            raise InputError("debate.token_budget and debate.answer_tokens: must be positive")
        if self.veto_rounds < 1:
            raise InputError(f"debate.veto_rounds: must be at least 1, got {self.veto_rounds}")
        if not 0.0 < self.red_fraction < 1.0:
            raise InputError(f"debate.red_fraction: must be in (0, 1), got {self.red_fraction}")

    @property
    def compact(self) -> bool:
        """Short prompts for small in-process models, whose prompt processing dominates their latency."""
        return self.prompt_style == "compact" or (self.prompt_style == "auto" and self.backend == "local")

    @property
    def quotes_evidence(self) -> bool:
        """Small models choose each evidence fact among the data's own (a schema enum) instead of writing numbers."""
        return self.compact if self.quoted_evidence is None else self.quoted_evidence

    @property
    def segment_dsl_budget(self) -> int:
        if self.dsl_budget_tokens is not None:
            return self.dsl_budget_tokens
        return 400 if self.compact else 1500

    @classmethod
    def from_dict(cls, data: dict, source: str = "<config>") -> DebateConfig:
        """Build from a mapping; unknown keys are an error (a typo would silently keep a default)."""
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InputError(f"{source}: debate: unknown keys {sorted(unknown)}")
        data = dict(data)
        if isinstance(data.get("llm"), dict):
            data["llm"] = _llm_config(data["llm"], source)
        return cls(**data)

    @classmethod
    def from_yaml(cls, path: str | Path) -> DebateConfig:
        """Load `path`: either a `debate:` mapping or the mapping itself."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise InputError(f"{path}: cannot read debate config: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise InputError(f"{path}: malformed YAML: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}: expected a mapping")
        return cls.from_dict(data.get("debate", data), str(path))


def _llm_config(data: dict, source: str) -> LLMConfig:
    from uav_debate_eval.debate.llm import factory  # the backends' config lives with the backends

    try:
        return factory.LLMConfig(**data)
    except TypeError as exc:
        raise InputError(f"{source}: debate.llm: {exc}") from None
