"""uav_debate_eval: deterministic safety veto, trajectory DSL and an LLM expert panel for UAV swarms."""

__version__ = "0.1.0"
REPORT_SCHEMA_VERSION = 2
