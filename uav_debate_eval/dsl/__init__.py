"""The Trajectory DSL: segmentation, events and citable tokens (SEG, EVENT, ATTN, FORM, RISK, WAYPTS, SCORES)."""

#: Default token budget of a DSL document (here, not in builder.py, so the CLI's --help need not import the DSL).
DEFAULT_BUDGET_TOKENS = 1500
