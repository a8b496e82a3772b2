"""Evaluation helpers agree with direct, unbatched computations."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.models import Classifier, LanguageModel, TransformerConfig
from posjax.training import (map_in_batches, group_accuracy, lm_exact_match, masked_lm_loss,
                             predict_classes)

LM = TransformerConfig(vocab_size=12, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=10,
                       pe="rope", causal=True, dropout=0.0)


def test_map_in_batches_pads_and_trims():
    x = np.arange(23, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    calls = []

    def fn(x):
        calls.append(x.shape)
        return x.sum(-1)

    np.testing.assert_array_equal(map_in_batches(fn, {"x": x}, batch=8), x.sum(-1))
    assert set(calls) == {(8, 3)}  # one shape: the last batch is padded
    with pytest.raises(ValueError, match="empty"):
        map_in_batches(fn, {"x": x[:0]})
    with pytest.raises(ValueError, match="equally long"):
        map_in_batches(fn, {"x": x, "y": x[:3]})


def _greedy(model, prefix, steps):
    """Reference greedy decoding, one token at a time: the model reads a fixed-width buffer
    (causal, so the slots after the prefix do not matter) and the argmax at the last prefix
    position is appended."""
    forward = jax.jit(lambda buf: model(buf))
    seq = list(prefix)
    for _ in range(steps):
        buf = np.zeros((1, LM.max_len), np.int32)
        buf[0, :len(seq)] = seq
        seq.append(int(np.argmax(np.asarray(forward(jnp.asarray(buf)))[0, len(seq) - 1])))
    return seq


def test_lm_exact_match_equals_greedy_decoding():
    model = LanguageModel(LM, rngs=nnx.Rngs(0))
    rng = np.random.default_rng(0)
    rows, masks = [], []
    for i in range(6):
        prefix = list(rng.integers(1, 12, 4))
        seq = _greedy(model, prefix, 6)
        if i % 2:  # corrupt one generated token: no longer the greedy continuation
            seq[4 + i % 6] = (seq[4 + i % 6] + 1) % 12
        rows.append(seq)
        masks.append([False] * 4 + [True] * 6)
    got = lm_exact_match(model, np.asarray(rows, np.int32), np.asarray(masks), batch=4)
    np.testing.assert_array_equal(got, [True, False] * 3)


def test_masked_lm_loss_matches_numpy():
    model = LanguageModel(LM, rngs=nnx.Rngs(1))
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, 12, (3, 10)).astype(np.int32)
    mask = rng.random((3, 10)) < 0.5
    loss, metrics = masked_lm_loss(model, {"tokens": tokens, "loss_mask": mask}, jax.random.key(0))
    logits = np.asarray(model(jnp.asarray(tokens)), np.float64)[:, :-1]
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -np.take_along_axis(logp, tokens[:, 1:, None], -1)[..., 0]
    m = mask[:, 1:]
    np.testing.assert_allclose(float(loss), nll[m].mean(), rtol=1e-5)
    acc = (logits.argmax(-1) == tokens[:, 1:])[m].mean()
    np.testing.assert_allclose(float(metrics["token_accuracy"]), acc, rtol=1e-6)


def test_predict_classes_and_group_accuracy():
    cfg = TransformerConfig(vocab_size=12, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=10, pe="learned", dropout=0.0)
    model = Classifier(cfg, 3, pooling="mean", rngs=nnx.Rngs(2))
    tokens = np.random.default_rng(2).integers(0, 12, (13, 10)).astype(np.int32)
    pred = predict_classes(model, lambda m, tokens: m(tokens), {"tokens": tokens}, batch=5)
    np.testing.assert_array_equal(pred, np.asarray(model(jnp.asarray(tokens))).argmax(-1))
    labels = np.array([0, 1, 2, 0])
    acc = group_accuracy(np.array([0, 1, 0, 0]), labels, groups=np.array([1, 1, 2, 2]))
    assert acc == {"all": 0.75, "1": 1.0, "2": 0.5}
    with pytest.raises(ValueError, match="same non-empty shape"):
        group_accuracy(np.array([0, 1]), labels)
