"""train_ensemble on a device mesh: the members are split over the mesh's ``"data"`` axis and
every member ends where the single-device ensemble ends.

The run happens in a subprocess started with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
(the flag must be set before JAX is imported, and this pytest process already has JAX with one
device). The subprocess runs this file as a script and prints one JSON line of results; the tests
assert on them. Tolerance 1e-5 (float32; the partitioned program may order reductions
differently).
"""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

TOL = 1e-5
MEMBERS = [{"seed": 0, "std": 0.1}, {"seed": 1, "std": 0.5},
           {"seed": 2, "std": 0.2, "learning_rate": 1e-2, "weight_decay": 0.1},
           {"seed": 3, "std": 0.3}]


# --- the subprocess -----------------------------------------------------------------------------
def _ensemble(mesh, out_dir=None, *, vectorize=None, shared_batches=False, stop_at=None,
              members=MEMBERS):
    from flax import nnx

    from posjax.models import Classifier, TransformerConfig
    from posjax.training import ArrayBatches, TrainConfig, classification_loss, train_ensemble

    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 16, (64, 8)).astype(np.int32)
    data = {"tokens": tokens, "labels": (tokens[:, 0] > tokens[:, -1]).astype(np.int32)}

    def make(member):
        cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                                max_len=8, pe="learned", pe_options={"std": member["std"]},
                                dropout=0.1)
        return Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(member["seed"]))

    def stopping(b):
        def get(step):
            if step == stop_at:
                raise KeyboardInterrupt
            return b(step)
        return get

    batches = ([ArrayBatches(data, 8, seed=10 + m["seed"]) for m in members] if not shared_batches
               else ArrayBatches(data, 8, seed=7))
    if stop_at is not None:
        batches = [stopping(b) for b in batches]
    config = TrainConfig(steps=6, batch_size=8, optimizer="adamw", learning_rate=3e-3,
                         log_every=2, checkpoint_every=2, progress=False)
    return train_ensemble(make, classification_loss, batches, config, members=members,
                          mesh=mesh, out_dir=out_dir, vectorize=vectorize)


def _params(result) -> list[list[np.ndarray]]:
    import jax
    from flax import nnx

    # attention key biases left out: softmax is invariant to them, so their true gradient is 0
    # and Adam turns the rounding noise of that 0 (which differs between programs) into
    # updates of size ~lr (see tests/training/test_ensemble.py)
    return [[np.asarray(x) for path, x in jax.tree_util.tree_leaves_with_path(
        nnx.state(m, nnx.Param)) if "['key']['bias']" not in jax.tree_util.keystr(path)]
        for m in result.models]


def _max_diff(a, b) -> float:
    return max(float(np.max(np.abs(x - y))) for ma, mb in zip(a, b) for x, y in zip(ma, mb))


def run_checks(full: bool = False) -> dict:
    """The checks; ``full`` adds every strategy x mesh combination (the slow test)."""
    import tempfile

    import jax

    from posjax.distributed import make_mesh

    out: dict = {"devices": jax.device_count()}
    single = _params(_ensemble(None))
    out["members_differ"] = min(_max_diff([single[0]], [single[i]]) for i in range(1, 4))
    data4, data2_model2 = make_mesh(data=4), make_mesh(data=2, model=2)
    # interrupted on the mesh (the default strategy), resumed from its checkpoint: ends where
    # the uninterrupted single-device run ends
    with tempfile.TemporaryDirectory() as d:
        try:
            _ensemble(data4, d, stop_at=3)
        except KeyboardInterrupt:
            pass
        resumed = _ensemble(data4, d)
        out["resumed_from"] = resumed.resumed_from
        out["resumed"] = _max_diff(_params(resumed), single)
    if full:
        # two members per device, replicated over "model", vmapped, one batch shared by all
        shared_single = _params(_ensemble(None, shared_batches=True))
        out["data2_model2_vectorize1_shared"] = _max_diff(
            _params(_ensemble(data2_model2, vectorize=True, shared_batches=True)), shared_single)
        for name, mesh in (("data4", data4), ("data2_model2", data2_model2)):
            for vectorize in (False, True):
                out[f"{name}_vectorize{int(vectorize)}"] = _max_diff(
                    _params(_ensemble(mesh, vectorize=vectorize)), single)
    try:
        _ensemble(data4, members=MEMBERS[:3])
        out["three_members_refused"] = ""
    except ValueError as e:
        out["three_members_refused"] = str(e)
    return out


# --- the tests ----------------------------------------------------------------------------------
def _run(*flags: str) -> dict:
    """This file run as a script on 4 fake CPU devices (the runner of the sharded tests)."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "distributed", "_sharded_run.py")
    spec = importlib.util.spec_from_file_location("_sharded_run", path)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    return runner.run_on_fake_devices(__file__, *flags, devices=4)


@pytest.fixture(scope="module")
def results() -> dict:
    return _run()


def test_runs_on_four_devices(results):
    assert results["devices"] == 4
    assert results["members_differ"] > 1e-2  # negative control: a broadcast bug would be caught


def test_interrupted_and_resumed_on_a_mesh_equals_the_single_device_run(results):
    assert results["resumed_from"] == 3
    assert results["resumed"] <= TOL


def test_member_count_must_split_over_the_data_axis(results):
    assert "3 members cannot be split over a 'data' axis of size 4" in results["three_members_refused"]


@pytest.mark.slow
def test_every_strategy_on_every_mesh_equals_the_single_device_run():
    full = _run("--full")
    for key in ("data4_vectorize0", "data4_vectorize1", "data2_model2_vectorize0",
                "data2_model2_vectorize1", "data2_model2_vectorize1_shared"):
        assert full[key] <= TOL, (key, full[key])


if __name__ == "__main__":
    print(json.dumps(run_checks(full="--full" in sys.argv)))
