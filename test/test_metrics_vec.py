"""metrics.vec.norm and nanmedian0 are np.linalg.norm(x, axis=-1) and np.nanmedian(a, axis=0) to the last bit (issues
15 and 35 need identical reports)."""

import warnings
from contextlib import nullcontext

import numpy as np
import pytest

from uav_debate_eval.metrics.vec import nanmedian0, norm


@pytest.mark.parametrize("shape", [(1000, 3), (7, 11, 5, 3), (500, 2), (4, 3, 2), (0, 3)])
def test_norm_is_bit_identical_to_numpy(shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.normal(size=shape) * 10.0 ** rng.integers(-8, 8, size=shape)
    expected = np.linalg.norm(x, axis=-1)
    got = norm(x)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected)
    view = x[..., ::-1]  # a strided view works too
    assert np.array_equal(norm(view), np.linalg.norm(view, axis=-1))


@pytest.mark.parametrize("seed", range(40))
def test_nanmedian0_is_bit_identical_to_numpy(seed):
    """Odd and even counts, columns without a number, one row, values over 16 decades, 1-D to 3-D."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(k) for k in rng.integers(1, 30, size=int(rng.integers(1, 4))))
    a = rng.normal(size=shape) * 10.0 ** rng.integers(-8, 8, size=shape)
    a[rng.random(shape) < rng.uniform(0.0, 1.0)] = np.nan
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning) if np.isnan(a).all(axis=0).any() else nullcontext():
        expected = np.nanmedian(a, axis=0)
    got = nanmedian0(a)
    assert got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=True)


def test_nanmedian0_of_no_rows_and_of_known_columns():
    assert nanmedian0(np.zeros((0, 3))).shape == (3,) and np.isnan(nanmedian0(np.zeros((0, 3)))).all()
    a = np.array([[1.0, np.nan, 5.0], [3.0, np.nan, np.nan], [2.0, np.nan, 7.0], [10.0, np.nan, np.nan]])
    assert np.array_equal(nanmedian0(a), [2.5, np.nan, 6.0], equal_nan=True)


def test_norm_keeps_nan_and_inf():
    x = np.array([[np.nan, 0, 0], [np.inf, 1, 0], [3, 4, 0]])
    got = norm(x)
    assert np.isnan(got[0]) and got[1] == np.inf and got[2] == 5.0


def test_partner_norms_per_column_equal_the_full_gather():
    from uav_debate_eval.metrics.swarm import _partner_norms

    rng = np.random.default_rng(3)
    p, o = rng.normal(size=(2, 40, 50, 3)) * 30.0
    partners = rng.integers(0, 50, size=(50, 6))
    rel = p[:, :, None] - p[:, partners]
    assert np.array_equal(_partner_norms(p, partners), np.linalg.norm(rel, axis=-1))
    expected = np.linalg.norm(rel - (o[:, :, None] - o[:, partners]), axis=-1)
    got = _partner_norms(p, partners, o)  # the offsets subtracted once per vehicle: equal up to rounding
    assert np.allclose(got, expected, rtol=1e-12, atol=1e-12) and not np.array_equal(got, 0 * got)


def test_raw_token_prefixes_stacked_equal_per_track():
    from uav_debate_eval.dsl import tokens
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("formation", seed=5, duration_s=30).traj
    one_by_one = [tokens._cumulative_numbers(tr) for tr in traj.tracks.values()]
    tokens._prime_number_prefixes(list(traj.tracks.values()))
    for tr, expected in zip(traj.tracks.values(), one_by_one, strict=True):
        assert tokens._has_prefix(tr)
        assert np.array_equal(tokens._number_prefix(tr), expected)
    assert tokens.raw_tokens(traj) == tokens.count_tokens(tokens.raw_text(traj))


def test_number_tokens_by_group_bounds_equal_the_log10_form_and_the_printed_text():
    """_per_number counts integer digits by comparing with 10**3, 10**6, 10**9 below 10**12: the same integers as
    the log10 form it replaced, everywhere (boundaries, -0.0, huge values), and as counting the printed numbers."""
    from uav_debate_eval.dsl import tokens

    def log10_form(v):
        k = np.rint(np.abs(v) * 10**6).astype(np.int64)
        whole, frac = np.divmod(k, 10**6)
        n_int = np.where(whole > 0, np.floor(np.log10(np.maximum(whole, 1))).astype(np.int64) + 1, 1)
        digits = np.array([len(f"{f:06d}".rstrip("0")) or 1 for f in range(10**6)])
        return np.signbit(v).astype(np.int64) + (n_int + 2) // 3 + 1 + (digits[frac] + 2) // 3

    rng = np.random.default_rng(9)
    edges = [0.0, -0.0, 1e-7, 5e-7, 0.9999995, 999.9999994, 999.9999995, 1000.0, 999999.9999996, 1e6, 1e9 - 1e-7,
             1e9, 1e12 - 1, 1e12, 5e12 - 1e-6, 9.2e12]  # up to what int64 holds at 6 decimals
    spread = rng.normal(size=20_000) * 10.0 ** rng.integers(-3, 13, 20_000) / 4.0
    v = np.concatenate([edges, [-e for e in edges], spread, np.round(rng.uniform(-500, 500, 20_000), 3)])
    got = tokens._per_number(v)
    assert got.dtype == np.int64 and np.array_equal(got, log10_form(v))
    small = np.abs(v) < 1e8  # beyond, x * 10**6 rounds before rint (as it did before)
    assert got[small].tolist() == [tokens.count_tokens(tokens.fmt_raw(x)) for x in v[small]]
    assert np.array_equal(tokens._per_number(v.reshape(-1, 2)), got.reshape(-1, 2))
    corrupt = np.array([[1.5, 9.3e12], [-3.5e15, 1e300]])  # a flipped exponent bit of a logged float
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no int64 overflow in the cast
        got = tokens._per_number(corrupt)
    assert got.tolist() == [[tokens.count_tokens(tokens.fmt_raw(x)) for x in row] for row in corrupt.tolist()]


def test_raw_token_prefixes_in_small_blocks_equal_one_pass(monkeypatch):
    from uav_debate_eval.dsl import tokens
    from uav_debate_eval.sim.scenarios import simulate

    traj = simulate("formation", seed=5, duration_s=30).traj
    expected = [tokens._cumulative_numbers(tr) for tr in traj.tracks.values()]
    monkeypatch.setattr(tokens, "ROWS_PER_BLOCK", 7)
    tokens._prime_number_prefixes(list(traj.tracks.values()))
    for tr, want in zip(traj.tracks.values(), expected, strict=True):
        assert tokens._has_prefix(tr) and np.array_equal(tokens._number_prefix(tr), want)
