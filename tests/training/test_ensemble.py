"""train_ensemble: members equal their solo `train` runs, resume is bit-identical, a diverging
member is frozen while the others go on."""
import json

import jax
import numpy as np
import pytest
from flax import nnx

from posjax.models import Classifier, TransformerConfig
from posjax.training import ArrayBatches, TrainConfig, classification_loss, train, train_ensemble

STEPS = 12
MEMBERS = [{"seed": 0, "std": 0.1}, {"seed": 1, "std": 0.5},
           {"seed": 2, "std": 0.2, "learning_rate": 1e-2, "weight_decay": 0.1}]
CONFIG = TrainConfig(steps=STEPS, batch_size=16, optimizer="adamw", learning_rate=3e-3,
                     schedule="cosine", warmup_steps=3, log_every=4, checkpoint_every=4,
                     progress=False)


def _data(n=128):
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 16, (n, 8)).astype(np.int32)
    return {"tokens": tokens, "labels": (tokens[:, 0] > tokens[:, -1]).astype(np.int32)}


DATA = _data()


def make_model(member):
    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, pe="learned", pe_options={"std": member["std"]},
                            dropout=0.1)  # dropout: the per-member keys matter
    return Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(member["seed"]))


def member_batches():
    return [ArrayBatches(DATA, 16, seed=10 + m["seed"]) for m in MEMBERS]


def _params(model, *, all_params=False):
    """Parameter arrays. Attention key biases are left out unless ``all_params``: softmax is
    invariant to them, so their true gradient is 0 and Adam turns the rounding noise of that 0
    (which differs between a batched and an unbatched program) into updates of size ~lr."""
    leaves = jax.tree_util.tree_leaves_with_path(nnx.state(model, nnx.Param))
    return [np.asarray(x) for path, x in leaves
            if all_params or "['key']['bias']" not in jax.tree_util.keystr(path)]


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    return train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                          members=MEMBERS, out_dir=str(tmp_path_factory.mktemp("ens")))


@pytest.fixture(scope="module")
def solo():
    out = []
    for m, batches in zip(MEMBERS, member_batches()):
        model = make_model(m)
        hyper = {k: m[k] for k in ("seed", "learning_rate", "weight_decay") if k in m}
        train(model, classification_loss, batches, CONFIG.replace(**hyper))
        out.append(_params(model))
    return out


def test_each_member_equals_its_solo_run(ensemble, solo):
    assert ensemble.step == STEPS and not ensemble.diverged
    for model, ref in zip(ensemble.models, solo):
        got = _params(model)
        assert max(np.abs(a - b).max() for a, b in zip(got, ref)) <= 1e-5
    # the members really differ (negative control for a broadcast bug)
    a, b = _params(ensemble.models[0]), _params(ensemble.models[1])
    assert max(np.abs(x - y).max() for x, y in zip(a, b)) > 1e-2


def test_vmapped_members_equal_their_solo_runs(solo):
    # the batched (vmap) program, the default on accelerators; the fixture above used the
    # default of this machine's backend
    result = train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                            members=MEMBERS, vectorize=True)
    for model, ref in zip(result.models, solo):
        got = _params(model)
        assert max(np.abs(a - b).max() for a, b in zip(got, ref)) <= 1e-5


def test_resume_after_interrupt_is_bit_identical(ensemble, tmp_path):
    batches = member_batches()

    class Stop:
        def __init__(self, b):
            self.b = b

        def __call__(self, step):
            if step == 7:
                raise KeyboardInterrupt
            return self.b(step)

    with pytest.raises(KeyboardInterrupt):
        train_ensemble(make_model, classification_loss, [Stop(b) for b in batches], CONFIG,
                       members=MEMBERS, out_dir=str(tmp_path))
    result = train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                            members=MEMBERS, out_dir=str(tmp_path))
    assert result.resumed_from == 7
    for model, ref in zip(result.models, ensemble.models):
        for a, b in zip(_params(model, all_params=True), _params(ref, all_params=True)):
            np.testing.assert_array_equal(a, b)
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert all(len(r["loss"]) == len(MEMBERS) for r in rows if "loss" in r)


def test_diverging_member_is_frozen_and_reported(solo):
    members = [MEMBERS[0], MEMBERS[1], {"seed": 2, "std": 0.2, "learning_rate": 1e30}]
    result = train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                            members=members)
    assert list(result.diverged) == [2] and 0 <= result.diverged[2] < STEPS
    for i in (0, 1):  # the others are untouched by the divergence
        got = _params(result.models[i])
        assert max(np.abs(a - b).max() for a, b in zip(got, solo[i])) <= 1e-5
    assert all(np.isfinite(x).all() for x in _params(result.models[2]))


def test_bad_members_are_refused():
    with pytest.raises(ValueError, match="only"):
        train_ensemble(make_model, classification_loss, member_batches()[0], CONFIG,
                       members=[{"seed": 0, "std": 0.1, "steps": 5}])
    with pytest.raises(ValueError, match="non-empty"):
        train_ensemble(make_model, classification_loss, member_batches()[0], CONFIG, members=[])

    def other(member):  # a different PE is a different computation
        cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                                max_len=8, pe="rope" if member["seed"] else "learned",
                                dropout=0.1)
        return Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(member["seed"]))

    with pytest.raises(ValueError, match="member 1"):
        train_ensemble(other, classification_loss, member_batches()[0], CONFIG,
                       members=[{"seed": 0}, {"seed": 1}])
