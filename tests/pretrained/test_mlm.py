"""posjax.pretrained.mlm: a new MLM head on a converted encoder, the loss at masked positions,
the head-only filter (body frozen) and saving / restoring the head's own parameters."""
import jax
import numpy as np
import pytest
from flax import nnx

from posjax.pretrained import (head_arrays, head_only, masked_position_loss, mlm_encoder,
                               set_head, write_tiny_checkpoint)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("mlm") / "bert", "bert",
                                 hidden_size=16, num_layers=1, num_heads=2,
                                 intermediate_size=32, max_positions=16)


def test_loss_is_the_cross_entropy_at_the_masked_positions(ckpt):
    model, cfg = mlm_encoder(ckpt)
    rng = np.random.default_rng(0)
    V = model.head.bias[...].shape[0]
    tokens = rng.integers(5, V, (3, 10)).astype(np.int32)
    where = np.sort(rng.permutation(np.arange(1, 9))[:4].reshape(1, 4).repeat(3, 0), 1)
    targets = rng.integers(5, V, (3, 4)).astype(np.int32)
    loss, acc = masked_position_loss(model, {"tokens": tokens, "where": where,
                                             "targets": targets})
    # independent: the head on every position, then pick the masked ones and their targets
    logits = np.asarray(model.head(model.transformer(tokens)), np.float64)   # [3, 10, V]
    picked = np.take_along_axis(logits, where[..., None], 1)                # [3, 4, V]
    logz = np.log(np.exp(picked - picked.max(-1, keepdims=True)).sum(-1)) + picked.max(-1)
    ce = logz - np.take_along_axis(picked, targets[..., None], -1)[..., 0]
    assert float(loss) == pytest.approx(ce.mean(), rel=1e-5)
    assert float(acc) == pytest.approx(np.mean(picked.argmax(-1) == targets))
    assert cfg.d_model == 16


def test_head_only_filter_and_head_round_trip(ckpt):
    model, _ = mlm_encoder(ckpt)
    _, trainable, rest = nnx.split(model, head_only(), ...)
    paths = {"/".join(k.key for k in p) for p, _ in jax.tree_util.tree_flatten_with_path(
        nnx.to_pure_dict(trainable))[0]}
    assert paths and all(p.startswith("head/") for p in paths)
    assert not any("embed" in p for p in paths)            # the tied embeddings stay frozen
    saved = head_arrays(model)
    assert set(saved) == {"dense.kernel", "dense.bias", "norm.scale", "norm.bias", "bias"}
    other, _ = mlm_encoder(ckpt, head_seed=7)
    x = np.random.default_rng(1).normal(size=(2, 16)).astype(np.float32)
    assert not np.allclose(other.head(x), model.head(x))
    set_head(other, saved)
    np.testing.assert_array_equal(np.asarray(other.head(x)), np.asarray(model.head(x)))
    with pytest.raises(ValueError, match="dense.kernel has shape"):
        set_head(other, {**saved, "dense.kernel": np.zeros((3, 3), np.float32)})
    with pytest.raises(ValueError, match="no array for the head parameter 'bias'"):
        set_head(other, {k: v for k, v in saved.items() if k != "bias"})
