"""Scaling posjax over devices with JAX's own distributed runtime (``jax.sharding``).

>>> from posjax import distributed as dist
>>> dist.initialize()                      # multi-host: join the run (no-op on one machine)
>>> mesh = dist.make_mesh(model=1)         # ("data", "model") mesh over every device
>>> posjax.training.train(model, loss_fn, batches, config, mesh=mesh)
>>> P, N = dist.sharded_positional_distributions(tokens, vocab_size=V, mesh=mesh)
>>> D = dist.sharded_hellinger_matrix(P, mesh=mesh)
"""
from posjax.distributed.mesh import (DATA, MODEL, data_sharding, initialize, is_main_process,
                                     make_mesh, mesh_summary, replicated)
from posjax.distributed.training import (check_batch_divisible, param_name, param_shardings,
                                         place_state, shard_batch, state_shardings,
                                         tensor_parallel_spec)
from posjax.distributed.geometry import (row_mesh, sharded_bhattacharyya,
                                         sharded_hellinger_matrix, sharded_mds_from_distributions,
                                         sharded_sqrt_rows, sharded_stress_from_distributions)
from posjax.distributed.counting import (sharded_positional_counts,
                                         sharded_positional_distributions)

__all__ = [
    "DATA", "MODEL", "check_batch_divisible", "data_sharding", "initialize", "is_main_process",
    "make_mesh", "mesh_summary", "param_name", "param_shardings", "place_state", "replicated",
    "row_mesh", "shard_batch", "sharded_bhattacharyya", "sharded_hellinger_matrix",
    "sharded_mds_from_distributions", "sharded_sqrt_rows", "sharded_stress_from_distributions",
    "sharded_positional_counts", "sharded_positional_distributions", "state_shardings",
    "tensor_parallel_spec",
]
