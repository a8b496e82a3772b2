"""The statistics the checks rely on, against independent computations (the harness, the CLI
and the checks on a tiny configuration: tests/ntk/test_ntk_harness.py)."""
import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk import appendix_a, checks, conjecture, theorems
from ntk.conjecture import ConjectureConfig
from ntk.result import CheckResult
from ntk.sweeps import SweepConfig

NAMES = ["theorem1_necessity", "theorem4_separation", "lemma1_linearization",
         "lemma2_sufficiency", "lemma3_linear_displacement", "lemma4_distortion_bounds",
         "lemma5_hellinger_monotonicity", "monotonicity_conjecture"]


def test_registry_names_are_the_required_ones():
    assert list(checks.CHECKS)[:len(NAMES)] == NAMES


def test_check_result_serialises_with_the_shared_converter():
    r = CheckResult("x", True, np.float64(0.5), 1.0, "d",
                    {"a": np.arange(3), "b": np.inf, "c": float("nan")})
    d = json.loads(json.dumps(r.to_dict()))
    assert d == {"name": "x", "passed": True, "statistic": 0.5, "threshold": 1.0, "detail": "d",
                 "data": {"a": [0, 1, 2], "b": "inf", "c": None}}


def test_sweep_config_validation():
    with pytest.raises(ValueError, match="increasing"):
        SweepConfig(widths=(64,))
    with pytest.raises(ValueError, match="20 tables"):
        ConjectureConfig(tables=5)
    with pytest.raises(ValueError, match="horizon_steps"):
        SweepConfig(horizon_steps=30)
    with pytest.raises(ValueError, match="seed_subset"):
        SweepConfig(seed_subset=(7,))


def test_bag_bayes_probability_matches_enumeration():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, size=(6, 5))
    x[:, 0] = 3
    x[:, -1] = 0                                     # x_0 != x_last
    p = theorems.bag_bayes_probability(x)
    for row, prob in zip(x, p):
        orders = [o for o in itertools.permutations(row) if o[0] != o[-1]]
        assert prob == pytest.approx(np.mean([o[0] > o[-1] for o in orders]), abs=1e-12)


def test_kernel_regression_matches_numpy_ridge():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 6))
    K, Kt = A @ A.T + np.eye(6), rng.normal(size=(3, 6))
    y = rng.normal(size=(6, 2))
    with jax.enable_x64(True):
        got = np.asarray(theorems.kernel_regression(jnp.asarray(K), jnp.asarray(y),
                                                    jnp.asarray(Kt), 0.1))
    reg = 0.1 * np.trace(K) / 6                      # neural-tangents scales diag_reg
    np.testing.assert_allclose(got, Kt @ np.linalg.solve(K + reg * np.eye(6), y), rtol=1e-8)


def test_heldout_losses_match_numpy_and_the_exact_fit_floor():
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.ones(5), size=4)
    P_hat = np.stack([rng.dirichlet(np.ones(5), size=4) for _ in range(2)])
    A = rng.normal(size=(4, 4))
    K = A @ A.T + 0.5 * np.eye(4)
    got = conjecture.heldout_losses(jnp.asarray(K)[None], P, P_hat, 0.05)   # [1, 2]
    reg = 0.05 * np.trace(K) / 4
    for s in range(2):
        mean = P_hat[s].mean(0)
        yhat = mean + K @ np.linalg.solve(K + reg * np.eye(4), P_hat[s] - mean)
        ref = np.mean(np.sum((yhat - P) ** 2, 1) + 1 - np.sum(P * P, 1))
        assert got[0, s] == pytest.approx(ref, rel=1e-4)


def test_conjecture_tables_are_norm_matched_and_the_mds_table_has_low_stress():
    import posjax.geometry as geo
    from posjax.data.synthetic import three_regime_corpus
    P = three_regime_corpus(10, 12, mixing="linear", seed=0).P
    names, tables = conjecture.conjecture_tables(P, 4, 20)
    assert len(names) == len(set(names)) == 20 and tables.shape == (20, 10, 4)
    np.testing.assert_allclose(np.sqrt(np.mean(np.sum(tables ** 2, -1), -1)), 1.0, rtol=1e-9)
    np.testing.assert_allclose(tables.mean(1), 0.0, atol=1e-12)
    H = jnp.asarray(conjecture.lstats.hellinger_chord(P), jnp.float32)
    s = [float(geo.stress(H, coords=jnp.asarray(t, jnp.float32), scale="optimal"))
         for t in tables]
    assert s[names.index("hellinger_mds")] == min(s)


def test_bootstrap_ci_brackets_the_mean():
    v = np.random.default_rng(0).normal(1.0, 0.1, size=20)
    lo, hi = conjecture.bootstrap_ci(v, num=500)
    assert lo < v.mean() < hi and hi - lo < 0.2


def test_tangent_spectrum():
    V = 6
    np.testing.assert_allclose(appendix_a.tangent_spectrum(np.eye(V)), np.ones(V - 1))
    lam = appendix_a.tangent_spectrum(np.eye(V) + 5.0 * np.ones((V, V)))  # 1 1^T is invisible
    np.testing.assert_allclose(lam, np.ones(V - 1), atol=1e-12)
