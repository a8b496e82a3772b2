"""Lemma / theorem quantities (ntk.lemma_statistics) against independent recomputations."""
import numpy as np
import pytest

from ntk import lemma_statistics as lstats


@pytest.fixture(scope="module")
def P():
    return np.random.default_rng(0).dirichlet(np.full(30, 0.3), size=9)


def test_hellinger_chord_golden_and_matches_geometry(P):
    two_points = np.array([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(lstats.hellinger_chord(two_points)[0, 1], np.sqrt(2), rtol=1e-15)
    import posjax.geometry as geo
    np.testing.assert_allclose(np.asarray(geo.hellinger_matrix(P)), lstats.hellinger_chord(P),
                               atol=1e-6)
    bc = np.sqrt(P) @ np.sqrt(P).T
    np.testing.assert_allclose(lstats.hellinger_chord(P) ** 2, np.clip(2 - 2 * bc, 0, None),
                               atol=1e-12)


def test_hellinger_inequalities_hold_and_are_tight_for_disjoint_supports(P):
    slack = lstats.hellinger_inequalities(P)
    assert max(slack.values()) <= 1e-12
    # Disjoint point masses: d_H^2 = 2 = ||dP||_1 (lower bound tight).
    tight = lstats.hellinger_inequalities(np.eye(3))
    assert abs(tight["lower_l1"]) < 1e-12


def test_clr_distances_are_log_ratio_distances():
    P = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]])
    v = np.log(P[0] / P[1])
    np.testing.assert_allclose(lstats.clr_distances(P)[0, 1], np.linalg.norm(v - v.mean()),
                               rtol=1e-12)
    with pytest.raises(ValueError, match="strictly positive"):
        lstats.clr_distances(np.eye(2))


def test_regression_recovers_an_exact_affine_map(P):
    # Delta p = A P + b with P on a 2-dimensional affine span: R^2 = 1 and the operator's
    # singular values on the span are those of A restricted to it.
    rng = np.random.default_rng(1)
    Q = rng.dirichlet(np.ones(30), size=3)
    w = rng.dirichlet(np.ones(3), size=12)
    P3 = w @ Q
    A = rng.normal(size=(7, 30))
    b = rng.normal(size=7)
    dp = P3 @ A.T + b
    reg = lstats.displacement_regression(dp, P3)
    assert reg["rank"] == 2
    assert reg["r2_P"] == pytest.approx(1.0, abs=1e-10)
    basis = reg["basis"]
    np.testing.assert_allclose(np.linalg.svd(reg["A"], compute_uv=False),
                               np.linalg.svd(A @ basis, compute_uv=False), rtol=1e-8)
    noisy = lstats.displacement_regression(dp + rng.normal(size=dp.shape), P3)
    assert noisy["r2_P"] < 0.999
    with pytest.raises(ValueError, match="too high"):
        lstats.displacement_regression(rng.normal(size=(9, 4)), P)


def test_distortion_of_an_isometry_is_one():
    rng = np.random.default_rng(2)
    Q = rng.dirichlet(np.ones(20), size=3)
    P3 = rng.dirichlet(np.ones(3), size=10) @ Q
    U, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    dc = lstats.distortion_constants(3.0 * P3 @ U.T, P3)   # 3 x orthogonal map
    assert dc["c1"] == pytest.approx(3.0, rel=1e-8) and dc["c2"] == pytest.approx(3.0, rel=1e-8)
    assert dc["pair_ratio"] == pytest.approx(1.0, rel=1e-8)


def test_spearman_and_violations():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(8, 3))
    D = lstats.pairwise_distances(X)
    same = lstats.monotonicity_spearman(X, D ** 2 + 1.0)    # monotone transform
    assert same["rho"] == pytest.approx(1.0) and same["violations"] == 0.0
    rev = lstats.monotonicity_spearman(X, 10.0 - D)
    assert rev["rho"] == pytest.approx(-1.0) and rev["violations"] == 1.0
    assert same["num_pairs"] == 28


def test_separation_stats():
    table = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])
    st = lstats.separation_stats(table)
    assert st["min_distance"] == pytest.approx(3.0)
    assert st["mean_distance"] == pytest.approx(4.0)
    assert st["raw_rank"] == 2 and st["numerical_rank"] == 2
    tied = lstats.separation_stats(np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]]))
    assert tied["min_distance"] == 0.0 and tied["min_over_mean"] == 0.0


def test_permutation_deviation():
    x = np.random.default_rng(4).normal(size=(2, 5, 3))
    perms = [np.array([4, 3, 2, 1, 0]), np.array([1, 0, 2, 3, 4])]
    equivariant = lambda z: z - z.mean(axis=1, keepdims=True)
    assert lstats.permutation_deviation(equivariant, x, perms) < 1e-12
    positional = lambda z: z + np.arange(5)[None, :, None]
    assert lstats.permutation_deviation(positional, x, perms) > 0.5


def test_loglog_slope():
    w = np.array([64, 256, 1024])
    assert lstats.loglog_slope(w, 3.0 * w ** -0.5) == pytest.approx(-0.5)
