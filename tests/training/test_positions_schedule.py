"""Randomized positions (arXiv 2305.16843) and PE schedules over training steps (DroPE, arXiv
2512.12167) in posjax.training."""
import os
import signal
from math import comb

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from scipy import stats

from posjax.models import Classifier, LanguageModel, TransformerConfig, replace_pe
from posjax.training import (ArrayBatches, Checkpointer, TrainConfig, check_position_range,
                             classification_loss, masked_lm_loss, randomized_positions, train)


def order_statistic_pmf(M, n, k):
    """P(pos_k = j), j = 0..M-1: the k-th smallest of a uniform n-subset of [0, M)."""
    return np.array([comb(j, k) * comb(M - 1 - j, n - 1 - k) for j in range(M)]) / comb(M, n)


def test_randomized_positions_are_sorted_in_range_and_match_the_order_statistics():
    M, n, rows = 12, 4, 20000
    pos = randomized_positions(rows, n, M, seed=3, step=7)
    assert pos.shape == (rows, n) and pos.dtype == np.int32
    assert np.all(np.diff(pos, axis=1) > 0) and pos.min() >= 0 and pos.max() < M
    pvalues = []
    for k in range(n):
        expected = order_statistic_pmf(M, n, k) * rows
        assert abs(expected.sum() - rows) < 1e-6
        support = expected > 0
        observed = np.bincount(pos[:, k], minlength=M)
        assert observed[~support].sum() == 0
        chi2 = float(((observed - expected)[support] ** 2 / expected[support]).sum())
        pvalues.append(stats.chi2.sf(chi2, support.sum() - 1))
    assert min(pvalues) > 1e-3, pvalues
    # deterministic per (seed, step), different across steps
    np.testing.assert_array_equal(pos, randomized_positions(rows, n, M, seed=3, step=7))
    assert not np.array_equal(pos[:50], randomized_positions(50, n, M, seed=3, step=8))
    with pytest.raises(ValueError, match="length 13 > max_range 12"):
        randomized_positions(2, 13, 12)


def _cls_data(n=64, T=8, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 16, (n, T)).astype(np.int32)
    return {"tokens": tokens, "labels": (tokens[:, 0] > tokens[:, -1]).astype(np.int32)}


KW = dict(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=16)
TC = TrainConfig(steps=2, batch_size=16, log_every=1, progress=False, random_positions=64)


def test_a_learned_table_shorter_than_the_range_refuses():
    learned = Classifier(TransformerConfig(pe="learned", max_len=16, **KW), 2, pooling="mean",
                         rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="'learned' PE's table holds 16 positions"):
        train(learned, classification_loss, ArrayBatches(_cls_data(), 16), TC)
    check_position_range(learned, 16)  # a table of M rows is enough
    with pytest.raises(ValueError, match="random_positions must be a positive int"):
        TrainConfig(random_positions=0)
    from posjax.training import train_ensemble
    with pytest.raises(ValueError, match="train_ensemble does not support"):
        train_ensemble(lambda m: learned, classification_loss, ArrayBatches(_cls_data(), 16), TC,
                       members=[{}])


@pytest.mark.slow
def test_train_with_random_positions_feeds_sampled_positions():
    seen = []

    def loss(model, batch, key):
        seen.append(batch["positions"].shape)
        value, metrics = classification_loss(model, batch, key)
        return value, {**metrics, "max_position": batch["positions"].max()}

    model = Classifier(TransformerConfig(pe="rope", max_len=8, **KW), 2, pooling="mean",
                       rngs=nnx.Rngs(0))
    result = train(model, loss, ArrayBatches(_cls_data(), 16), TC)
    assert seen and seen[0] == (16, 8) and 8 <= result.metrics["max_position"] < 64


# --- PE schedule --------------------------------------------------------------------------------
LM = TransformerConfig(vocab_size=17, num_layers=1, d_model=16, num_heads=2, d_ff=16, max_len=12,
                       pe="rope", causal=True)
SCHEDULE = ((0, "rope"), (3, "none"))


