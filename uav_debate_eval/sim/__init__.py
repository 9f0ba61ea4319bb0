"""Seeded multi-vehicle scenario simulator with fault injection and ground truth."""
