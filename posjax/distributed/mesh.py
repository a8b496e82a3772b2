"""Device meshes and multi-host start-up, through JAX's own distributed runtime.

posjax scales with ``jax.sharding``: a :class:`jax.sharding.Mesh` with a ``"data"`` axis (batch
rows are split over it) and a ``"model"`` axis (tensor-parallel weights are split over it). The
same code runs on one CPU, on N fake CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``, set before JAX is imported) and on a
multi-host GPU/TPU slice, where every process calls :func:`initialize` first and then builds the
same global mesh from ``jax.devices()``.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

__all__ = ["DATA", "MODEL", "initialize", "is_main_process", "make_mesh", "data_sharding",
           "replicated", "mesh_summary"]

DATA = "data"
MODEL = "model"

# Environment variables that say "this process is one of several" to jax.distributed's own
# cluster detection (SLURM, Open MPI, Cloud TPU / GKE, or an explicit coordinator).
_CLUSTER_HINTS = ("JAX_COORDINATOR_ADDRESS", "SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE",
                  "TPU_WORKER_HOSTNAMES", "MEGASCALE_COORDINATOR_ADDRESS")


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, local_device_ids: Sequence[int] | None = None,
               auto: bool = True, **kwargs: Any) -> bool:
    """Join a multi-process JAX run (one process per host); call it before any JAX computation.

    A thin wrapper of :func:`jax.distributed.initialize`:

    * with explicit ``coordinator_address``/``num_processes``/``process_id`` (or the variables
      ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``) it forwards them;
    * otherwise, when ``auto`` and a cluster is detected (SLURM, Open MPI, Cloud TPU), it calls
      ``jax.distributed.initialize()`` and lets JAX read the cluster environment;
    * otherwise (a single machine) it does nothing.

    It is idempotent: a second call is a no-op.

    Args:
      coordinator_address: ``host:port`` of process 0.
      num_processes: number of processes (hosts).
      process_id: rank of this process.
      local_device_ids: devices this process drives (default: all visible).
      auto: detect a cluster from the environment when no address is given.
      **kwargs: passed on to :func:`jax.distributed.initialize`.

    Returns:
      True when this process is (now) part of a multi-process run, False for a single process.
    """
    if jax.distributed.is_initialized():
        return True
    env = os.environ
    coordinator_address = coordinator_address or env.get("JAX_COORDINATOR_ADDRESS")
    if num_processes is None and env.get("JAX_NUM_PROCESSES"):
        num_processes = int(env["JAX_NUM_PROCESSES"])
    if process_id is None and env.get("JAX_PROCESS_ID"):
        process_id = int(env["JAX_PROCESS_ID"])
    if coordinator_address is not None:
        if num_processes == 1:
            return False
        jax.distributed.initialize(coordinator_address, num_processes, process_id,
                                   local_device_ids=local_device_ids, **kwargs)
        return True
    if auto and any(h in env for h in _CLUSTER_HINTS):
        if "SLURM_JOB_ID" in env and int(env.get("SLURM_NTASKS", "1")) <= 1:
            return False  # a single-task SLURM job is one process
        if "OMPI_COMM_WORLD_SIZE" in env and int(env["OMPI_COMM_WORLD_SIZE"]) <= 1:
            return False
        jax.distributed.initialize(local_device_ids=local_device_ids, **kwargs)
        return True
    return False


def is_main_process() -> bool:
    """True on process 0, the one that writes logs and run records (always True on one process).

    Work that every process must share (orbax checkpoint saves, jitted steps) is not guarded.
    """
    return jax.process_index() == 0


def make_mesh(data: int | None = None, model: int = 1, *,
              devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A ``("data", "model")`` mesh over the available (global) devices.

    Args:
      data: size of the data-parallel axis (None: all devices divided by ``model``).
      model: size of the tensor-parallel axis (1: pure data parallelism).
      devices: the devices to use (default ``jax.devices()``: every device of every process).

    Returns:
      A :class:`jax.sharding.Mesh` with ``Auto`` axes (GSPMD propagates shardings), built by
      :func:`jax.make_mesh` so the device order follows the physical topology on GPU/TPU.

    Raises:
      ValueError: when ``data * model`` does not equal the number of devices.
    """
    devices = list(jax.devices() if devices is None else devices)
    if model <= 0:
        raise ValueError(f"model axis size must be positive, got {model}")
    if data is None:
        if len(devices) % model:
            raise ValueError(f"{len(devices)} devices cannot be split into a model axis of {model}")
        data = len(devices) // model
    if data <= 0:
        raise ValueError(f"data axis size must be positive, got {data}")
    if data * model != len(devices):
        raise ValueError(f"a mesh of data={data} x model={model} needs {data * model} devices, "
                         f"{len(devices)} are available (pass devices=... to use a subset)")
    try:
        return jax.make_mesh((data, model), (DATA, MODEL), axis_types=(AxisType.Auto,) * 2,
                             devices=devices)
    except Exception:  # a device list make_mesh cannot lay out (e.g. an arbitrary subset)
        return Mesh(np.asarray(devices).reshape(data, model), (DATA, MODEL),
                    axis_types=(AxisType.Auto,) * 2)


def data_sharding(mesh: Mesh, ndim: int = 1, axis: str = DATA) -> NamedSharding:
    """Sharding of a batch array: its leading axis split over ``axis``, the rest replicated."""
    if ndim == 0:
        return NamedSharding(mesh, PartitionSpec())
    return NamedSharding(mesh, PartitionSpec(axis, *([None] * (ndim - 1))))


def replicated(mesh: Mesh) -> NamedSharding:
    """Full replication over ``mesh``."""
    return NamedSharding(mesh, PartitionSpec())


def mesh_summary(mesh: Mesh) -> dict[str, Any]:
    """JSON-friendly description of a mesh (for results files)."""
    devs = mesh.devices.reshape(-1)
    return {"axes": dict(zip(mesh.axis_names, (int(s) for s in mesh.devices.shape))),
            "platform": devs[0].platform, "device_kind": getattr(devs[0], "device_kind", ""),
            "num_devices": int(devs.size), "process_count": jax.process_count()}
