"""Orbax checkpoints of the training state (parameters, optimiser state, step).

The state is saved as the flat list of its leaves and restored into the structure of the live
state, so any pytree (NNX ``State``, optax named tuples) round-trips exactly.

``jax.Array`` leaves are handed to orbax as they are: with a sharded state (data- or
tensor-parallel, one or many hosts) every process writes the shards it holds, nothing is gathered
to one host, and every process must call :meth:`Checkpointer.save` and
:meth:`Checkpointer.restore`. A restored leaf takes the sharding of the matching ``jax.Array``
leaf of the live state, so a sharded run resumes with the same layout.
"""
from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np


def _savable(x: Any) -> Any:
    """A leaf as orbax saves it: jax.Arrays unchanged (sharded), anything else as numpy."""
    return x if isinstance(x, jax.Array) else np.asarray(x)


def _restore_target(x: Any) -> jax.ShapeDtypeStruct:
    """What orbax restores a leaf into: a jax.Array with the sharding of ``x`` when ``x`` is one,
    otherwise a host numpy array of the same shape and dtype."""
    if isinstance(x, jax.Array):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
    x = np.asarray(x)
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


class Checkpointer:
    """Save/restore the latest training state under ``directory``.

    All processes of a multi-host run must take part in :meth:`save` and :meth:`restore`, and
    ``directory`` must be visible to all of them (a shared file system or bucket).
    """

    def __init__(self, directory: str, *, keep: int = 2):
        import orbax.checkpoint as ocp  # lazy: heavy import

        self._ocp = ocp
        self.directory = os.path.abspath(directory)
        self.manager = ocp.CheckpointManager(
            self.directory, item_handlers=ocp.StandardCheckpointHandler(),
            options=ocp.CheckpointManagerOptions(max_to_keep=keep, create=True))

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state: Any) -> None:
        """Save the leaves of ``state`` as checkpoint ``step`` and wait until it is written."""
        leaves = [_savable(x) for x in jax.tree.leaves(state)]
        self.manager.save(step, args=self._ocp.args.StandardSave(leaves), force=True)
        self.manager.wait_until_finished()

    def _saved_count(self, step: int) -> int | None:
        """Number of arrays in checkpoint ``step`` (None when orbax cannot tell)."""
        try:
            tree = getattr(self.manager.item_metadata(step), "tree", None)
        except Exception:  # unreadable metadata: let restore report the problem
            return None
        return len(tree) if isinstance(tree, (list, tuple)) else None

    def restore(self, state_like: Any, step: int | None = None) -> tuple[int, Any]:
        """Restore into the structure of ``state_like``; returns ``(step, state)``.

        A ``jax.Array`` leaf of ``state_like`` is restored with its sharding (each process reads
        only its shards); any other leaf becomes an array on the default device.
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        leaves, treedef = jax.tree.flatten(state_like)
        saved = self._saved_count(step)
        if saved is not None and saved != len(leaves):
            raise ValueError(f"checkpoint at step {step} has {saved} arrays, the model "
                             f"state has {len(leaves)}: it was written by a different model")
        target = [_restore_target(x) for x in leaves]
        restored = self.manager.restore(step, args=self._ocp.args.StandardRestore(target))
        out = [r if isinstance(x, jax.Array) else jax.numpy.asarray(r)
               for x, r in zip(leaves, restored)]
        return step, jax.tree.unflatten(treedef, out)

    def close(self) -> None:
        self.manager.close()
