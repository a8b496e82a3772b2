"""Checkpoints of a sharded (data- and tensor-parallel) training state, on 4 fake CPU devices.

As in ``test_distributed_multidevice.py``, the sharded checks run in one subprocess started with
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (set before JAX is imported): it runs this
file as a script and prints one JSON line of results, which the tests assert on. The process-0
guard of the training loop is tested in this process (one device is enough for it).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from _sharded_run import CONFIG, named, tp_train  # noqa: E402  (tests/distributed on sys.path)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUERY = "transformer/blocks/0/attn/query/kernel"
DOWN = "transformer/blocks/0/mlp/down/kernel"


# --- the subprocess -----------------------------------------------------------------------------
def _spec(x) -> list:
    """The PartitionSpec of ``x`` as a list, trailing Nones dropped (``P('a', None) == P('a')``)."""
    spec = list(getattr(getattr(x, "sharding", None), "spec", []))
    while spec and spec[-1] is None:
        spec.pop()
    return [list(a) if isinstance(a, tuple) else a for a in spec]


def _placed_state(mesh):
    """A fresh (params, opt_state) of the test model, placed on ``mesh`` like train() does."""
    from flax import nnx

    from posjax.distributed import place_state
    from posjax.models import Classifier, TransformerConfig
    from posjax.training import TrainConfig, make_optimizer

    cfg = TransformerConfig(**CONFIG)
    _, params, rest = nnx.split(Classifier(cfg, 3, rngs=nnx.Rngs(1)), nnx.Param, ...)
    tx = make_optimizer(TrainConfig(steps=6, batch_size=8, optimizer="adamw"))
    params, opt_state, _ = place_state(mesh, params, tx.init(params), rest)
    return params, opt_state


def _same_shardings(a, b) -> bool:
    import jax

    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return len(la) == len(lb) and all(x.sharding == y.sharding for x, y in zip(la, lb))


def run_checks(tmp: str) -> dict:
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    from posjax import distributed as dist
    from posjax.training import Checkpointer, loop

    out: dict = {"devices": len(jax.devices())}
    mesh = dist.make_mesh(2, 2)

    # (c) a sharded array round-trips, restored with the sharding of the target leaf
    x = jnp.arange(32.0).reshape(8, 4)
    saved = jax.device_put(x, NamedSharding(mesh, P(dist.DATA, dist.MODEL)))
    ck = Checkpointer(os.path.join(tmp, "roundtrip"))
    ck.save(1, {"w": saved, "n": np.arange(3), "s": 2.5})
    target = {"w": jax.device_put(jnp.zeros((8, 4)), NamedSharding(mesh, P(None, dist.MODEL))),
              "n": np.zeros(3, np.int64), "s": 0.0}
    step, back = ck.restore(target)
    same = ck.restore({**target, "w": saved})[1]["w"]
    try:
        ck.restore({"w": target["w"]})
        count_error = ""
    except ValueError as e:
        count_error = str(e)
    ck.close()
    out["roundtrip"] = {
        "step": step, "equal": bool(np.array_equal(np.asarray(back["w"]), np.asarray(x))),
        "spec": _spec(back["w"]), "sharding_is_target": back["w"].sharding == target["w"].sharding,
        "same_spec": _spec(same), "same_equal": bool(np.array_equal(np.asarray(same), x)),
        "others": [np.asarray(back["n"]).tolist(), float(back["s"])], "count_error": count_error}

    # (a) interrupted + resumed tensor-parallel run == uninterrupted one; (b) restored layout
    _, ref = tp_train(os.path.join(tmp, "ref"), mesh)
    run_dir = os.path.join(tmp, "run")
    try:
        tp_train(run_dir, mesh, interrupt_at=3)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    seen: dict = {}
    original = Checkpointer.restore

    def spy(self, state_like, step=None):
        step, state = original(self, state_like, step)
        seen.update(step=step, same=_same_shardings(state, state_like),
                    query=_spec(named(state[0])[QUERY]), down=_spec(named(state[0])[DOWN]))
        return step, state

    Checkpointer.restore = spy
    try:
        result, resumed = tp_train(run_dir, mesh)
    finally:
        Checkpointer.restore = original
    diffs = [float(np.max(np.abs(np.asarray(ref[k]) - np.asarray(resumed[k])))) for k in ref]
    out["resume"] = {"interrupted": interrupted, "resumed_from": result.resumed_from,
                     "step": result.step, "max_diff": max(diffs),
                     "bit_identical": all(np.array_equal(np.asarray(ref[k]), np.asarray(resumed[k]))
                                          for k in ref),
                     "final_query_spec": _spec(resumed[QUERY]), "restore": seen}

    # three runs of one structure on one mesh (reference, interrupted, resumed): one executable
    out["compiles"] = [f._cache_size() for f in loop._PINNED.values()]

    # (b) the run's last checkpoint, restored straight into a placed state, keeps its shardings
    placed = _placed_state(mesh)
    ck = Checkpointer(os.path.join(run_dir, "checkpoints"))
    step, state = ck.restore(placed)
    ck.close()
    params, mu = named(state[0]), named(state[1][0].mu)
    out["direct"] = {"step": step, "same": _same_shardings(state, placed),
                     "query": _spec(params[QUERY]), "mu_query": _spec(mu[QUERY]),
                     "equal_final": all(np.array_equal(np.asarray(params[k]),
                                                       np.asarray(resumed[k])) for k in resumed)}
    return out


# --- the tests ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict:
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip(),
               JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    tmp = str(tmp_path_factory.mktemp("dist_ckpt"))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), tmp], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_four_fake_devices(results):
    assert results["devices"] == 4


def test_sharded_array_round_trips_with_the_target_sharding(results):
    r = results["roundtrip"]
    assert r["step"] == 1 and r["equal"] and r["same_equal"]
    assert r["spec"] == [None, "model"] and r["sharding_is_target"]  # not the saved layout
    assert r["same_spec"] == ["data", "model"]
    assert r["others"] == [[0, 1, 2], 2.5]  # numpy and Python scalar leaves
    assert "different model" in r["count_error"]


def test_tensor_parallel_resume_matches_uninterrupted_run(results):
    r = results["resume"]
    assert r["interrupted"] and r["resumed_from"] == 3 and r["step"] == 6
    assert r["max_diff"] <= 1e-6
    assert r["bit_identical"]  # same shardings, same steps: identical on CPU
    assert r["final_query_spec"] == [None, "model"]


def test_mesh_runs_compile_the_step_once(results):
    """The step's new state is pinned to the placed shardings: without that, the partitioner
    returned some leaves in another layout and the second step compiled the step again."""
    assert results["compiles"] == [1]


def test_resume_restores_into_the_placed_shardings(results):
    seen = results["resume"]["restore"]
    assert seen["step"] == 3 and seen["same"]  # every leaf: the sharding of the placed state
    assert seen["query"] == [None, "model"] and seen["down"] == ["model"]
    d = results["direct"]
    assert d["step"] == 6 and d["same"] and d["equal_final"]
    assert d["query"] == [None, "model"] and d["mu_query"] == [None, "model"]  # Adam moments too


# --- process-0 guard (in this process) ---------------------------------------------------------
def test_is_main_process_follows_the_process_index(monkeypatch):
    import jax

    from posjax.distributed import is_main_process

    assert is_main_process()
    monkeypatch.setattr(jax, "process_index", lambda *a, **k: 1)
    assert not is_main_process()


def test_only_the_main_process_writes_logs(tmp_path, monkeypatch, capsys):
    """Another process (the guard patched, since orbax itself needs the real process index)
    writes no metrics, run record or progress bar, but saves and resumes checkpoints."""
    from flax import nnx

    from posjax.distributed import mesh as mesh_module
    from posjax.models import Classifier, TransformerConfig
    from posjax.training import (ArrayBatches, Checkpointer, TrainConfig, classification_loss,
                                 train)

    rng = np.random.default_rng(0)
    data = {"tokens": rng.integers(0, 32, (32, 8)).astype(np.int32),
            "labels": rng.integers(0, 3, 32).astype(np.int32)}
    cfg = TransformerConfig(vocab_size=32, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, pe="t5")

    def run(out_dir, steps):
        model = Classifier(cfg, 3, rngs=nnx.Rngs(0))
        tc = TrainConfig(steps=steps, batch_size=8, checkpoint_every=2, log_every=1,
                         progress=True)
        return train(model, classification_loss, ArrayBatches(data, 8, seed=1), tc,
                     out_dir=str(out_dir), run_config={"model": cfg})

    monkeypatch.setattr(mesh_module, "is_main_process", lambda: False)
    run(tmp_path, 2)
    assert sorted(os.listdir(tmp_path)) == ["checkpoints"]
    assert Checkpointer(str(tmp_path / "checkpoints")).latest_step() == 2
    assert run(tmp_path, 4).resumed_from == 2
    assert sorted(os.listdir(tmp_path)) == ["checkpoints"]
    err = capsys.readouterr().err
    assert "it/s" not in err and "%|" not in err  # no progress bar
    # the main process writes them (the control: the same run, the guard unpatched)
    monkeypatch.undo()
    run(tmp_path / "main", 2)
    assert sorted(os.listdir(tmp_path / "main")) == ["checkpoints", "config.json", "metrics.jsonl",
                                                     "train.lock"]


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    print(json.dumps(run_checks(sys.argv[1])))
