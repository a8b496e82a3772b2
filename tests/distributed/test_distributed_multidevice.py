"""Sharded training and geometry on 4 fake CPU devices match the single-device paths.

The checks run in one subprocess started with ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
(the flag must be set before JAX is imported, and this pytest process already has JAX with one
device). The subprocess runs this file as a script and prints one JSON line of results; the tests
below assert on them. Tolerances: training 1e-5 (float32 reductions are reordered by the
all-reduce), geometry 2e-6 (tiles of the Gram product are summed in another order).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_TOL = 1e-5
# float32 sums over 4 fake devices: the all-reduce order is not fixed, so a few ulps of the
# O(1) distances (2.5e-6 measured for split halves on a loaded 2-core machine) are expected.
GEOM_TOL = 4e-6


# --- the subprocess -----------------------------------------------------------------------------
def _train(mesh, *, optimizer, pe="t5"):
    import jax
    from flax import nnx

    from posjax.models import Classifier, TransformerConfig
    from posjax.training import ArrayBatches, TrainConfig, classification_loss, train

    rng = np.random.default_rng(0)
    data = {"tokens": rng.integers(0, 32, (32, 8)).astype(np.int32),
            "labels": rng.integers(0, 3, 32).astype(np.int32)}
    cfg = TransformerConfig(vocab_size=32, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, pe=pe, dropout=0.1)
    model = Classifier(cfg, 3, rngs=nnx.Rngs(0))
    tc = TrainConfig(steps=3, batch_size=8, optimizer=optimizer, learning_rate=1e-2,
                     progress=False, log_every=1)
    result = train(model, classification_loss, ArrayBatches(data, 8, seed=1), tc, mesh=mesh)
    params = nnx.state(model, nnx.Param)
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return result.metrics["loss"], {"/".join(str(getattr(k, "key", k)) for k in path[:-1]): leaf
                                    for path, leaf in flat}


def _max_diff(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


def _spec(x) -> list:
    """The PartitionSpec of ``x`` as a list, trailing Nones dropped (``P('a', None) == P('a')``)."""
    spec = list(getattr(x.sharding, "spec", []))
    while spec and spec[-1] is None:
        spec.pop()
    return [list(a) if isinstance(a, tuple) else a for a in spec]


def run_checks(full: bool = False) -> dict:
    """All checks; ``full`` adds AdamW training and more counting options (the slow test)."""
    import jax

    from posjax import distributed as dist
    from posjax.geometry import positional_distributions
    from posjax.geometry import hellinger_matrix

    out: dict = {"devices": len(jax.devices())}
    # training: data parallel (4 x 1) against one device, through posjax.training.train
    loss0, p0 = _train(None, optimizer="sgd")
    loss1, p1 = _train(dist.make_mesh(4, 1), optimizer="sgd")
    q = "transformer/blocks/0/attn/query/kernel"
    out["train"] = {"loss": [loss0, loss1], "dp_diff": _max_diff(p0, p1), "dp_spec": _spec(p1[q])}
    if full:  # tensor parallel (2 x 2): q/k/v/up split by columns, out/down by rows
        loss2, p2 = _train(dist.make_mesh(2, 2), optimizer="sgd")
        out["train"].update(tp_loss=loss2, tp_diff=_max_diff(p0, p2), tp_spec=_spec(p2[q]),
                            tp_down_spec=_spec(p2["transformer/blocks/0/mlp/down/kernel"]))
        # Adam amplifies round-off where a gradient is ~0 (the key bias): compare losses
        out["adam_loss"] = [_train(m, optimizer="adamw")[0]
                            for m in (None, dist.make_mesh(4, 1), dist.make_mesh(2, 2))]

    # geometry: counts and P, then Hellinger matrices, on a 4-device row mesh and a 2 x 2 mesh
    rng = np.random.default_rng(0)
    V, n = 40, 8
    tok = rng.integers(2, V, (200, 11)).astype(np.int32)
    tok[:, 0] = 1  # a [CLS]-like first token
    tok[10:20, 4] = 0  # some padding ids
    lens = rng.integers(6, 12, 200)
    options = [{}, {"pad_id": 0}, {"keep_special": False, "special_ids": [1], "top_k": 8,
                                   "smoothing": 0.5}, {"split_half": True, "split_seed": 3}]
    extra = [{"keep_special": False, "special_ids": [1]}, {"top_k": 8},
             {"split_half": True}, {"pad_id": 0, "pad_mode": "count"}]
    geo: dict = {"P": [], "N": [], "P_spec": [], "D": {}}
    for mesh in (None, dist.make_mesh(2, 2)):
        for kw in (options + extra if full else options[:2] if mesh is not None else options):
            P0, N0 = positional_distributions(tok, vocab_size=V, num_positions=n, lengths=lens,
                                              batch_size=64, **kw)
            P1, N1 = dist.sharded_positional_distributions(
                tok, vocab_size=V, num_positions=n, lengths=lens, batch_size=64, mesh=mesh, **kw)
            geo["P"].append(float(np.max(np.abs(np.asarray(P0) - np.asarray(P1)))))
            geo["N"].append(bool(np.array_equal(np.asarray(N0), np.asarray(N1))))
            geo["P_spec"].append(_spec(P1))
        P, _ = positional_distributions(tok, vocab_size=V, lengths=lens, batch_size=64)
        P = np.concatenate([np.asarray(P), np.asarray(P)[3:5]])  # duplicates: the exact fix runs
        for metric in ("chord", "fisher_rao", "normalized") if full or mesh is None else ("chord",):
            D0 = hellinger_matrix(P, metric=metric)
            D1 = dist.sharded_hellinger_matrix(P, metric=metric, mesh=mesh)
            geo["D"].setdefault(metric, []).append(
                float(np.max(np.abs(np.asarray(D0) - np.asarray(D1)))))
        if mesh is not None and not full:
            continue
        Ph, _ = positional_distributions(tok, vocab_size=V, lengths=lens, batch_size=64,
                                         split_half=True)
        D0 = hellinger_matrix(Ph, debias="split_half")
        D1 = dist.sharded_hellinger_matrix(Ph, debias="split_half", mesh=mesh)
        geo["D"].setdefault("split_half", []).append(
            float(np.max(np.abs(np.asarray(D0) - np.asarray(D1)))))
    Dn = dist.sharded_hellinger_matrix(np.asarray(P)[:12])  # n = 12: rows stay split
    geo["D_spec"] = _spec(Dn)
    geo["D_zero_diag"] = bool(np.all(np.diag(np.asarray(Dn)) == 0))
    geo["D_symmetric"] = bool(np.array_equal(np.asarray(Dn), np.asarray(Dn).T))
    out["geometry"] = geo
    return out


# --- the tests ----------------------------------------------------------------------------------
def _run(*flags: str) -> dict:
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip(),
               JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *flags], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results() -> dict:
    return _run()


def test_four_fake_devices(results):
    assert results["devices"] == 4


def test_data_parallel_training_matches_single_device(results):
    t = results["train"]
    assert t["dp_diff"] <= TRAIN_TOL
    assert abs(t["loss"][1] - t["loss"][0]) <= TRAIN_TOL * max(1.0, abs(t["loss"][0]))
    assert t["dp_spec"] == []  # replicated parameters


def test_sharded_positional_distributions_match(results):
    g = results["geometry"]
    assert max(g["P"]) == 0.0  # integer counts: identical
    assert all(g["N"])
    # P stays split by rows: [rows], [(data, model)], or [None, rows] for split halves
    assert all(s in (["rows"], [["data", "model"]], [None, "rows"]) for s in g["P_spec"])


@pytest.mark.parametrize("metric", ["chord", "fisher_rao", "split_half"])
def test_sharded_hellinger_matches(results, metric):
    assert max(results["geometry"]["D"][metric]) <= GEOM_TOL


@pytest.mark.slow
def test_full_sweep_matches():
    """Tensor-parallel training (2 x 2 mesh), AdamW, more counting options and metrics."""
    r = _run("--full")
    g = r["geometry"]
    assert max(g["P"]) == 0.0 and all(g["N"])
    assert all(max(v) <= GEOM_TOL for v in g["D"].values())
    t = r["train"]
    assert t["dp_diff"] <= TRAIN_TOL and t["tp_diff"] <= TRAIN_TOL
    assert abs(t["tp_loss"] - t["loss"][0]) <= TRAIN_TOL * max(1.0, abs(t["loss"][0]))
    assert t["tp_spec"] == [None, "model"] and t["tp_down_spec"] == ["model"]
    adam = r["adam_loss"]
    assert max(abs(a - adam[0]) for a in adam) <= TRAIN_TOL * max(1.0, abs(adam[0]))


def test_sharded_hellinger_layout(results):
    g = results["geometry"]
    assert g["D_spec"] == ["rows"]
    assert g["D_zero_diag"] and g["D_symmetric"]


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    print(json.dumps(run_checks(full="--full" in sys.argv)))
