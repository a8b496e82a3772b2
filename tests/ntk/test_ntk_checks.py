"""Check results, the theorem tasks, a tiny lemma sweep and the CLI (the full quick run is slow)."""
import json

import jax
import numpy as np
import pytest

from ntk import checks, theorems
from ntk.__main__ import main
from ntk.result import CheckResult
from ntk.sweeps import SweepConfig

TINY = SweepConfig(widths=(16, 32), seeds=(0,), num_positions=8, vocab_size=12,
                   lemma_steps=50, chunk_steps=250, max_steps=500,
                   sufficiency_widths=(16,), sufficiency_sequences=64)
LEMMAS = ["lemma1_linearization", "lemma2_sufficiency", "lemma3_linear_displacement",
          "lemma4_distortion_bounds", "lemma5_hellinger_monotonicity", "monotonicity_conjecture"]


def test_registry_names_are_the_required_ones():
    assert list(checks.CHECKS) == ["theorem1_necessity", "theorem4_separation"] + LEMMAS


def test_check_result_serialises():
    r = CheckResult("x", True, np.float64(0.5), 1.0, "d", {"a": np.arange(3), "b": np.inf})
    d = json.loads(json.dumps(r.to_dict()))
    assert d == {"name": "x", "passed": True, "statistic": 0.5, "threshold": 1.0, "detail": "d",
                 "data": {"a": [0, 1, 2], "b": "inf"}}


def test_sweep_config_validation():
    with pytest.raises(ValueError, match="increasing"):
        SweepConfig(widths=(64,))
    with pytest.raises(ValueError, match="divide"):
        SweepConfig(lemma_steps=30)


@pytest.fixture(scope="module")
def tiny_results():
    return checks.run_all(config=TINY, names=LEMMAS)


def test_lemma_checks_structure(tiny_results):
    assert [r.name for r in tiny_results] == LEMMAS
    for r in tiny_results:
        assert isinstance(r.passed, bool) and isinstance(r.detail, str) and r.detail
        assert np.isfinite(r.statistic) and np.isfinite(r.threshold)
        assert r.data["versions"]["jax"] == jax.__version__
        assert r.data["versions"]["neural_tangents"] != "not installed"
        assert list(r.data["config"]["widths"]) == [16, 32]
        json.dumps(r.to_dict())


def test_lemma_quantities_have_the_right_shape(tiny_results):
    by = {r.name: r for r in tiny_results}
    assert len(by["lemma1_linearization"].data["lazy_error"]) == 2
    assert max(by["lemma5_hellinger_monotonicity"].data["inequalities"].values()) <= 1e-12
    assert by["lemma2_sufficiency"].data["control_gap"] < 1e-5    # context-free: exact
    assert 0 <= by["lemma3_linear_displacement"].data["r2_P"][-1] <= 1


def test_order_task_is_reversal_closed():
    tokens, labels = theorems.order_task(10, 5, 4, seed=0)
    np.testing.assert_array_equal(tokens[10:], tokens[:10, ::-1])
    np.testing.assert_array_equal(labels[10:], 1 - labels[:10])
    assert np.all(tokens[:, 0] != tokens[:, -1])


def test_pointer_task_is_closed_under_the_swap():
    tokens, labels, frac = theorems.pointer_task(200, 6, 5, swap=(1, 4), seed=0)
    assert np.all(tokens[np.arange(len(labels)), labels] == 0)
    assert np.all((tokens == 0).sum(1) == 1)
    at = np.isin(labels, (1, 4))
    assert frac == pytest.approx(at.mean())
    swapped = tokens[at][:, [0, 4, 2, 3, 1, 5]]
    rows = {r.tobytes() for r in tokens[at]}
    assert all(r.tobytes() in rows for r in swapped)


def test_tie_positions_shares_a_row():
    params = {"transformer": {"pes": {0: {"embedding": np.arange(12.0).reshape(4, 3)}}},
              "head": np.ones(2)}
    tied = theorems.tie_positions(params, np.array([0, 1, 1, 3]))
    np.testing.assert_array_equal(theorems.pe_table(tied)[2], np.arange(3.0, 6.0))
    np.testing.assert_array_equal(tied["head"], np.ones(2))


def test_nope_encoder_is_permutation_equivariant():
    cfg = theorems.encoder_config("none", length=5, vocab_size=6, d_model=16, num_layers=2)
    enc = theorems.encoder_fn(cfg, seed=0)
    x = np.random.default_rng(0).integers(0, 6, size=(4, 5))
    from ntk import lemma_statistics as lstats
    perms = [np.array([4, 2, 0, 1, 3]), np.array([1, 0, 2, 3, 4])]
    assert lstats.permutation_deviation(enc, x, perms) <= 1e-5
    learned = theorems.encoder_fn(theorems.encoder_config(
        "learned", length=5, vocab_size=6, d_model=16, pe_options={"std": 1.0}), seed=0)
    assert lstats.permutation_deviation(learned, x, perms) > 1e-3


def test_cli_rejects_unknown_check_in_one_line():
    with pytest.raises(SystemExit) as e:
        main(["--checks", "lemma9_missing"])
    assert str(e.value).startswith("error: unknown check(s) ['lemma9_missing']")
    assert "\n" not in str(e.value)


def test_cli_writes_json(tmp_path, monkeypatch, capsys, tiny_results):
    monkeypatch.setattr(checks, "quick_config", lambda: TINY)
    code = main(["--quick", "--checks", "lemma3_linear_displacement,lemma4_distortion_bounds",
                 "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "lemma3_linear_displacement" in out and "statistic" in out
    payload = json.loads((tmp_path / "ntk_checks.json").read_text())
    assert [r["name"] for r in payload["results"]] == ["lemma3_linear_displacement",
                                                      "lemma4_distortion_bounds"]
    assert payload["versions"]["neural_tangents"] and payload["config"]["widths"] == [16, 32]
    assert code == (0 if all(r["passed"] for r in payload["results"]) else 1)


@pytest.mark.slow
def test_full_quick_run(tmp_path):
    results = checks.run_all(quick=True)
    assert [r.name for r in results] == list(checks.CHECKS)
    by = {r.name: r for r in results}
    # The theorem checks and the Euclidean-geometry lemmas hold on this testbed.
    for name in ("theorem1_necessity", "theorem4_separation", "lemma1_linearization",
                 "lemma3_linear_displacement", "lemma4_distortion_bounds"):
        assert by[name].passed, by[name].detail
