"""posjax.analysis.stress_tables (arXiv 2604.05217): the stress, spectrum and parameter tables
against NumPy transcriptions of Eq. (4) and of classical MDS, and the matrix-free tables against
the dense ones."""
import jax
import numpy as np
import pytest

import posjax.geometry as geo
from posjax.analysis.stress_tables import dense_tables, matrix_free_tables, parameter_rows

TABLES = dict(tau=1e-6, eps=1e-3, eps_alt=1e-2, paper_d=32, model_d=8)


def _pairwise(X):
    return np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))


def _stress_np(D, E):
    """Eq. (4) without square root over pairs i < j, raw and at the least-squares scale of E."""
    iu = np.triu_indices(len(D), 1)
    d, e = D[iu], E[iu]
    c = (d @ e) / (e @ e)
    return ((d - e) ** 2).sum() / (d ** 2).sum(), ((d - c * e) ** 2).sum() / (d ** 2).sum()


def _b_eigenvalues(D):
    """Eigenvalues of B = -1/2 J D^2 J, descending (classical MDS, Algorithm 1)."""
    n = len(D)
    J = np.eye(n) - 1.0 / n
    return np.linalg.eigvalsh(-0.5 * J @ (D ** 2) @ J)[::-1]


def test_parameter_rows_are_the_counts_of_a_dense_and_a_factorised_table():
    rows = parameter_rows(128, {"a": (768, 5, 1e-3), "b": (64, 50, 1e-2)})
    a, b = rows["a"], rows["b"]
    assert (a["nd"], a["r(n+d)"], a["gauge_free_dim"]) == (128 * 768, 5 * (128 + 768), 5 * 896 - 25)
    assert a["saving"] == pytest.approx(1 - 5 * 896 / (128 * 768))
    assert b["break_even_r"] == pytest.approx(128 * 64 / 192) and b["saving"] < 0  # r above it


def test_dense_tables_equal_numpy_mds_and_stress():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(14, 3)) * np.array([3.0, 1.0, 0.1])
    D = _pairwise(X)  # Euclidean: B has rank 3
    E = _pairwise(rng.normal(size=(14, 2)))
    with jax.enable_x64(True):
        s, arrays = dense_tables(D, D, {"random": E}, smacof_max_iter=5, smacof_tol=None, **TABLES)
    lam = _b_eigenvalues(D)
    assert s["r_full"] == 3 and s["stress"]["mds_full"]["raw"] < 1e-12
    energy = np.cumsum(lam[:3]) / lam[:3].sum()
    assert s["r_low"] == int(np.argmax(energy >= 1 - 1e-3)) + 1
    np.testing.assert_allclose(arrays["eigenvalues"][:3], lam[:3], rtol=1e-9)
    assert s["spectrum"]["lambda1_share"] == pytest.approx(lam[0] / lam[:3].sum(), rel=1e-9)
    raw, opt = _stress_np(D, E)
    assert s["stress"]["random"]["raw"] == pytest.approx(raw, rel=1e-9)
    assert s["stress"]["random"]["optimal"] == pytest.approx(opt, rel=1e-9)
    low = _pairwise(arrays["coords_low"])
    assert s["stress"]["mds_low"]["raw"] == pytest.approx(_stress_np(D, low)[0], rel=1e-9)
    assert s["parameters"]["model_d"] == parameter_rows(14, {"m": (8, s["r_low"], 1e-3)})["m"]


@pytest.mark.slow  # compile-heavy; tests/experiments/test_stress_matrix_free.py covers the default suite
def test_matrix_free_tables_equal_dense_tables():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.full(30, 0.5), size=16)
    X = {"ramp": np.arange(16.0)[:, None]}
    with jax.enable_x64(True):
        D = np.asarray(geo.hellinger_matrix(P), np.float64)
        dense, _ = dense_tables(D, D, {"ramp": _pairwise(X["ramp"])}, smacof_max_iter=2,
                                smacof_tol=None, **TABLES)
        mf, arrays = matrix_free_tables(P, X, k=15, metric="chord", seed=0, exact_max=100,
                                        pairs=1000, **TABLES)
    assert mf["k"] == 15 and mf["geometry"] == "matrix_free" and not mf["notes"]
    for key in ("mds_low", "mds_low_alt", "ramp"):
        for scale in ("raw", "optimal"):
            assert mf["stress"][key][scale] == pytest.approx(dense["stress"][key][scale], rel=1e-6)
    assert mf["r_low"] == dense["r_low"] and mf["spectrum"]["erank"].startswith("not computed")
    # the closed-form trace of B is the sum of all its eigenvalues
    assert arrays["trace"] == pytest.approx(_b_eigenvalues(D).sum(), rel=1e-9)
    few, _ = matrix_free_tables(P, X, k=2, metric="chord", seed=0, exact_max=100, pairs=1000,
                                **TABLES)
    assert few["r_low"] == 2 and few["stress"]["mds_low"]["energy_target_reached"] is False
    assert few["parameters"]["paper_d"]["energy_target_reached"] is False
