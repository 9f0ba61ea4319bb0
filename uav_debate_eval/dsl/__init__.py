"""The Trajectory DSL: segmentation, events and citable tokens (SEG, EVENT, ATTN, FORM, RISK, WAYPTS, SCORES)."""
