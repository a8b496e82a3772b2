"""Hellinger matrices: worked values, GEMM vs direct, float32 fix, tiling, sparse, debias."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

import posjax.geometry as geo
from posjax.data.synthetic import linear_drift_distributions, sample_distributions


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def dirichlet_rows(n, V, alpha, seed=0, duplicates=()):
    P = np.random.default_rng(seed).dirichlet(np.full(V, alpha), size=n)
    for i, j in duplicates:
        P[j] = P[i]
    return P


def direct_chord(P):
    S = np.sqrt(np.asarray(P, np.float64))
    return np.sqrt(((S[:, None, :] - S[None, :, :]) ** 2).sum(-1))


def test_one_hot_rows_are_sqrt2_apart(x64):
    D = geo.hellinger_matrix(jnp.eye(3))
    expected = math.sqrt(2) * (1 - np.eye(3))
    np.testing.assert_allclose(np.asarray(D), expected, atol=1e-15)
    assert np.all(np.diag(np.asarray(D)) == 0.0)


def test_gemm_matches_direct_pairwise_in_float64(x64):
    P = dirichlet_rows(24, 60, 0.3, seed=1)
    D = np.asarray(geo.hellinger_matrix(P))
    np.testing.assert_allclose(D, direct_chord(P), atol=1e-12)
    assert np.array_equal(D, D.T)


def test_float32_fix_matches_float64_with_duplicated_rows():
    P = dirichlet_rows(24, 60, 0.1, seed=2, duplicates=[(0, 5), (3, 20), (7, 8)])
    P[9] = 0.999999 * P[10] + 0.000001 * P[11]  # a near-duplicate
    D32 = np.asarray(geo.hellinger_matrix(jnp.asarray(P, jnp.float32), normalize=True))
    with jax.enable_x64(True):
        D64 = np.asarray(geo.hellinger_matrix(jnp.asarray(P, jnp.float64)))
    assert np.max(np.abs(D32 - D64)) <= 1e-6
    assert D32[0, 5] == 0.0 and D32[3, 20] == 0.0
    # Without the fix the duplicated rows show the float32 cancellation floor.
    D32_raw = np.asarray(geo.hellinger_matrix(jnp.asarray(P, jnp.float32), normalize=True,
                                              exact_tol=0.0))
    assert np.max(np.abs(D32_raw - D64)) > 1e-5


def test_tiled_and_sparse_paths_match_one_gemm(x64):
    P = dirichlet_rows(24, 60, 0.05, seed=3, duplicates=[(1, 20)])
    P[P < 1e-3] = 0.0
    P /= P.sum(1, keepdims=True)
    ref = np.asarray(geo.hellinger_matrix(P, block_size=0))
    tiled = np.asarray(geo.hellinger_matrix(P, block_size=10))  # ragged last tile
    np.testing.assert_allclose(tiled, ref, atol=1e-13)
    for sparse_P in (sp.csr_matrix(P), jsparse.BCOO.from_scipy_sparse(sp.coo_matrix(P))):
        np.testing.assert_allclose(np.asarray(geo.hellinger_matrix(sparse_P, block_size=16)),
                                   ref, atol=1e-13)
    assert np.all(np.diag(tiled) == 0.0) and np.array_equal(tiled, tiled.T)
    assert ref[1, 20] == 0.0


def test_metrics_and_aliases(x64):
    P = dirichlet_rows(24, 60, 0.5, seed=4)
    chord = np.asarray(geo.hellinger_matrix(P))
    bc = 1.0 - chord ** 2 / 2.0
    for name in ("normalized", "normalised"):
        np.testing.assert_allclose(np.asarray(geo.hellinger_matrix(P, metric=name)),
                                   chord / math.sqrt(2), atol=1e-14)
    arc = np.arccos(np.clip(bc, -1, 1))
    np.testing.assert_allclose(np.asarray(geo.hellinger_matrix(P, metric="fr_arc")), arc,
                               atol=1e-7)
    np.testing.assert_allclose(np.asarray(geo.hellinger_matrix(P, metric="fr_arc", fr_scale=2)),
                               2 * arc, atol=1e-7)
    np.testing.assert_allclose(np.asarray(geo.hellinger_matrix(P, metric="fisher_rao")),
                               2 * arc, atol=1e-7)
    one_hot = np.asarray(geo.hellinger_matrix(jnp.eye(3), metric="fisher_rao"))
    np.testing.assert_allclose(one_hot[0, 1], math.pi, atol=1e-12)
    assert chord.max() <= math.sqrt(2) + 1e-12


def test_hellinger_inequalities(x64):
    """d_H^2 <= ||P - Q||_1 <= 2 d_H and ||P - Q||_2 <= 2 d_H (chord)."""
    P = dirichlet_rows(24, 60, 0.2, seed=5)
    D = np.asarray(geo.hellinger_matrix(P))
    l1 = np.abs(P[:, None] - P[None]).sum(-1)
    l2 = np.sqrt(((P[:, None] - P[None]) ** 2).sum(-1))
    assert np.all(D ** 2 <= l1 + 1e-12)
    assert np.all(l1 <= 2 * D + 1e-12)
    assert np.all(l2 <= 2 * D + 1e-12)


@pytest.mark.parametrize("bad, match", [
    (np.array([[0.5, 0.6], [0.5, 0.5]]), "sum to one"),
    (np.array([[1.5, -0.5], [0.5, 0.5]]), "negative"),
    (np.array([[np.nan, 1.0], [0.5, 0.5]]), "NaN"),
    (np.array([[0.0, 0.0], [0.5, 0.5]]), "all-zero"),
    (np.array([0.5, 0.5]), "2-D"),
])
def test_bad_probabilities_raise(bad, match):
    with pytest.raises(ValueError, match=match):
        geo.hellinger_matrix(bad)


def test_normalize_and_bad_options():
    P = np.array([[2.0, 2.0], [1.0, 3.0]])
    D = geo.hellinger_matrix(P, normalize=True)
    assert D.shape == (2, 2)
    with pytest.raises(ValueError, match="metric"):
        geo.hellinger_matrix(np.eye(2), metric="kl")
    with pytest.raises(ValueError, match="debias"):
        geo.hellinger_matrix(np.eye(2), debias="jackknife")
    with pytest.raises(ValueError, match="same shape"):
        geo.split_half_hellinger(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="share no token"):
        geo.split_half_hellinger(np.eye(2), np.eye(2)[::-1])


def test_split_half_reduces_bias_on_the_toy(x64):
    """Debiasing toy (V=2000, n=6, Dirichlet(0.05) drift): the corrected estimate is less biased."""
    P = linear_drift_distributions(6, 2000, alpha=0.05, seed=0)
    bc_true = 1.0 - np.asarray(geo.hellinger_matrix(P, squared=True)) / 2.0
    iu = np.triu_indices(6, 1)
    plug, corrected = [], []
    for seed in range(3):
        P_hat, _ = sample_distributions(P, 500, seed=seed)
        halves, _ = sample_distributions(P, 500, seed=seed, split_half=True)
        plug.append((1 - np.asarray(geo.hellinger_matrix(P_hat, squared=True)) / 2 - bc_true)[iu])
        d2 = np.asarray(geo.hellinger_matrix(halves, debias="split_half", squared=True))
        corrected.append((1 - d2 / 2 - bc_true)[iu])
    bias_plug, bias_corr = np.mean(plug), np.mean(corrected)
    assert bias_plug < -0.1  # plug-in BC is biased downwards (Jensen)
    assert abs(bias_corr) < 0.5 * abs(bias_plug)
    same = geo.split_half_hellinger(halves[0], halves[1])
    np.testing.assert_allclose(np.asarray(same), np.asarray(
        geo.hellinger_matrix(None, debias="split_half", halves=(halves[0], halves[1]))))
