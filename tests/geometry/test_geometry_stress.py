"""Stress (raw, optimal scale, Kruskal), strain and SMACOF: worked values and properties."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.geometry as geo

SQ2 = math.sqrt(2.0)


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture
def one_hot():
    """P = I_3 (chord): D = sqrt(2) off the diagonal; 1-D cMDS axis (-1, 0, 1)/sqrt(2)."""
    with jax.enable_x64(True):
        D = geo.hellinger_matrix(jnp.eye(3))
        X = jnp.array([[-1.0], [0.0], [1.0]]) / SQ2
        yield D, X


def test_worked_values_of_the_one_hot_example(one_hot):
    D, X = one_hot
    assert float(geo.stress(D, coords=X)) == pytest.approx(1 / 6, abs=1e-15)
    X9 = jnp.array([[-2 * SQ2 / 3], [0.0], [2 * SQ2 / 3]])
    assert float(geo.stress(D, coords=X9)) == pytest.approx(1 / 9, abs=1e-15)
    assert float(geo.stress(D, coords=X, scale="optimal")) == pytest.approx(1 / 9, abs=1e-14)
    assert float(geo.stress(D, coords=X, mode="optimal_scale")) == pytest.approx(1 / 9, abs=1e-14)
    assert float(geo.optimal_scale(D, coords=X)) == pytest.approx(4 / 3, abs=1e-14)
    assert float(geo.stress(D, coords=X, sqrt=True)) == pytest.approx(math.sqrt(1 / 6), abs=1e-14)
    emb = float(geo.stress(D, coords=X, denominator="embedding"))
    assert emb == pytest.approx(1 / 3, abs=1e-14)


def test_smacof_from_cmds_reaches_one_ninth(one_hot):
    D, X = one_hot
    Y, hist = geo.smacof(D, X, return_history=True)
    np.testing.assert_allclose(np.asarray(Y).ravel(), [-2 * SQ2 / 3, 0.0, 2 * SQ2 / 3], atol=1e-12)
    assert float(hist[0]) == pytest.approx(1 / 6, abs=1e-15)
    assert float(hist[-1]) == pytest.approx(1 / 9, abs=1e-14)
    assert float(geo.stress(D, coords=Y)) < float(geo.stress(D, coords=X))


def test_stress_invariant_to_rotation_translation_not_scale(x64):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 3))
    D = geo.pairwise_distances(jnp.asarray(rng.normal(size=(24, 4))))
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    s = float(geo.stress(D, coords=X))
    assert float(geo.stress(D, coords=X @ Q + rng.normal(size=3))) == pytest.approx(s, abs=1e-12)
    assert float(geo.stress(D, coords=2.0 * X)) != pytest.approx(s, abs=1e-3)


def test_optimal_scale_closed_form_matches_brute_force(x64):
    rng = np.random.default_rng(1)
    D = geo.pairwise_distances(jnp.asarray(rng.normal(size=(24, 5))))
    E = geo.pairwise_distances(jnp.asarray(rng.normal(size=(24, 2))))
    iu = np.triu_indices(24, 1)
    d, e = np.asarray(D)[iu], np.asarray(E)[iu]

    def raw(a):
        return ((a * e - d) ** 2).sum() / (d ** 2).sum()

    lo, hi = 0.0, 10.0  # golden-section search on the convex 1-D function
    g = (math.sqrt(5) - 1) / 2
    for _ in range(200):
        a1, a2 = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, a2) if raw(a1) < raw(a2) else (a1, hi)
    best = raw(0.5 * (lo + hi))
    closed = float(geo.stress(D, distances=E, scale="optimal"))
    assert closed == pytest.approx(best, abs=1e-9)
    assert closed <= float(geo.stress(D, distances=E)) + 1e-15
    assert closed <= float(geo.stress(D, distances=E, scale="max_normalized")) + 1e-15
    # The optimal-scale value is the same under Kruskal's embedding denominator.
    emb = float(geo.stress(D, distances=E, scale="optimal", denominator="embedding"))
    assert emb == pytest.approx(closed, abs=1e-12)


def test_zero_embedding_conventions(x64):
    D = geo.hellinger_matrix(jnp.eye(3))
    Z = jnp.zeros((3, 3))
    assert float(geo.stress(D, distances=Z, scale="optimal")) == 1.0
    assert float(geo.stress(D, distances=Z)) == pytest.approx(1.0)
    assert math.isinf(float(geo.stress(D, distances=Z, denominator="embedding")))


def test_strain_optimality_of_cmds_and_smacof_beats_it_on_stress(x64):
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.full(60, 0.2), size=24)
    D = geo.hellinger_matrix(P)
    B = geo.double_center(D)
    cm = geo.classical_mds(D, dim=2).coords
    sm, hist = geo.smacof(D, cm, return_history=True, max_iter=500)
    assert float(geo.strain(cm, B)) <= float(geo.strain(sm, B)) + 1e-12  # Eckart-Young
    assert float(geo.stress(D, coords=sm)) < float(geo.stress(D, coords=cm))
    h = np.asarray(hist)
    assert np.all(np.diff(h) <= 1e-15)  # stress numerator non-increasing
    # Eckart-Young: the strain of cMDS is the tail energy of the spectrum.
    w = np.asarray(geo.check_euclidean(D).eigenvalues)
    assert float(geo.strain(cm, B)) == pytest.approx((w[2:] ** 2).sum() / (w ** 2).sum(), rel=1e-9)


def test_smacof_random_init_and_history_monotone(x64):
    D = geo.hellinger_matrix(np.random.default_rng(3).dirichlet(np.ones(60), size=24))
    Y, hist = geo.smacof(D, "random", dim=2, seed=1, return_history=True, max_iter=100, tol=0.0)
    assert Y.shape == (24, 2) and 2 <= hist.shape[0] <= 101
    assert np.all(np.diff(np.asarray(hist)) <= 1e-15)


def test_smacof_stopping_rule_scales_with_float_resolution_and_can_run_all_updates(one_hot):
    D, X = one_hot  # converges to 1/9 in a few updates, then the stress stops changing
    _, stalled = geo.smacof(D, X, return_history=True, max_iter=50, tol=0.0)
    _, every = geo.smacof(D, X, return_history=True, max_iter=50, tol=-1.0)
    assert stalled.shape[0] < 51 and every.shape[0] == 51  # tol < 0: all max_iter updates
    assert float(every[-1]) == pytest.approx(1 / 9, abs=1e-14)
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        D2 = np.asarray(geo.hellinger_matrix(rng.dirichlet(np.full(40, 0.3), size=20)), dtype)
        _, default = geo.smacof(D2, "random", dim=2, return_history=True, max_iter=400)
        _, explicit = geo.smacof(D2, "random", dim=2, return_history=True, max_iter=400,
                                 tol=4 * float(np.finfo(dtype).eps))
        np.testing.assert_array_equal(np.asarray(default), np.asarray(explicit))
    with pytest.raises(ValueError, match="tol"):
        geo.smacof(D, X, tol=float("nan"))


def test_stress_bad_inputs():
    D = np.asarray(geo.hellinger_matrix(np.eye(3)))
    with pytest.raises(ValueError, match="exactly one"):
        geo.stress(D)
    with pytest.raises(ValueError, match="exactly one"):
        geo.stress(D, coords=np.zeros((3, 1)), distances=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="rows"):
        geo.stress(D, coords=np.zeros((4, 1)))
    with pytest.raises(ValueError, match="shape"):
        geo.stress(D, distances=np.zeros((4, 4)))
    with pytest.raises(ValueError, match="scale"):
        geo.stress(D, coords=np.zeros((3, 1)), scale="minmax")
    with pytest.raises(ValueError, match="identically zero"):
        geo.stress(np.zeros((3, 3)), coords=np.zeros((3, 1)))
    with pytest.raises(ValueError, match="init"):
        geo.smacof(D, "pca", dim=2)
