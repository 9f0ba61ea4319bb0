"""The mission rules' formula language (CONTRACT.md §2a), the ground floor beside core: the Signal Temporal Logic
syntax (parser, AST) and the rules a mission states (spec). It imports nothing of the package, so the mission
loader (core.mission_file) reads rules without loading how they are evaluated (uav_debate_eval.rules)."""
