"""The statistics the checks rely on, against independent computations (the harness, the CLI
and the checks on a tiny configuration: tests/ntk/test_ntk_harness.py)."""
import itertools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk import appendix_a, checks, theorems
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


def test_tangent_spectrum():
    V = 6
    np.testing.assert_allclose(appendix_a.tangent_spectrum(np.eye(V)), np.ones(V - 1))
    lam = appendix_a.tangent_spectrum(np.eye(V) + 5.0 * np.ones((V, V)))  # 1 1^T is invisible
    np.testing.assert_allclose(lam, np.ones(V - 1), atol=1e-12)
