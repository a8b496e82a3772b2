"""A tiny classifier run shared by the reliability tests."""
import numpy as np
from flax import nnx

from posjax.models import Classifier, TransformerConfig
from posjax.training import ArrayBatches, TrainConfig, classification_loss, train

CFG = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=8,
                        pe="learned")


def data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 16, (n, 8)).astype(np.int32)
    return {"tokens": tokens, "labels": (tokens[:, 0] > tokens[:, -1]).astype(np.int32)}


def model(cfg=CFG):
    return Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(0))


def config(**kw):
    return TrainConfig(**{**dict(steps=8, batch_size=16, log_every=4, progress=False), **kw})


BATCHES = ArrayBatches(data(), 16, seed=0)


def poisoned(at, **changes):
    """``BATCHES`` with the fields in ``changes`` replaced at step ``at``."""
    def get(step):
        batch = BATCHES(step)
        return {**batch, **changes} if step == at else batch
    return get


def run(out_dir, batches=BATCHES, m=None, loss=classification_loss, **kw):
    m = model() if m is None else m
    resume = kw.pop("resume", "auto")
    result = train(m, loss, batches, config(**kw), out_dir=out_dir, resume=resume)
    return m, result


def params(m):
    return [np.asarray(x) for x in __import__("jax").tree.leaves(nnx.state(m, nnx.Param))]
