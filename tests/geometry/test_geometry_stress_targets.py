"""posjax.geometry.stress_targets: dense and rows targets, stress_pair, coords_stress, checked
against a NumPy transcription of Eq. (4) of arXiv 2604.05217 (normalised stress, no root)."""
import jax
import numpy as np
import pytest

import posjax.geometry as geo
from posjax.geometry import matrix_free
from posjax.geometry.stress_targets import (GRAM_METRICS, DenseTarget, RowsTarget, coords_stress,
                                            has_gram_factorisation, not_computed, stress_pair)


def _numpy_stress(D, E):
    """Eq. (4) over pairs i < j: raw sum (D - E)^2 / sum D^2, and at the optimal scale of E."""
    iu = np.triu_indices(D.shape[0], 1)
    d, e = D[iu], E[iu]
    c = (d * e).sum() / (e * e).sum()
    return (((d - e) ** 2).sum() / (d * d).sum(), ((d - c * e) ** 2).sum() / (d * d).sum())


def _rows(n=12, V=30, seed=0):
    return np.random.default_rng(seed).dirichlet(np.full(V, 0.3), size=n)


def _euclid(X):
    return np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))


def test_stress_pair_equals_numpy_eq4():
    with jax.enable_x64(True):
        P = _rows()
        D = np.asarray(geo.hellinger_matrix(P), np.float64)
        X = np.random.default_rng(1).normal(size=(12, 3))
        got = stress_pair(D, _euclid(X))
    raw, opt = _numpy_stress(D, _euclid(X))
    assert got["raw"] == pytest.approx(raw, rel=1e-10)
    assert got["optimal"] == pytest.approx(opt, rel=1e-10)
    assert got["optimal"] <= got["raw"]


def test_rows_target_equals_dense_target():
    with jax.enable_x64(True):
        P = _rows()
        X = np.random.default_rng(2).normal(size=(12, 4))
        dense = DenseTarget(np.asarray(geo.hellinger_matrix(P), np.float64))
        rows = RowsTarget(P, metric="chord")
        a, b = dense.stress_of(table=X), rows.stress_of(table=X)
        assert b["method"] == "exact"
        for s in ("raw", "optimal"):
            assert b[s] == pytest.approx(a[s], rel=1e-8)
        h = rows.head(5).stress_of(table=X[:5])
        assert h["raw"] == pytest.approx(dense.head(5).stress_of(table=X[:5])["raw"], rel=1e-8)
        with pytest.raises(ValueError, match="distances but no coordinates"):
            rows.stress_of(distances=_euclid(X))


def test_sampled_pairs_bracket_the_exact_value():
    with jax.enable_x64(True):
        P = _rows(n=40, V=50, seed=3)
        X = np.random.default_rng(4).normal(size=(40, 2))
        exact = coords_stress(P, [X])[0]
        est = coords_stress(P, [X], exact_max=10, pairs=600, seed=1)[0]
    assert est["method"] == "sampled_pairs" and est["pairs"] == 600
    for s in ("raw", "optimal"):
        lo, hi = est["ci"][s]
        assert lo <= est[s] <= hi and lo <= exact[s] <= hi


def test_gram_metrics_are_those_of_the_matrix_free_path():
    assert set(GRAM_METRICS) == set(matrix_free._GRAM_SCALE)
    assert has_gram_factorisation("chord") and not has_gram_factorisation("fr_arc")
    with pytest.raises(ValueError):  # the matrix-free path refuses exactly the others
        geo.b_trace(_rows(), metric="fr_arc")
    assert not_computed(7) == "not computed at n = 7 (matrix-free)"
