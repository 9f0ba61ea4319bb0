"""Data quality (CONTRACT.md §3b): assessment (the pass run before the verifier), frames, jumps, updates."""
