"""On divergence the checkpoint is the exact state after the last good step, and resuming from
it replays nothing twice (compared with a run that stops at that step)."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.training import (Checkpointer, InvalidBatch, TrainingDiverged, classification_loss,
                             make_optimizer)

from _tiny import BATCHES, config, model, params, run


def _loss(m, batch, key):  # NaN where the batch is flagged
    value, metrics = classification_loss(m, batch, key)
    return jnp.where(batch["flag"][0] > 0, jnp.nan, value), metrics


def _batches(bad_step=-1, how="nan", stop_at=-1):
    def get(step):
        if step == stop_at:
            raise KeyboardInterrupt
        batch = {**BATCHES(step), "flag": np.zeros(16, np.int32)}
        if step == bad_step and how == "nan":
            batch["flag"] = np.ones(16, np.int32)
        elif step == bad_step:
            batch["tokens"] = np.full((16, 8), 99, np.int32)
        return batch
    return get


def _checkpoint_params(out_dir, step=None):
    _, p, _ = nnx.split(model(), nnx.Param, ...)
    ckpt = Checkpointer(os.path.join(out_dir, "checkpoints"))
    _, (restored, _) = ckpt.restore((p, make_optimizer(config()).init(p)), step)
    return [np.asarray(x) for x in jax.tree.leaves(restored)]


@pytest.mark.parametrize("how", ["bad_id", "nan"])
def test_divergence_checkpoint_is_the_state_after_the_last_good_step(tmp_path, how):
    bad, stop = str(tmp_path / "bad"), str(tmp_path / "stop")
    error = InvalidBatch if how == "bad_id" else TrainingDiverged
    # one bad batch at step 2; the next log boundary is step 5, so steps 3 and 4 run first
    with pytest.raises(error, match="at step 2: training stopped; last good checkpoint: step 2"):
        run(bad, _batches(2, how), loss=_loss, log_every=5)
    assert Checkpointer(os.path.join(bad, "checkpoints")).all_steps() == [2]
    with pytest.raises(KeyboardInterrupt):  # a run that stops at step 2 (saved on interrupt)
        run(stop, _batches(stop_at=2), loss=_loss, log_every=5)
    for a, b in zip(_checkpoint_params(bad), _checkpoint_params(stop)):
        np.testing.assert_array_equal(a, b)
    m, result = run(bad, _batches(), loss=_loss, log_every=5, resume="must")
    assert result.resumed_from == 2
    full, _ = run(None, _batches(), loss=_loss, log_every=5)  # never diverged
    for a, b in zip(params(m), params(full)):  # resumed == uninterrupted: nothing applied twice
        np.testing.assert_array_equal(a, b)


def test_model_in_memory_after_divergence_is_the_last_good_state():
    m = model()
    with pytest.raises(InvalidBatch):
        run(None, _batches(2, "bad_id"), m=m, loss=_loss, log_every=5)
    stopped = model()
    with pytest.raises(KeyboardInterrupt):
        run(None, _batches(stop_at=2), m=stopped, loss=_loss, log_every=5)
    for a, b in zip(params(m), params(stopped)):
        np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(a).all() for a in params(m))
