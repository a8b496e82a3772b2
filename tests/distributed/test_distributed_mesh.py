"""Mesh construction, multi-host start-up helper and sharding rules (one CPU device)."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from posjax import distributed as dist


def test_mesh_on_one_device():
    mesh = dist.make_mesh()
    assert mesh.axis_names == ("data", "model")
    assert mesh.devices.shape == (len(jax.devices()), 1)
    summary = dist.mesh_summary(mesh)
    assert summary["axes"] == {"data": len(jax.devices()), "model": 1}
    assert summary["process_count"] == 1


@pytest.mark.parametrize("data, model", [(2, 1), (1, 2), (0, 1), (1, 0)])
def test_mesh_size_errors(data, model):
    with pytest.raises(ValueError, match="mesh|axis size|devices"):
        dist.make_mesh(data, model)


def test_initialize_is_a_no_op_on_one_machine(monkeypatch):
    for name in ("JAX_COORDINATOR_ADDRESS", "SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE",
                 "TPU_WORKER_HOSTNAMES", "MEGASCALE_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES",
                 "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    assert dist.initialize() is False
    monkeypatch.setenv("SLURM_JOB_ID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "1")  # one task: still one process
    assert dist.initialize() is False


def test_initialize_forwards_explicit_arguments(monkeypatch):
    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda *a, **k: calls.append((a, k)))
    assert dist.initialize("10.0.0.1:1234", 2, 1) is True
    assert calls[0][0] == ("10.0.0.1:1234", 2, 1)


@pytest.mark.parametrize("name, shape, spec", [
    ("transformer/blocks/0/attn/query/kernel", (8, 8), P(None, "model")),
    ("transformer/blocks/3/attn/value/bias", (8,), P("model")),
    ("transformer/blocks/0/attn/out/kernel", (8, 8), P("model", None)),
    ("transformer/blocks/0/attn/out/bias", (8,), P()),
    ("transformer/blocks/1/mlp/up/kernel", (8, 16), P(None, "model")),
    ("transformer/blocks/1/mlp/down/kernel", (16, 8), P("model", None)),
    ("transformer/blocks/1/norm1/scale", (8,), P()),
    ("transformer/embed/embedding", (32, 8), P()),
    ("head/kernel", (8, 32), P()),
])
def test_tensor_parallel_rules(name, shape, spec):
    assert dist.tensor_parallel_spec(name, shape, 2) == spec
    assert dist.tensor_parallel_spec(name, shape, 1) == P()


def test_param_shardings_of_a_model():
    from flax import nnx

    from posjax.models import Classifier, TransformerConfig

    model = Classifier(TransformerConfig(vocab_size=16, num_layers=1, d_model=8, num_heads=2,
                                         d_ff=16, max_len=4, pe="t5"), 2, rngs=nnx.Rngs(0))
    params = nnx.state(model, nnx.Param)
    shardings = dist.param_shardings(params, dist.make_mesh())
    names = [dist.param_name(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    assert "transformer/blocks/0/attn/query/kernel" in names
    assert "transformer/pes/0/bucket_table" in names
    assert all(s.spec == P() for s in jax.tree.leaves(shardings))  # model axis of size 1


def test_shard_batch_checks_divisibility():
    mesh = dist.make_mesh()
    batch = {"tokens": np.zeros((3, 4), np.int32), "labels": np.zeros(3, np.int32)}
    placed = dist.shard_batch(batch, mesh)
    assert placed["tokens"].sharding.spec == P("data", None)
    if len(jax.devices()) > 1:  # only reachable with several devices
        with pytest.raises(ValueError, match="divisible"):
            dist.check_batch_divisible({"x": np.zeros(len(jax.devices()) + 1)}, mesh)


def test_geometry_input_errors():
    P_ = np.full((4, 5), 0.2, np.float32)
    with pytest.raises(ValueError, match="metric"):
        dist.sharded_hellinger_matrix(P_, metric="nope")
    with pytest.raises(ValueError, match="debias"):
        dist.sharded_hellinger_matrix(P_, debias="nope")
    with pytest.raises(ValueError, match="sum to one"):
        dist.sharded_hellinger_matrix(P_ * 2)
    with pytest.raises(ValueError, match="num_positions"):
        dist.sharded_positional_counts(iter([np.zeros((2, 3), np.int32)]), vocab_size=4)
    with pytest.raises(ValueError, match="outside"):
        dist.sharded_positional_distributions(np.full((2, 3), 9), vocab_size=4)
