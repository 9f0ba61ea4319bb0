"""metrics.vec.norm is np.linalg.norm(x, axis=-1) to the last bit (issue 15 needs identical reports)."""

import numpy as np
import pytest

from uav_debate_eval.metrics.vec import norm


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
    assert np.array_equal(_partner_norms(p, partners, o), expected)


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
