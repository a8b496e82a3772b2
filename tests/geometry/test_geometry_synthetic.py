"""The three-regime synthetic corpus and the samplers."""
import numpy as np
import pytest

import posjax.geometry as geo
from posjax.data.synthetic import (regime_weights, sample_distributions, sample_tokens,
                                   three_regime_corpus)


@pytest.mark.parametrize("mixing", ["hard", "linear"])
def test_exact_rows_sum_to_one_and_weights(mixing):
    c = three_regime_corpus(30, 40, mixing=mixing, alpha=0.2, seed=3)
    assert c.P.shape == (30, 40) and c.tokens is None
    np.testing.assert_allclose(c.P.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(c.weights.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(c.P, c.weights @ c.regimes, atol=1e-12)
    assert c.config["mixing"] == mixing and c.config["seed"] == 3
    if mixing == "hard":
        assert set(np.unique(c.weights)) <= {0.0, 1.0}
        np.testing.assert_array_equal(c.weights.sum(0), [10, 10, 10])
    else:
        assert np.all(c.weights[0] == [1, 0, 0]) and np.all(c.weights[-1] == [0, 0, 1])
        assert np.all(np.diff(c.weights[:, 2]) >= 0)


def test_sampled_frequencies_converge_to_P():
    c = three_regime_corpus(12, 20, 8192, mixing="linear", alpha=0.5, seed=0)
    assert c.tokens.shape == (8192, 12) and c.tokens.dtype == np.int32
    P_hat, N = geo.positional_distributions(c.tokens, vocab_size=20, batch_size=4096)
    assert np.all(np.asarray(N) == 8192)
    err = np.abs(np.asarray(P_hat) - c.P).max()
    assert err < 5 * np.sqrt(0.25 / 8192)  # a few binomial standard deviations
    small = three_regime_corpus(12, 20, 500, mixing="linear", alpha=0.5, seed=0)
    P_small, _ = geo.positional_distributions(small.tokens, vocab_size=20)
    assert np.abs(np.asarray(P_small) - c.P).mean() > np.abs(np.asarray(P_hat) - c.P).mean()


def test_samplers_never_draw_zero_probability_tokens():
    P = np.zeros((3, 6))
    P[0, 2] = 1.0
    P[1, [1, 4]] = 0.5
    P[2, :] = 1 / 6
    toks = np.asarray(sample_tokens(P, 500, seed=1))
    assert np.all(toks[:, 0] == 2) and set(np.unique(toks[:, 1])) == {1, 4}
    P_hat, counts = sample_distributions(P, 1000, seed=0)
    assert counts.sum(1).tolist() == [1000] * 3 and P_hat[0, 2] == 1.0
    halves, hc = sample_distributions(P, 1000, seed=0, split_half=True)
    assert halves.shape == (2, 3, 6) and hc.sum(-1).tolist() == [[500] * 3] * 2


def test_bad_options():
    with pytest.raises(ValueError, match="mixing"):
        regime_weights(5, mixing="cosine")
    with pytest.raises(ValueError, match="alpha"):
        three_regime_corpus(5, 10, alpha=0.0)
    with pytest.raises(ValueError, match="anchors"):
        regime_weights(5, mixing="linear", anchors=(0.0, 0.0, 1.0))
