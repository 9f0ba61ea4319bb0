"""Trajectory metrics: flight control, swarm coordination and safety scores in 0..1."""
