"""The training loop: learning, checkpoint/resume bit-equality, SIGTERM save, NaN stop."""
import json
import os
import signal

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.models import Classifier, TransformerConfig
from posjax.training import (ArrayBatches, Checkpointer, TrainConfig, TrainingDiverged,
                             classification_loss, evaluate_classifier, train)

CFG = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=8,
                        pe="learned", dropout=0.1)


def _data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 16, (n, 8)).astype(np.int32)
    return {"tokens": tokens, "labels": (tokens[:, 0] > tokens[:, -1]).astype(np.int32)}


def _params(model):
    return jax.tree.leaves(nnx.state(model, nnx.Param))


def _run(out_dir, *, steps=24, interrupt=None, loss_fn=classification_loss, **kw):
    model = Classifier(CFG, 2, pooling="mean", rngs=nnx.Rngs(0))
    data = _data()
    batches = ArrayBatches(data, 32, seed=0)

    def get(step):
        if interrupt is not None and step == interrupt[0]:
            interrupt[1]()
        return batches(step)

    tc = TrainConfig(steps=steps, batch_size=32, learning_rate=3e-3, log_every=4,
                     checkpoint_every=8, progress=False, **kw)
    result = train(model, loss_fn, get, tc, out_dir=out_dir, run_config={"model": CFG})
    return model, result


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return _run(str(tmp_path_factory.mktemp("ref")))


def test_training_learns_the_task(reference):
    model, result = reference
    assert result.step == 24
    acc = evaluate_classifier(model, _data(seed=1))["accuracy"]
    assert acc > 0.6  # the task (first token > last token) is learnable quickly


def test_metrics_and_config_are_written(tmp_path):
    _run(str(tmp_path), steps=8)
    rows = [json.loads(l) for l in open(tmp_path / "metrics.jsonl")]
    assert [r["step"] for r in rows] == [4, 8]
    assert all(np.isfinite(r["loss"]) and "accuracy" in r and "lr" in r for r in rows)
    assert json.load(open(tmp_path / "config.json"))["run"]["model"]["pe"] == "learned"
    assert Checkpointer(str(tmp_path / "checkpoints")).latest_step() == 8


@pytest.mark.parametrize("how", ["keyboard", "sigterm"])
def test_interrupted_run_resumes_bit_identically(reference, tmp_path, how):
    def stop():
        if how == "keyboard":
            raise KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(KeyboardInterrupt):
        _run(str(tmp_path), interrupt=(13, stop))
    assert Checkpointer(str(tmp_path / "checkpoints")).latest_step() == 13
    model, result = _run(str(tmp_path))
    assert result.resumed_from == 13
    for a, b in zip(_params(model), _params(reference[0])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    def poisoned(model, batch, key):
        loss, metrics = classification_loss(model, batch, key)
        return jnp.where(batch["step_flag"][0] >= 18, jnp.nan, loss), metrics

    model = Classifier(CFG, 2, pooling="mean", rngs=nnx.Rngs(0))
    base = ArrayBatches(_data(), 32, seed=0)
    batches = lambda s: {**base(s), "step_flag": np.full(32, s)}
    tc = TrainConfig(steps=30, batch_size=32, log_every=4, checkpoint_every=8, progress=False)
    with pytest.raises(TrainingDiverged, match="non-finite loss.*step 18.*last good checkpoint: step 18"):
        train(model, poisoned, batches, tc, out_dir=str(tmp_path))
    assert Checkpointer(str(tmp_path / "checkpoints")).latest_step() == 18
    assert all(bool(jnp.all(jnp.isfinite(p))) for p in _params(model))


def test_changed_config_in_same_dir_is_refused(tmp_path):
    _run(str(tmp_path), steps=4)
    with pytest.raises(ValueError, match="different configuration"):
        _run(str(tmp_path), steps=5)


def test_train_config_validation():
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="lion")
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="fewer than batch_size"):
        ArrayBatches(_data(n=10), 32)
