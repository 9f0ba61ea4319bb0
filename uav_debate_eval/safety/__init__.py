"""Deterministic safety verifier: hard constraints c_k(x) <= 0, veto with hysteresis, predictive warnings."""
