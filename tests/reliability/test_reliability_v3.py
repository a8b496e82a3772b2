"""Reliability v3: corpora, LM targets, decoding, packing, generation and hyper-parameters never
give a wrong value without an error (one test per item, named after it)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.training import TrainConfig, train_ensemble

import _tiny


# --- R7: finite hyper-parameters ------------------------------------------------------------
@pytest.mark.parametrize("field", ["learning_rate", "weight_decay", "b1", "b2", "eps",
                                   "momentum", "warmup_fraction", "grad_clip"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_r7_train_config_refuses_non_finite(field, bad):
    with pytest.raises(ValueError, match=f"TrainConfig.{field} must be finite"):
        TrainConfig(**{field: bad})


def test_r7_ensemble_member_hyperparameters_finite_and_keys_known():
    tiny = lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0))  # built before any step runs

    def ensemble(members):
        return train_ensemble(lambda m: tiny(), _tiny.classification_loss,
                              _tiny.BATCHES, _tiny.config(), members=members)

    with pytest.raises(ValueError, match=r"member 1 .*learning_rate must be finite, got nan"):
        ensemble([{"seed": 0}, {"seed": 1, "learning_rate": math.nan}])
    with pytest.raises(ValueError, match=r"member 0 .*weight_decay must be finite, got inf"):
        ensemble([{"weight_decay": math.inf}])
    with pytest.raises(ValueError, match=r"keys \['lr'\] are never read by make_model"):
        ensemble([{"seed": 0, "lr": 0.1}, {"seed": 1, "lr": 0.01}])
    # a key make_model reads is accepted (and builds before any step runs)
    read = []
    with pytest.raises(ValueError, match="sentinel"):
        train_ensemble(lambda m: read.append(m["std"]) or tiny(), _tiny.classification_loss,
                       lambda s: (_ for _ in ()).throw(ValueError("sentinel")), _tiny.config(),
                       members=[{"std": 0.1}, {"std": 0.2}])
    assert read == [0.1, 0.2]
