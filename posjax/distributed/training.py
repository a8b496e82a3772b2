"""Data- and tensor-parallel placement of the training state over a ``("data", "model")`` mesh.

Data parallelism: every parameter is replicated and every batch is split along its leading axis
over ``"data"``; XLA's SPMD partitioner (GSPMD) inserts the gradient all-reduce inside the one
jitted step of :func:`posjax.training.train`, so the step itself is unchanged.

Tensor parallelism (Megatron-style, Shoeybi et al., arXiv 1909.08053), active when the mesh's
``"model"`` axis is larger than 1: the query/key/value and MLP ``up`` projections are split by
output columns and the attention ``out`` and MLP ``down`` projections by input rows, so each
device holds whole heads and a slice of the hidden MLP units. Everything else is replicated.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from posjax.distributed.mesh import DATA, MODEL, data_sharding, replicated

__all__ = ["param_name", "tensor_parallel_spec", "param_shardings", "state_shardings",
           "place_state", "shard_batch", "check_batch_divisible"]

_COLUMN = ("query", "key", "value", "up")  # split by output features
_ROW = ("out", "down")                     # split by input features


def param_name(path: tuple) -> str:
    """``"transformer/blocks/0/attn/query/kernel"`` from a pytree key path."""
    parts = []
    for k in path:
        name = getattr(k, "key", getattr(k, "name", getattr(k, "idx", None)))
        if name is None or name == "value" and isinstance(k, jax.tree_util.GetAttrKey):
            continue
        parts.append(str(name))
    return "/".join(parts)


def tensor_parallel_spec(name: str, shape: tuple[int, ...], model_size: int) -> PartitionSpec:
    """The :class:`PartitionSpec` of one parameter under the tensor-parallel rules.

    Args:
      name: the parameter's path (see :func:`param_name`).
      shape: its shape.
      model_size: size of the ``"model"`` axis; 1 gives full replication.

    Returns:
      ``P(None, "model")`` for q/k/v/up kernels, ``P("model")`` for their biases,
      ``P("model", None)`` for out/down kernels, ``P()`` otherwise.
    """
    if model_size <= 1:
        return PartitionSpec()
    parts = name.split("/")
    if len(parts) < 2 or "blocks" not in parts:
        return PartitionSpec()
    layer, leaf = parts[-2], parts[-1]
    if layer in _COLUMN and leaf == "kernel" and len(shape) == 2:
        return PartitionSpec(None, MODEL)
    if layer in _COLUMN and leaf == "bias" and len(shape) == 1:
        return PartitionSpec(MODEL)
    if layer in _ROW and leaf == "kernel" and len(shape) == 2:
        return PartitionSpec(MODEL, None)
    return PartitionSpec()


def _check_divisible(spec: PartitionSpec, shape, mesh: Mesh, name: str) -> None:
    for dim, axis in zip(shape, spec):
        if axis is not None and dim % mesh.shape[axis]:
            raise ValueError(f"parameter {name} of shape {tuple(shape)} cannot be split over "
                             f"mesh axis '{axis}' of size {mesh.shape[axis]}: choose a model "
                             "axis that divides num_heads, d_model and d_ff")


def param_shardings(params: Any, mesh: Mesh,
                    rule: Callable[[str, tuple, int], PartitionSpec] | None = None) -> Any:
    """A pytree of :class:`NamedSharding` matching ``params``.

    Args:
      params: the parameter pytree (an ``nnx.State``).
      mesh: a mesh with a ``"model"`` axis (or any mesh: a missing axis means size 1).
      rule: ``(name, shape, model_size) -> PartitionSpec``; default :func:`tensor_parallel_spec`.
    """
    rule = rule or tensor_parallel_spec
    model_size = int(mesh.shape.get(MODEL, 1))

    def one(path, leaf):
        name = param_name(path)
        spec = rule(name, tuple(np.shape(leaf)), model_size)
        _check_divisible(spec, np.shape(leaf), mesh, name)
        return NamedSharding(mesh, spec)

    return jax.tree_util.tree_map_with_path(one, params)


def state_shardings(params: Any, opt_state: Any, rest: Any, mesh: Mesh,
                    rule: Callable[[str, tuple, int], PartitionSpec] | None = None
                    ) -> tuple[Any, Any, Any]:
    """Shardings of ``(params, opt_state, rest)``.

    Optimiser sub-states with the structure of ``params`` (Adam's moments, momentum) get the
    parameters' shardings; scalars (step counts) and everything else are replicated.
    """
    p_sh = param_shardings(params, mesh, rule)
    p_def = jax.tree.structure(params)
    rep = replicated(mesh)

    def like_params(x):
        try:
            return jax.tree.structure(x) == p_def
        except Exception:
            return False

    o_sh = jax.tree.map(lambda x: p_sh if like_params(x) else rep, opt_state, is_leaf=like_params)
    r_sh = jax.tree.map(lambda _: rep, rest)
    return p_sh, o_sh, r_sh


def place_state(mesh: Mesh, params: Any, opt_state: Any, rest: Any,
                rule: Callable[[str, tuple, int], PartitionSpec] | None = None
                ) -> tuple[Any, Any, Any]:
    """``jax.device_put`` the training state onto ``mesh`` (see :func:`state_shardings`)."""
    shardings = state_shardings(params, opt_state, rest, mesh, rule)
    return tuple(jax.device_put(x, s) for x, s in zip((params, opt_state, rest), shardings))


def check_batch_divisible(batch: Any, mesh: Mesh, axis: str = DATA) -> None:
    """Raise ValueError when a batch's leading size is not a multiple of the ``axis`` size."""
    size = int(mesh.shape[axis])
    for x in jax.tree.leaves(batch):
        if np.ndim(x) and np.shape(x)[0] % size:
            raise ValueError(f"a batch leaf of shape {np.shape(x)} cannot be split over the "
                             f"'{axis}' mesh axis of size {size}: use a batch size divisible "
                             f"by {size}")


def shard_batch(batch: Any, mesh: Mesh, axis: str = DATA) -> Any:
    """Place a *global* batch on ``mesh``, its leading axis split over ``axis``.

    Every process passes the same global batch (posjax's batches are a deterministic function of
    the step, so each host can build it); only the rows of this process's devices are copied to
    them, via :func:`jax.make_array_from_callback`, which is correct for any device order. In a
    single process this is a plain :func:`jax.device_put`.
    """
    check_batch_divisible(batch, mesh, axis)

    def one(x):
        sharding = data_sharding(mesh, np.ndim(x), axis)
        if jax.process_count() == 1:
            return jax.device_put(x, sharding)
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])

    return jax.tree.map(one, batch)
