"""Message stamps: seconds <-> integer nanoseconds, one way for every reader and writer, so the live flight's tape,
its annotated MCAP and its PX4 session bag give the same times to the last bit."""

from __future__ import annotations

import numpy as np


def stamp_ns(t: np.ndarray) -> np.ndarray:
    """Input-clock seconds as integer nanoseconds (a message stamp)."""
    return np.round(np.asarray(t, dtype=float) * 1e9).astype(np.int64)


def stamp_s(ns: np.ndarray) -> np.ndarray:
    """A message stamp in seconds, as the live pose input reads it (sec + nanosec * 1e-9)."""
    ns = np.asarray(ns, dtype=np.int64)
    return (ns // 1_000_000_000).astype(float) + (ns % 1_000_000_000) * 1e-9
