"""Double centring, classical MDS, eigensolvers, effective rank, Euclidean check."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.geometry as geo


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def random_chord(n=24, V=60, alpha=0.3, seed=0):
    P = np.random.default_rng(seed).dirichlet(np.full(V, alpha), size=n)
    return P, geo.hellinger_matrix(P)


def test_one_hot_worked_values(x64):
    D = geo.hellinger_matrix(jnp.eye(3))
    B = np.asarray(geo.double_center(D))
    np.testing.assert_allclose(B, np.eye(3) - 1.0 / 3.0, atol=1e-15)  # B = J
    res = geo.classical_mds(D, rank_rule=("threshold", 1e-6))
    np.testing.assert_allclose(np.asarray(res.eigenvalues), [1.0, 1.0, 0.0], atol=1e-12)
    assert res.rank == 2 and res.coords.shape == (3, 2)
    assert float(geo.stress(D, coords=res.coords)) < 1e-12
    assert res.negative_mass < 1e-12


def test_chord_gram_shortcut_psd_and_full_rank_zero_stress(x64):
    P, D = random_chord()
    B = geo.double_center(D)
    np.testing.assert_allclose(np.asarray(geo.gram_from_sqrtP(np.sqrt(P))), np.asarray(B),
                               atol=1e-12)
    w = np.asarray(geo.check_euclidean(D).eigenvalues)
    assert w[-1] >= -1e-8 * w[0]  # chord: negative eigenvalues are round-off only
    res = geo.classical_mds(D, rank_rule=("threshold", 1e-10), neg_eig="error")
    assert res.rank <= D.shape[0] - 1
    assert float(geo.stress(D, coords=res.coords)) < 1e-12
    assert np.all(np.diff(np.asarray(res.eigenvalues)) <= 1e-15)  # descending


def test_rank_is_at_most_n_minus_one_and_bounded_by_V(x64):
    P = np.random.default_rng(1).dirichlet(np.ones(3), size=10)  # rank(B) <= min(n - 1, V) = 3
    D = geo.hellinger_matrix(P)
    res = geo.classical_mds(D, rank_rule=("threshold", 1e-9))
    assert res.rank == 3
    assert geo.effective_rank(res.eigenvalues, rule="threshold", tol=1e-9) == 3


def test_sign_convention_is_deterministic(x64):
    _, D = random_chord(seed=2)
    X = np.asarray(geo.classical_mds(D, dim=3).coords)
    idx = np.argmax(np.abs(X), axis=0)
    assert np.all(X[idx, np.arange(3)] > 0)


def test_topk_solver_matches_eigh(x64):
    i = np.arange(128)
    D = np.sqrt(2 * (1 - 0.95 ** np.abs(i[:, None] - i[None, :])))
    full = geo.classical_mds(D, dim=5, solver="eigh")
    top = geo.classical_mds(D, dim=5, solver="topk")
    np.testing.assert_allclose(np.asarray(top.eigenvalues), np.asarray(full.eigenvalues[:5]),
                               rtol=1e-9)
    np.testing.assert_allclose(np.abs(np.asarray(top.coords)), np.abs(np.asarray(full.coords)),
                               atol=1e-6)
    assert top.negative_mass is None and top.rank == 5


def test_non_euclidean_fr_arc_and_neg_eig_error(x64):
    # Vertices and edge midpoints of the simplex: the arc metric is curved, the chord is not.
    P = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [.5, .5, 0], [0, .5, .5], [.5, 0, .5]])
    D = geo.hellinger_matrix(P, metric="fisher_rao")
    chk = geo.check_euclidean(D)
    assert chk.negative_mass > 1e-2 and chk.max_negative_ratio > 1e-2
    assert geo.check_euclidean(geo.hellinger_matrix(P)).negative_mass < 1e-12
    with pytest.raises(ValueError, match="negative eigenvalue"):
        geo.classical_mds(D, neg_eig="error")
    res = geo.classical_mds(D, neg_eig="clip", rank_rule=3)
    assert res.negative_mass == pytest.approx(chk.negative_mass)


def test_effective_rank_rules():
    lam = np.array([4.0, 2.0, 1.0, 1.0, 1e-9, -1e-12])
    assert geo.effective_rank(lam, rule="threshold") == 4
    assert geo.effective_rank(lam, rule="threshold", tol=1e-12) == 5
    assert geo.effective_rank(lam, rule="energy", tol=0.3) == 2  # (4 + 2) / 8 >= 0.7
    assert geo.effective_rank(lam, rule="energy", tol=1e-3) == 4
    p = lam[:5] / lam[:5].sum()
    erank = math.exp(-(p * np.log(p)).sum())
    assert geo.effective_rank(lam, rule="entropy") == pytest.approx(erank)
    assert geo.effective_rank(np.ones(3), rule="entropy") == pytest.approx(3.0)
    assert geo.effective_rank(lam, rule="threshold", on="sv_X") == 5  # sqrt(1e-9) > 1e-6 * 2
    with pytest.raises(ValueError, match="rule"):
        geo.effective_rank(lam, rule="nuclear")


@pytest.mark.parametrize("D, match", [
    (np.ones((2, 3)), "square"),
    (np.array([[0.0, 1.0], [2.0, 0.0]]), "symmetric"),
    (np.array([[0.0, -1.0], [-1.0, 0.0]]), "negative"),
    (np.array([[1.0, 1.0], [1.0, 1.0]]), "diagonal"),
    (np.array([[0.0, np.nan], [np.nan, 0.0]]), "NaN"),
])
def test_bad_distance_matrices_raise(D, match):
    with pytest.raises(ValueError, match=match):
        geo.classical_mds(D)


def test_bad_mds_options_raise():
    D = np.asarray(geo.hellinger_matrix(np.eye(3)))
    with pytest.raises(ValueError, match="neg_eig"):
        geo.classical_mds(D, neg_eig="abs")
    with pytest.raises(ValueError, match="dim"):
        geo.classical_mds(D, solver="topk")
    with pytest.raises(ValueError, match="dim"):
        geo.classical_mds(D, dim=7)
