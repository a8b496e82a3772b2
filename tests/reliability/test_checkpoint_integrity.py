"""Checkpoints carry checksums; a damaged latest one is reported and the previous one used."""
import json
import os
import warnings

import jax.numpy as jnp
import numpy as np
import pytest

from posjax.training import CheckpointCorrupted, Checkpointer
from posjax.training.checkpoint import CHECKSUM_FILE


def _state(value):
    return {"w": jnp.full((64, 32), value, jnp.float32), "b": jnp.arange(5, dtype=jnp.float32)}


@pytest.fixture
def saved(tmp_path):
    ckpt = Checkpointer(str(tmp_path / "checkpoints"), keep=3)
    for step in (1, 2, 3):
        ckpt.save(step, _state(float(step)))
    ckpt.close()
    return str(tmp_path / "checkpoints")


def _files(step_dir):
    out = []
    for root, _, names in os.walk(step_dir):
        out += [os.path.join(root, n) for n in names if n != CHECKSUM_FILE]
    return out


def _truncate(step_dir):
    for path in _files(step_dir):
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)


def _empty_metadata(step_dir):
    for path in _files(step_dir):
        if "metadata" in os.path.basename(path).lower():
            open(path, "w").close()


def _flip_bytes(step_dir):
    path = max(_files(step_dir), key=os.path.getsize)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x40
    open(path, "wb").write(bytes(data))


def test_every_checkpoint_has_checksums_of_all_its_files(saved):
    step_dir = os.path.join(saved, "3")
    sums = json.load(open(os.path.join(step_dir, CHECKSUM_FILE)))
    assert sorted(sums) == sorted(os.path.relpath(p, step_dir) for p in _files(step_dir))


@pytest.mark.parametrize("damage", [_truncate, _empty_metadata, _flip_bytes])
def test_damaged_latest_checkpoint_falls_back_to_the_previous_one(saved, damage):
    damage(os.path.join(saved, "3"))
    ckpt = Checkpointer(saved)
    with pytest.warns(UserWarning, match=r"step 3 \(checkpoint .*3.*restored the previous valid "
                                         r"checkpoint, step 2"):
        step, state = ckpt.restore(_state(0.0))
    assert step == 2
    np.testing.assert_array_equal(np.asarray(state["w"]), np.full((64, 32), 2.0, np.float32))
    assert ckpt.all_steps() == [1, 2]  # the damaged one was moved aside
    assert os.path.isdir(saved + ".corrupted/3")


def test_undamaged_checkpoints_restore_without_warning(saved):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        step, state = Checkpointer(saved).restore(_state(0.0))
    assert step == 3 and float(state["w"][0, 0]) == 3.0


def test_no_valid_checkpoint_is_an_error_naming_each(saved):
    for step in (1, 2, 3):
        _flip_bytes(os.path.join(saved, str(step)))
    with pytest.raises(CheckpointCorrupted, match="step 3: .*step 2: .*step 1: "):
        Checkpointer(saved).restore(_state(0.0))


def test_requested_damaged_step_is_an_error(saved):
    _flip_bytes(os.path.join(saved, "2"))
    with pytest.raises(CheckpointCorrupted, match="does not match its checksum"):
        Checkpointer(saved).restore(_state(0.0), step=2)


def test_unreadable_checkpoint_without_checksums_falls_back(saved):
    step_dir = os.path.join(saved, "3")
    os.remove(os.path.join(step_dir, CHECKSUM_FILE))  # as written before checksums existed
    _empty_metadata(step_dir)
    with pytest.warns(UserWarning, match=r"step 3 \(checkpoint .* is unreadable .*step 2"):
        step, _ = Checkpointer(saved).restore(_state(0.0))
    assert step == 2
