"""The mutation harness (ntk.mutants): the poisons, the poison-aware cache, every check run
through the harness on a tiny configuration, the CLI, and the committed run behind the docs."""
import dataclasses
import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk import checks, mutants
from ntk.__main__ import main
from ntk.report import nt_moves
from ntk.recording import POISON_TARGETS, cached_with_calls, neural_tangents, poisoned
from ntk.sweeps import SweepConfig

TINY = SweepConfig(widths=(8, 16, 24), seeds=(0, 1), num_positions=8, vocab_size=12,
                   lemma_steps=20, record_every=5, horizon_steps=10, window_grid=(),
                   slope_bootstrap=200, sufficiency_widths=(16,), sufficiency_sequences=64,
                   sufficiency_resamples=2, theorem1_train=32, theorem1_test=64,
                   theorem4_width=32, theorem4_samples=50, theorem4_steps=20,
                   theorem4_seeds=(0,))
# The lemma checks on the toy, whose mutants the tiny run settles by construction.
LEMMAS = ["lemma1_linearization", "lemma3_linear_displacement", "lemma4_distortion_bounds",
          "lemma5_hellinger_monotonicity"]
GUARDS = ["theorem1_necessity", "theorem4_separation", "lemma2_sufficiency"]


# --- poisons ------------------------------------------------------------------------------------

def _mlp():
    stax = neural_tangents().stax
    return stax.serial(stax.Dense(8), stax.Relu(), stax.Dense(1))


def test_kernel_poisons_return_the_nngp_and_the_shifted_ntk():
    _, _, kernel_fn = _mlp()
    x = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3)), jnp.float32)
    K, G = kernel_fn(x, None, "ntk"), kernel_fn(x, None, "nngp")
    assert float(jnp.max(jnp.abs(K - G))) > 1e-2                  # the two differ
    with poisoned("nt:kernel_fn"):
        np.testing.assert_allclose(kernel_fn(x, None, "ntk"), G, rtol=1e-6)
        np.testing.assert_allclose(kernel_fn(x, None, ("nngp", "ntk")).ntk, G, rtol=1e-6)
    with poisoned("nt:kernel_fn_shift"):
        np.testing.assert_allclose(kernel_fn(x, None, "ntk"), K + 0.5 * jnp.mean(jnp.diag(K)),
                                   rtol=1e-6)
    np.testing.assert_allclose(kernel_fn(x, None, "ntk"), K)       # restored after the block


def test_linearize_empirical_ntk_and_predict_poisons():
    nt = neural_tangents()
    f = lambda p, x: jnp.tanh(x @ p)                               # noqa: E731
    p = jnp.ones((3, 2)) * 0.3
    x = jnp.asarray(np.random.default_rng(1).normal(size=(4, 3)), jnp.float32)
    with poisoned("nt:linearize"):
        assert nt.linearize(f, p) is f
    theta = nt.empirical_ntk_fn(f, trace_axes=(), vmap_axes=0)(x, None, p)      # [4, 4, 2, 2]
    with poisoned("nt:empirical_ntk_fn"):
        iso = nt.empirical_ntk_fn(f, trace_axes=(), vmap_axes=0)(x, None, p)
    mat = lambda t: np.asarray(t).transpose(0, 2, 1, 3).reshape(8, 8)         # noqa: E731
    np.testing.assert_allclose(mat(iso), np.trace(mat(theta)) / 8 * np.eye(8), rtol=1e-6)
    K = jnp.eye(4) + 0.1
    y = jnp.arange(4.0)[:, None]
    with poisoned("nt:predict"):
        pred = nt.predict.gradient_descent_mse(K, y, diag_reg=0.1)(None, 0.5, 0.5, K)[1]
    np.testing.assert_array_equal(np.asarray(pred), 0.5)


def test_poisons_are_checked_and_do_not_nest():
    with pytest.raises(ValueError, match="unknown poison"):
        with poisoned("nt:stax"):
            pass
    with pytest.raises(ValueError, match="already active"):
        with poisoned("nt:predict"), poisoned("nt:linearize"):
            pass


def test_cache_recomputes_only_what_used_the_poisoned_function():
    counts = {"lin": 0, "plain": 0}

    @cached_with_calls()
    def uses_linearize(a):
        counts["lin"] += 1
        g = neural_tangents().linearize(lambda p, x: jnp.sin(p) * x, jnp.float32(a))
        return float(g(jnp.float32(a + 0.5), 2.0))

    @cached_with_calls()
    def plain(a):
        counts["plain"] += 1
        return a * 2

    clean = uses_linearize(0.1)
    plain(1)
    with poisoned("nt:linearize"):
        bad = uses_linearize(0.1)
        plain(1)
    assert counts == {"lin": 2, "plain": 1}
    assert bad == pytest.approx(float(np.sin(0.6) * 2.0), rel=1e-6)   # the exact model
    assert abs(bad - clean) > 1e-3
    assert uses_linearize(0.1) == clean and counts["lin"] == 2      # the clean entry is kept


