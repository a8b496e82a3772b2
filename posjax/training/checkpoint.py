"""Orbax checkpoints of the training state (parameters, optimiser state, step).

The state is saved as the flat list of its leaves and restored into the structure of the live
state, so any pytree (NNX ``State``, optax named tuples) round-trips exactly.

``jax.Array`` leaves are handed to orbax as they are: with a sharded state (data- or
tensor-parallel, one or many hosts) every process writes the shards it holds, nothing is gathered
to one host, and every process must call :meth:`Checkpointer.save` and
:meth:`Checkpointer.restore`. A restored leaf takes the sharding of the matching ``jax.Array``
leaf of the live state, so a sharded run resumes with the same layout.

Every checkpoint is verified: once orbax has written step ``N``, process 0 stores the SHA-256 of
each of its files in ``N/posjax_checksums.json``. :meth:`Checkpointer.restore` checks them (and
that orbax can read the step) before using a step; a corrupted or incomplete latest checkpoint is
moved to ``<directory>.corrupted/`` with a warning naming it and the previous valid step, which
is restored instead. A checkpoint without a checksum file (written before checksums existed, or
interrupted between orbax's write and the checksum's) is used when orbax can read it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from typing import Any

import jax
import numpy as np

CHECKSUM_FILE = "posjax_checksums.json"


class CheckpointCorrupted(ValueError):
    """A checkpoint whose files do not match their checksums or that orbax cannot read."""


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(step_dir: str) -> list[str]:
    """Paths (relative to ``step_dir``) of every file of a checkpoint but the checksum file."""
    out = []
    for root, _, names in os.walk(step_dir):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), step_dir)
            if rel != CHECKSUM_FILE:
                out.append(rel)
    return sorted(out)


def write_checksums(step_dir: str) -> None:
    """Store the SHA-256 of every file of the checkpoint in ``step_dir`` (atomically)."""
    sums = {rel: _sha256(os.path.join(step_dir, rel)) for rel in _files(step_dir)}
    tmp = os.path.join(step_dir, f".{CHECKSUM_FILE}.tmp")
    with open(tmp, "w") as f:
        json.dump(sums, f, indent=1, sort_keys=True)
    os.replace(tmp, os.path.join(step_dir, CHECKSUM_FILE))


def verify_checksums(step_dir: str) -> bool:
    """Check the files of ``step_dir`` against its checksum file.

    Returns:
      True when verified, False when the checkpoint has no checksum file.

    Raises:
      CheckpointCorrupted: a file is missing, extra, truncated or altered (named in the message).
    """
    path = os.path.join(step_dir, CHECKSUM_FILE)
    if not os.path.exists(path):
        return False
    try:
        with open(path) as f:
            sums = json.load(f)
    except ValueError:
        raise CheckpointCorrupted(f"its checksum file {path} is unreadable") from None
    present = set(_files(step_dir))
    for rel, expected in sorted(sums.items()):
        if rel not in present:
            raise CheckpointCorrupted(f"file {rel} is missing")
        if _sha256(os.path.join(step_dir, rel)) != expected:
            raise CheckpointCorrupted(f"file {rel} does not match its checksum")
    extra = sorted(present - set(sums))
    if extra:
        raise CheckpointCorrupted(f"unexpected file(s) {', '.join(extra)}")
    return True


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
        if jax.process_index() == 0 and os.path.isdir(self.step_dir(step)):
            write_checksums(self.step_dir(step))

    def step_dir(self, step: int) -> str:
        """The directory of checkpoint ``step``."""
        return os.path.join(self.directory, str(step))

    def all_steps(self) -> list[int]:
        """Steps of every checkpoint on disk, ascending."""
        return sorted(self.manager.all_steps())

    def _saved_count(self, step: int) -> int | None:
        """Number of arrays in checkpoint ``step`` (None when orbax cannot tell)."""
        try:
            tree = getattr(self.manager.item_metadata(step), "tree", None)
        except Exception:  # unreadable metadata: let restore report the problem
            return None
        return len(tree) if isinstance(tree, (list, tuple)) else None

    def restore(self, state_like: Any, step: int | None = None) -> tuple[int, Any]:
        """Restore into the structure of ``state_like``; returns ``(step, state)``.

        Without ``step`` the latest valid checkpoint is used: corrupted or unreadable later ones
        are moved aside (single-process runs) with a ``UserWarning`` naming them and the step
        restored instead. A ``jax.Array`` leaf of ``state_like`` is restored with its sharding
        (each process reads only its shards); any other leaf becomes an array on the default
        device.

        Raises:
          FileNotFoundError: no checkpoint at all.
          CheckpointCorrupted: no valid checkpoint (every one is named with its problem), or
            the requested ``step`` is corrupted.
          ValueError: the checkpoint holds a different number of arrays than ``state_like``.
        """
        if step is not None:
            return step, self._restore_step(state_like, step)
        steps = self.all_steps()[::-1]
        if not steps:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        bad: list[tuple[int, str]] = []
        for candidate in steps:
            try:
                state = self._restore_step(state_like, candidate)
            except CheckpointCorrupted as e:
                bad.append((candidate, str(e)))
                continue
            if bad:
                moved = self._set_aside([b for b, _ in bad])
                named = "; ".join(f"step {b} ({why})" for b, why in bad)
                warnings.warn(f"corrupted or incomplete checkpoint(s) in {self.directory}: {named}"
                              f"; restored the previous valid checkpoint, step {candidate}{moved}",
                              stacklevel=2)
            return candidate, state
        raise CheckpointCorrupted(
            f"no valid checkpoint in {self.directory}: "
            + "; ".join(f"step {b}: {why}" for b, why in bad)
            + f"; delete {os.path.dirname(self.directory)} to start over")

    def _restore_step(self, state_like: Any, step: int) -> Any:
        """Verify and restore checkpoint ``step`` (CheckpointCorrupted when it is damaged)."""
        step_dir = self.step_dir(step)
        try:
            verify_checksums(step_dir)
        except CheckpointCorrupted as e:
            raise CheckpointCorrupted(f"checkpoint {step_dir}: {e}") from None
        leaves, treedef = jax.tree.flatten(state_like)
        saved = self._saved_count(step)
        if saved is not None and saved != len(leaves):
            raise ValueError(f"checkpoint at step {step} has {saved} arrays, the model "
                             f"state has {len(leaves)}: it was written by a different model")
        target = [_restore_target(x) for x in leaves]
        try:
            restored = self.manager.restore(step, args=self._ocp.args.StandardRestore(target))
        except Exception as e:  # orbax/tensorstore/json errors of a damaged checkpoint
            first = (str(e).strip().splitlines() or [""])[0][:200]
            raise CheckpointCorrupted(f"checkpoint {step_dir} is unreadable "
                                      f"({type(e).__name__}: {first})") from None
        out = [r if isinstance(x, jax.Array) else jax.numpy.asarray(r)
               for x, r in zip(leaves, restored)]
        return jax.tree.unflatten(treedef, out)

    def _set_aside(self, steps: list[int]) -> str:
        """Move the directories of ``steps`` to ``<directory>.corrupted/`` (one process only);
        returns a note for the warning."""
        if jax.process_count() > 1:
            return (f"; delete {', '.join(self.step_dir(s) for s in steps)} before the run "
                    "saves those steps again")
        aside = f"{self.directory}.corrupted"
        os.makedirs(aside, exist_ok=True)
        for s in steps:
            target = os.path.join(aside, str(s))
            if os.path.exists(target):
                shutil.rmtree(target)
            shutil.move(self.step_dir(s), target)
        self.manager.reload()
        return f"; the corrupted one(s) were moved to {aside}"

    def close(self) -> None:
        self.manager.close()
