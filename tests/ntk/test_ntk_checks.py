"""Check results, controls and negative controls on a tiny configuration, the statistics the
checks rely on (against independent computations) and the CLI (the full quick run is slow)."""
import itertools
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk import appendix_a, checks, theorems
from ntk.__main__ import main
from ntk.conjecture import ConjectureConfig
from ntk.result import CheckResult
from ntk.sweeps import SweepConfig

TINY = SweepConfig(widths=(16, 32), seeds=(0,), num_positions=8, vocab_size=12, lemma_steps=10,
                   bottleneck_width=4, sufficiency_widths=(16,), sufficiency_sequences=64,
                   sufficiency_resamples=2, theorem1_train=32, theorem1_test=64,
                   theorem4_width=32, theorem4_samples=50, theorem4_steps=20,
                   theorem4_seeds=(0,),
                   conjecture=ConjectureConfig(
                       corpora=("three_regime:linear:0", "three_regime:hard:1", "cyclic:1:0",
                                "cyclic:2:0"), positions=12, vocab=10, dim=4, random_tables=1,
                       noise_levels=(0.3, 3.0), seeds=(0, 1), widths=(16, 32), mc_samples=1,
                       bootstrap=200))
NAMES = ["theorem1_necessity", "theorem4_separation", "lemma1_linearization",
         "lemma2_sufficiency", "lemma3_linear_displacement", "lemma4_distortion_bounds",
         "lemma5_hellinger_monotonicity", "monotonicity_conjecture"]


def test_registry_names_are_the_required_ones():
    assert list(checks.CHECKS) == NAMES


def test_check_result_serialises_with_the_shared_converter():
    r = CheckResult("x", True, np.float64(0.5), 1.0, "d",
                    {"a": np.arange(3), "b": np.inf, "c": float("nan")})
    d = json.loads(json.dumps(r.to_dict()))
    assert d == {"name": "x", "passed": True, "statistic": 0.5, "threshold": 1.0, "detail": "d",
                 "data": {"a": [0, 1, 2], "b": "inf", "c": None}}


def test_sweep_config_validation():
    with pytest.raises(ValueError, match="increasing"):
        SweepConfig(widths=(64,))
    with pytest.raises(ValueError, match="bottleneck"):
        SweepConfig(bottleneck_width=60)


@pytest.fixture(scope="module")
def tiny_results():
    return checks.run_all(config=TINY)


def test_every_check_has_control_negative_control_and_recorded_calls(tiny_results):
    assert [r.name for r in tiny_results] == NAMES
    with_nt = 0
    for r in tiny_results:
        assert isinstance(r.passed, bool) and r.detail
        assert np.isfinite(r.statistic) and np.isfinite(r.threshold)
        for key in ("control", "negative_control"):
            c = r.data[key]
            assert set(c) >= {"statistic", "threshold", "passed"}, (r.name, key)
            assert isinstance(c["passed"], bool)
        assert r.data["versions"]["jax"] == jax.__version__
        with_nt += bool(r.data["neural_tangents"])
        json.dumps(r.to_dict())
    assert with_nt >= 7
    calls = {r.name: set(r.data["neural_tangents"]) for r in tiny_results}
    assert {"stax.GlobalSelfAttention", "stax.serial.kernel_fn",
            "predict.gradient_descent_mse.fn"} <= calls["theorem1_necessity"]
    assert "linearize.fn" in calls["lemma1_linearization"]       # replayed from the sweep
    assert "empirical_ntk_fn.fn" in calls["lemma4_distortion_bounds"]
    assert {"monte_carlo_kernel_fn.fn", "stax.serial.kernel_fn"} <= calls["monotonicity_conjecture"]


def test_controls_hold_and_negative_controls_fail_where_settled(tiny_results):
    by = {r.name: r for r in tiny_results}
    # Exact by construction even on the tiny configuration:
    assert by["theorem4_separation"].data["control"]["passed"]        # exact P: stays tied
    assert by["lemma2_sufficiency"].data["control"]["statistic"] < 1e-4   # context-free
    assert not by["lemma2_sufficiency"].data["negative_control"]["passed"]
    assert by["lemma3_linear_displacement"].data["control"]["passed"]   # one step is affine
    assert not by["lemma4_distortion_bounds"].data["negative_control"]["passed"]  # bottleneck
    t1 = by["theorem1_necessity"].data
    assert t1["nope"]["perm_deviation"] <= 1e-6 and t1["control"]["passed"]
    assert t1["causal_nope_dev"] > 1e-3                  # the causal mask is positional
    conj = by["monotonicity_conjecture"].data
    assert len(conj["tables"]) >= 8 and len(conj["seeds"]) == 2
    assert conj["ci"][0] <= by["monotonicity_conjecture"].statistic <= conj["ci"][1]


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


def test_cli_rejects_unknown_check_in_one_line():
    with pytest.raises(SystemExit) as e:
        main(["--checks", "nope"])
    assert "unknown check" in str(e.value)


def test_cli_writes_json_report_and_plots(tmp_path, monkeypatch, capsys, tiny_results):
    monkeypatch.setattr(checks, "run_all", lambda **kw: tiny_results)
    code = main(["--quick", "--out", str(tmp_path)])
    assert code in (0, 1)
    payload = json.loads((tmp_path / "ntk_checks.json").read_text())
    assert [r["name"] for r in payload["results"]] == NAMES
    assert all("control" in r["data"] and "negative_control" in r["data"]
               for r in payload["results"])
    report = (tmp_path / "report.md").read_text()
    for name in NAMES:
        assert os.path.getsize(tmp_path / f"{name}.png") > 1000
        assert f"({name}.png)" in report
    assert "negative control" in capsys.readouterr().out


@pytest.mark.slow
def test_full_quick_run(tmp_path):
    assert main(["--quick", "--out", str(tmp_path)]) in (0, 1)
    assert (tmp_path / "report.md").exists()
