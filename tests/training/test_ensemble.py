"""train_ensemble: members equal their solo `train` runs, resume is bit-identical, a diverging
member is frozen while the others go on, and the run directory guarantees of `train` hold (lock,
run record, log rewind, verified checkpoints, bad inputs stopped)."""
import json
import os
import shutil

import jax
import numpy as np
import pytest
from flax import nnx

from posjax.models import Classifier, TransformerConfig
from posjax.training import (ArrayBatches, InvalidBatch, RunDirLocked, TrainConfig,
                             classification_loss, train, train_ensemble)
from posjax.training.run_dir import lock_run_dir

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
def ensemble_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("ens"))


@pytest.fixture(scope="module")
def ensemble(ensemble_dir):
    return train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                          members=MEMBERS, out_dir=ensemble_dir)


def _log_steps(out_dir):
    """Steps of the metric rows (one list entry per member) of ``out_dir/metrics.jsonl``."""
    rows = [json.loads(line) for line in open(os.path.join(out_dir, "metrics.jsonl"))]
    assert all(len(r["loss"]) == len(MEMBERS) for r in rows if "loss" in r)
    return [r["step"] for r in rows if "loss" in r]


def _assert_same_params(models, refs):
    for model, ref in zip(models, refs):
        for a, b in zip(_params(model, all_params=True), _params(ref, all_params=True)):
            np.testing.assert_array_equal(a, b)


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
    _assert_same_params(result.models, ensemble.models)
    # one row per logged step: 4, the interrupt's 7, then 8 and 12 after the resume
    assert _log_steps(tmp_path) == [4, 7, 8, 12]


def test_corrupted_latest_checkpoint_falls_back_and_log_is_rewound(ensemble, ensemble_dir,
                                                                  tmp_path):
    out = str(tmp_path / "run")
    shutil.copytree(ensemble_dir, out)
    assert _log_steps(out) == [4, 8, 12]
    ck = os.path.join(out, "checkpoints")
    assert sorted(int(d) for d in os.listdir(ck)) == [8, 12]
    for root, _, names in os.walk(os.path.join(ck, "12")):  # flip a byte of the array data
        big = max((os.path.join(root, n) for n in names), key=os.path.getsize, default=None)
        if big and "posjax_checksums" not in big and os.path.getsize(big) > 64:
            with open(big, "r+b") as f:
                f.seek(32)
                byte = f.read(1)
                f.seek(32)
                f.write(bytes([byte[0] ^ 0xFF]))
            break
    with pytest.warns(UserWarning, match="previous valid checkpoint, step 8"):
        result = train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                                members=MEMBERS, out_dir=out)
    assert result.resumed_from == 8
    _assert_same_params(result.models, ensemble.models)
    assert _log_steps(out) == [4, 8, 12]  # the row of step 12 was rewound, then written once


def test_second_run_on_a_locked_out_dir_is_refused(ensemble_dir):
    with lock_run_dir(ensemble_dir):
        with pytest.raises(RunDirLocked, match="in use by another training run"):
            train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                           members=MEMBERS, out_dir=ensemble_dir)


def test_another_model_or_member_list_in_the_same_out_dir_is_refused(ensemble, ensemble_dir):
    before = open(os.path.join(ensemble_dir, "config.json")).read()
    assert json.loads(before)["members"] == MEMBERS

    def wider(member):
        cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=64,
                                max_len=8, pe="learned", pe_options={"std": member["std"]},
                                dropout=0.1)
        return Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(member["seed"]))

    with pytest.raises(ValueError, match="different configuration.*d_ff: stored 32, now 64"):
        train_ensemble(wider, classification_loss, member_batches(), CONFIG, members=MEMBERS,
                       out_dir=ensemble_dir)
    other = [MEMBERS[0], MEMBERS[1], {**MEMBERS[2], "learning_rate": 2e-2}]
    with pytest.raises(ValueError, match="members"):
        train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                       members=other, out_dir=ensemble_dir)
    with pytest.raises(ValueError, match="resume='never'"):
        train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                       members=MEMBERS, out_dir=ensemble_dir, resume="never")
    assert open(os.path.join(ensemble_dir, "config.json")).read() == before


def test_bad_token_id_stops_the_ensemble_at_its_last_good_step(ensemble, tmp_path):
    batches = member_batches()
    clean = batches[1]

    def poisoned(step):
        batch = clean(step)
        if step == 5:
            batch = {**batch, "tokens": np.where(batch["tokens"] == 3, 99, batch["tokens"])}
        return batch

    with pytest.raises(InvalidBatch, match=r"token id 99 >= vocab_size 16 in the batch of "
                                           r"member 1 .* at step 5.*step 5"):
        train_ensemble(make_model, classification_loss, [batches[0], poisoned, batches[2]],
                       CONFIG, members=MEMBERS, out_dir=str(tmp_path))
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert not any(r.get("diverged") for r in rows)  # a data error, not a divergence
    # the state after step 5 was saved: resuming on clean data ends where the clean run ended
    result = train_ensemble(make_model, classification_loss, member_batches(), CONFIG,
                            members=MEMBERS, out_dir=str(tmp_path))
    assert result.resumed_from == 5 and not result.diverged
    _assert_same_params(result.models, ensemble.models)


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