def test_verdict_vocabulary_and_overrides():
    assert mutants.verdict_of([True, True]) == "PASS"
    assert mutants.verdict_of([False]) == "FAIL"
    assert mutants.verdict_of([True, False, True]) == "FRAGILE"
    cfg = mutants.apply_overrides(TINY, {"conjecture.samples": 7, "lr": 0.1})
    assert cfg.conjecture.samples == 7 and cfg.lr == 0.1
    assert cfg.conjecture.dim == TINY.conjecture.dim
    with pytest.raises(ValueError, match="no field 'nope'"):
        mutants.apply_overrides(TINY, {"nope.x": 1})


# --- the harness on a tiny configuration --------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_results():
    return checks.run_all(config=TINY, names=GUARDS[1:] + LEMMAS)


def test_every_check_reports_mutants_robustness_and_flips_within_its_calls(tiny_results):
    for r in tiny_results:
        spec = checks.SPECS[r.name]
        d = r.data
        assert isinstance(r.passed, bool) and r.detail and np.isfinite(r.threshold)
        for key in ("control", "negative_control"):
            assert set(d[key]) >= {"statistic", "threshold", "passed"}, (r.name, key)
        assert set(d["mutants"]) == set(mutants.NT_POISONS) | {
            f"premise:{k}" for k in spec.premise_breakers}
        called = set(d["nt_called"])
        assert set(d["neural_tangents"]) <= called, r.name
        for poison, row in d["mutants"].items():
            if poison in POISON_TARGETS and POISON_TARGETS[poison] not in called:
                assert row.get("skipped") == "not called"
        assert d["robustness"]["default"]["verdict"] == ("PASS" if r.passed else "FAIL")
        assert len(d["robustness"]) == 1 + sum(
            len(v(TINY) if callable(v) else v) for v in spec.nuisance.values())
        verdicts = {row["verdict"] for row in d["robustness"].values()}
        assert d["robust_verdict"] == (verdicts.pop() if len(verdicts) == 1 else "FRAGILE")
        json.dumps(r.to_dict())


def test_poisoned_theory_sides_fail_the_lemmas(tiny_results):
    by = {r.name: r.data["mutants"] for r in tiny_results}
    # The exact model in place of the linearised one: nothing is compared, so L1 and L3 fail.
    for name in ("lemma1_linearization", "lemma3_linear_displacement"):
        assert by[name]["nt:linearize"]["passed"] is False, name
    # An isotropic Theta_p: c2/c1 = 1 cannot shrink and misses the exact displacements.
    assert by["lemma4_distortion_bounds"]["nt:empirical_ntk_fn"]["passed"] is False
    # L5's statistic is the score of the nt.linearize displacements: the exact model in their
    # place moves it to the exact displacements' score.
    l5 = next(r for r in tiny_results if r.name == "lemma5_hellinger_monotonicity")
    assert l5.statistic == pytest.approx(min(l5.data["linearized_score"]), abs=0)
    assert "linearize" in nt_moves(l5)
    assert l5.data["mutants"]["nt:linearize"]["statistic"] == pytest.approx(
        l5.data["exact_worst"], rel=1e-6)
    # Guards of a symmetry or an identity call no function whose poison could matter.
    lem2 = next(r for r in tiny_results if r.name == "lemma2_sufficiency")
    assert lem2.data["nt_called"] == [] and lem2.data["neural_tangents"] == []


def test_premise_breakers_fail_and_controls_hold(tiny_results):
    by = {r.name: r for r in tiny_results}
    for name in ("lemma2_sufficiency", "lemma3_linear_displacement", "lemma4_distortion_bounds",
                 "theorem4_separation"):
        rows = {k: v for k, v in by[name].data["mutants"].items() if k.startswith("premise:")}
        assert rows and all(not v["passed"] for v in rows.values()), (name, rows)
    assert by["lemma2_sufficiency"].data["control"]["statistic"] < 1e-4
    assert by["lemma3_linear_displacement"].data["control"]["passed"]     # one step is affine
    assert by["lemma4_distortion_bounds"].data["control"]["passed"]       # exact containment
    assert by["theorem4_separation"].data["control"]["passed"]            # exact P stays tied
    l5 = by["lemma5_hellinger_monotonicity"].data
    assert l5["control"]["passed"] and not l5["negative_control"]["passed"]