def _lm_run(out_dir=None, *, steps=6, interrupt=None, schedule=SCHEDULE):
    model = LanguageModel(LM, rngs=nnx.Rngs(0))
    tokens = np.random.default_rng(0).integers(0, 17, (64, 12)).astype(np.int32)
    batches = ArrayBatches({"tokens": tokens}, 8, seed=0)

    def get(step):
        if interrupt is not None and step == interrupt:
            os.kill(os.getpid(), signal.SIGTERM)
        return batches(step)

    tc = TrainConfig(steps=steps, batch_size=8, learning_rate=3e-3, log_every=2,
                     checkpoint_every=2, progress=False, pe_schedule=schedule)
    return model, train(model, masked_lm_loss, get, tc, out_dir=out_dir)


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory):
    return _lm_run(str(tmp_path_factory.mktemp("sched")))


def _params(model):
    return jax.tree.leaves(nnx.state(model, nnx.Param))


def test_after_the_switch_logits_equal_pe_none_with_the_same_weights(scheduled):
    model, result = scheduled
    assert result.step == 6 and model.config.pe == "none"
    assert model.transformer.config.pe == "none" and model.transformer.pe.name == "none"
    plain = LanguageModel(LM.replace(pe="none"), rngs=nnx.Rngs(1))
    nnx.update(plain, nnx.state(model, nnx.Param))
    tokens = jnp.asarray(np.random.default_rng(5).integers(0, 17, (3, 12)), jnp.int32)
    gap = float(jnp.abs(model(tokens) - plain(tokens)).max())
    assert gap <= 1e-6, gap
    rope = LanguageModel(LM, rngs=nnx.Rngs(1))
    nnx.update(rope, nnx.state(model, nnx.Param))
    assert float(jnp.abs(rope(tokens) - plain(tokens)).max()) > 1e-3  # the PE did change


@pytest.mark.parametrize("stop", [pytest.param(2, marks=pytest.mark.slow), 4])  # switch at 3
def test_resume_mid_schedule_is_bit_identical_and_the_schedule_is_recorded(scheduled, tmp_path,
                                                                           stop):
    with pytest.raises(KeyboardInterrupt):
        _lm_run(str(tmp_path), interrupt=stop)
    assert Checkpointer(str(tmp_path / "checkpoints")).latest_step() == stop
    with pytest.raises(ValueError, match="pe_schedule"):
        _lm_run(str(tmp_path), schedule=((0, "rope"), (5, "none")))  # another schedule
    model, result = _lm_run(str(tmp_path))
    assert result.resumed_from == stop and model.config.pe == "none"
    for a, b in zip(_params(model), _params(scheduled[0])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_pe_schedule_validation():
    with pytest.raises(ValueError, match="start at 0 and increase"):
        TrainConfig(pe_schedule=((0, "rope"), (0, "none")))
    with pytest.raises(ValueError, match="start at 0"):
        TrainConfig(pe_schedule=((3, "rope"),))
    model = LanguageModel(LM, rngs=nnx.Rngs(0))
    tc = TrainConfig(steps=2, batch_size=8, progress=False, pe_schedule=((0, "alibi"),))
    tokens = np.zeros((8, 12), np.int32)
    with pytest.raises(ValueError, match="starts with PE 'alibi'"):
        train(model, masked_lm_loss, ArrayBatches({"tokens": tokens}, 8), tc)
    # replace_pe keeps every other weight
    before = nnx.state(model, nnx.Param)
    replace_pe(model, "alibi")
    after = nnx.state(model, nnx.Param)
    for a, b in zip(jax.tree.leaves(before), jax.tree.leaves(after)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_a_phase_that_changes_the_parameters_refuses():
    model = LanguageModel(LM, rngs=nnx.Rngs(0))
    tc = TrainConfig(steps=2, batch_size=8, progress=False,
                     pe_schedule=((0, "rope"), (1, "learned")))
    with pytest.raises(ValueError, match="changes the model's parameters"):
        train(model, masked_lm_loss, ArrayBatches({"tokens": np.zeros((8, 12), np.int32)}, 8), tc)
