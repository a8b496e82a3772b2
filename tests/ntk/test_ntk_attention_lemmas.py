"""Lemmas 1, 3, 4 on the one-layer posjax attention model (``ntk.attention_lemmas``).

Independent computations: the linearised run against a first-order Taylor model written with
``jax.jvp``; ``Theta_p`` from neural-tangents against a native ``J J^T``; the checks under the
neural-tangents poisons of ``ntk.mutants`` must fail.
"""
from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk import attention_lemmas as al
from ntk import lemma_statistics as lstats
from ntk.kernels import native_jacobian, nnx_bridge
from ntk.recording import neural_tangents, poisoned
from ntk.sweeps import SweepConfig

TINY = al.AttentionLemmaConfig(widths=(8, 16, 32), seeds=(0,), num_positions=4, vocab_size=6,
                               num_sequences=8, masks_per_sequence=2, bottleneck_width=4,
                               steps=2, lr=0.05, ref_width=8)


def _cfg(acfg=TINY) -> SweepConfig:
    return SweepConfig(attention=acfg)


def test_corpus_masks_and_targets():
    c = al.attention_corpus(TINY)
    V = TINY.vocab_size
    assert c["masked"].sum(0).tolist() == [4, 4, 4, 4]           # S m / n per position
    assert np.all((c["tokens"] == V) == c["masked"])
    # soft targets: P_i at masked slots (sum 1, no [MASK] class), zero elsewhere
    np.testing.assert_allclose(c["targets"][c["masked"]][:, :V],
                               c["P"][np.nonzero(c["masked"])[1]], rtol=1e-6)
    assert np.all(c["targets"][~c["masked"]] == 0) and np.all(c["targets"][..., V] == 0)
    shuffled = al.attention_corpus(dataclasses.replace(TINY, shuffle_positions=True))
    assert not np.array_equal(shuffled["source"], c["source"])
    np.testing.assert_allclose(shuffled["targets"].sum(-1), c["masked"].astype(float), rtol=1e-6)


def test_linearised_run_is_first_order_taylor():
    corpus = al.attention_corpus(TINY)
    model = al.build_model(TINY, 8, 0)
    apply_fn, p0 = nnx_bridge(model)

    def taylor(p, x):
        dp = jax.tree.map(lambda a, b: a - b, p, p0)
        f0, df = jax.jvp(lambda q: apply_fn(q, x), (p0,), (dp,))
        return f0 + df
    lin = al.train_pe(neural_tangents().linearize(apply_fn, p0), p0, corpus, lr=0.5, steps=3)
    ref = al.train_pe(taylor, p0, corpus, lr=0.5, steps=3)
    exact = al.train_pe(apply_fn, p0, corpus, lr=0.5, steps=3)
    t0 = np.asarray(al._pe_table(p0), np.float64)
    scale = np.abs(ref["table"] - t0).max()
    assert np.abs(lin["table"] - ref["table"]).max() <= 1e-4 * scale
    np.testing.assert_allclose(lin["logits"], ref["logits"], atol=1e-5)
    # ... and it is not the exact run (the comparison above could fail)
    assert np.abs(exact["table"] - lin["table"]).max() > 1e-3 * scale


def test_theta_p_matches_native_jjt():
    corpus = al.attention_corpus(TINY)
    model = al.build_model(TINY, 8, 1)
    theta = al.own_position_ntk(model, corpus)                     # [n, V, V]
    apply_fn, pe = nnx_bridge(model, param_filter="pes")
    table = al._pe_table_of(pe)
    V = TINY.vocab_size
    for i in range(TINY.num_positions):
        rows = np.nonzero(corpus["masked"][:, i])[0]

        def f(row, x, i=i):
            return apply_fn(al._with_table(pe, table.at[i].set(row)), x)[:, i, :V]
        J = np.asarray(native_jacobian(f, table[i], [jnp.asarray(corpus["tokens"][rows])])[0],
                       np.float64).reshape(len(rows), V, -1)
        ref = np.einsum("sad,sbd->ab", J, J) / len(rows)
        np.testing.assert_allclose(theta[i], ref, rtol=1e-4, atol=1e-6 * np.abs(ref).max())
    assert np.linalg.norm(theta[0] - np.trace(theta[0]) / V * np.eye(V)) > 1e-3  # not isotropic


@pytest.fixture(scope="module")
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.slow  # a full tiny sweep (exact, linearised, Theta_p per width): minutes under load
def test_lemma1_fails_under_linearize_poison(quiet):
    cfg = _cfg()
    clean = al.lemma1_attention(cfg)
    assert min(clean.data["lazy_error"]) > lstats.DEGENERATE        # a real gap to measure
    with poisoned("nt:linearize"):
        bad = al.lemma1_attention(cfg)
    assert not bad.passed
    assert max(bad.data["lazy_error"]) < lstats.DEGENERATE
    assert set(clean.data) >= {"control", "negative_control", "logit_error", "slope_ci"}


@pytest.mark.slow  # a full tiny sweep (exact, linearised, Theta_p per width): minutes under load
def test_lemma4_fails_under_empirical_ntk_poison(quiet):
    cfg = _cfg()
    clean = al.lemma4_attention(cfg)
    assert min(r - 1 for r in clean.data["ratio"]) > lstats.DEGENERATE
    assert clean.data["negative_control"]["statistic"] < al.C1_FLOOR    # bottleneck d < V - 1
    with poisoned("nt:empirical_ntk_fn"):
        bad = al.lemma4_attention(cfg)
    assert not bad.passed
    np.testing.assert_allclose(bad.data["ratio"], 1.0, atol=1e-6)


@pytest.mark.slow  # a full tiny sweep (exact, linearised, Theta_p per width): minutes under load
def test_lemma3_runs_and_records(quiet):
    res = al.lemma3_attention(_cfg())
    assert len(res.data["affine_gap"]) == 3 and min(res.data["affine_gap"]) > 0
    assert res.data["negative_control"]["case"].startswith("exact displacement")


@pytest.mark.parametrize("field,value", [("lr_scaling", "cubic"), ("masks_per_sequence", 3),
                                         ("bottleneck_width", 5), ("widths", (8, 16)),
                                         ("window_top", 24)])
def test_bad_config_raises(field, value):
    with pytest.raises(ValueError, match=field if field != "window_top" else "window top"):
        dataclasses.replace(TINY, **{field: value})


def test_lr_reading_and_mutant_tables():
    assert TINY.step_size(16) == pytest.approx(0.025)
    assert dataclasses.replace(TINY, lr_scaling="constant").step_size(16) == 0.05
    # analysis-only fields do not change the sweep's cache key
    assert dataclasses.replace(TINY, window_top=32) == TINY
    for overrides in (*al.PREMISE_BREAKERS.values(), al.NUISANCE):
        for key in overrides:
            head, _, field = key.partition(".")
            assert head == "attention" and hasattr(TINY, field)