def test_theorem1_is_a_symmetry_guard_and_a_positional_signal_breaks_it():
    t1 = checks.theorem1_necessity(TINY)
    assert t1.passed and t1.data["nope"]["perm_deviation"] <= 1e-6
    assert t1.data["causal_nope_dev"] > 1e-3 and t1.data["control"]["passed"]
    assert not t1.data["negative_control"]["passed"]          # the SUM embedding beats the bound
    assert not checks.theorem1_necessity(dataclasses.replace(TINY, theorem1_pe="SUM")).passed


def test_lemma5_score_is_one_minus_ceiling_for_a_sqrt_p_isometry():
    from ntk import appendix_a
    from ntk import lemma_statistics as lstats
    P = np.random.default_rng(3).dirichlet(np.ones(12), size=10)     # no tied distances
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(12, 12)))[0]
    ceiling = lstats.monotonicity_spearman(P, lstats.hellinger_chord(P))["rho"]
    got = appendix_a.hellinger_monotonicity_score(np.sqrt(P) @ Q, P)
    assert got["rho_hellinger"] == pytest.approx(1.0, abs=1e-12)
    assert got["score"] == pytest.approx(1.0 - ceiling, abs=1e-9) and got["score"] > 0
    assert appendix_a.hellinger_monotonicity_score(P @ Q, P)["score"] == pytest.approx(
        ceiling - 1.0, abs=1e-9)


def test_cli_rejects_unknown_check_in_one_line():
    with pytest.raises(SystemExit) as e:
        main(["--checks", "nope"])
    assert "unknown check" in str(e.value)


def test_cli_writes_json_report_and_plots(tmp_path, monkeypatch, capsys, tiny_results):
    monkeypatch.setattr(checks, "run_all", lambda **kw: tiny_results)
    code = main(["--quick", "--out", str(tmp_path)])
    assert code in (0, 1)
    payload = json.loads((tmp_path / "ntk_checks.json").read_text())
    assert [r["name"] for r in payload["results"]] == [r.name for r in tiny_results]
    assert re.fullmatch(r"[0-9a-f]{64}", payload["source_sha256"])
    assert set(payload["load_average"]) >= {"start_1min", "end_5min"}
    report = (tmp_path / "report.md").read_text()
    for r in tiny_results:
        assert os.path.getsize(tmp_path / f"{r.name}.png") > 1000
        assert f"({r.name}.png)" in report
    assert "## Mutants" in report and "over the grid" in capsys.readouterr().out


# --- the committed run and the generated docs ---------------------------------------------------

def _committed_run():
    from ntk.docs import RUN
    if not RUN.exists():
        pytest.fail(f"{RUN} is missing: run `python -m ntk --quick --out docs/ntk_run`")
    return json.loads(RUN.read_text())


def test_committed_run_matches_the_sources():
    from ntk.provenance import source_digest
    assert _committed_run()["source_sha256"] == source_digest(), (
        "the NTK sources changed since docs/ntk_run was made: rerun "
        "`python -m ntk --quick --out docs/ntk_run` and `python -m ntk.docs`")


def test_generated_docs_blocks_are_up_to_date():
    from ntk.docs import stale_blocks
    assert stale_blocks(_committed_run()) == []


def test_no_typed_number_outside_the_generated_blocks():
    from ntk.docs import _BLOCK
    from ntk.provenance import ROOT
    number = re.compile(r"(?<![\w.`-])[-−+]?\d+\.\d+|\d+ ?%|\d+/\d+ pass")
    readme = (ROOT / "README.md").read_text()
    ntk_md = (ROOT / "docs" / "ntk.md").read_text()
    section = lambda text, head: text.split(head, 1)[1].split("\n## ", 1)[0]  # noqa: E731
    guarded = {"README.md NTK section": section(readme, "## NTK analysis"),
               "docs/ntk.md Results": section(ntk_md, "\n## Results")}
    for where, text in guarded.items():
        outside = _BLOCK.sub("", text)
        outside = re.sub(r"```.*?```", "", outside, flags=re.S)       # code examples
        # arXiv ids and version numbers are names, not results
        outside = re.sub(r"\b\d{4}\.\d{4,5}\b|\b\d+\.\d+\.\d+\b|\b[Jj][Aa][Xx] \d+\.\d+", "",
                         outside)
        assert not number.findall(outside), (where, number.findall(outside))
    assert "ntk:begin ntk-summary" in readme
