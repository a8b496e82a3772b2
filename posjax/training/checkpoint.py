"""Orbax checkpoints of the training state (parameters, optimiser state, step).

The state is saved as the flat list of its leaves and restored into the structure of the live
state, so any pytree (NNX ``State``, optax named tuples) round-trips exactly.
"""
from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np


class Checkpointer:
    """Save/restore the latest training state under ``directory``."""

    def __init__(self, directory: str, *, keep: int = 2):
        import orbax.checkpoint as ocp  # lazy: heavy import

        self._ocp = ocp
        self.directory = os.path.abspath(directory)
        self.manager = ocp.CheckpointManager(
            self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True))

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any) -> None:
        leaves = [np.asarray(x) for x in jax.tree.leaves(state)]
        self.manager.save(step, args=self._ocp.args.StandardSave(leaves), force=True)
        self.manager.wait_until_finished()

    def restore(self, state_like: Any, step: int | None = None) -> tuple[int, Any]:
        """Restore into the structure of ``state_like``; returns ``(step, state)``."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        leaves, treedef = jax.tree.flatten(state_like)
        target = [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype) for x in leaves]
        restored = self.manager.restore(step, args=self._ocp.args.StandardRestore(target))
        if len(restored) != len(leaves):
            raise ValueError(f"checkpoint at step {step} has {len(restored)} arrays, the model "
                             f"state has {len(leaves)}: it was written by a different model")
        return step, jax.tree.unflatten(treedef, [jax.numpy.asarray(x) for x in restored])

    def close(self) -> None:
        self.manager.close()
