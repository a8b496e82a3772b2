"""The small tensor-parallel training run shared by the checkpoint tests (one process with 4 fake
devices, and two real processes): a T5-bias Classifier, AdamW with dropout, checkpoints every
``every`` steps, a KeyboardInterrupt when the batch of step ``interrupt_at`` is requested."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_on_fake_devices(script: str, *flags: str, devices: int = 4) -> dict:
    """Run ``script`` in a subprocess with ``devices`` fake CPU devices (the XLA flag must be set
    before JAX is imported) and return the JSON on its last stdout line."""
    env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "")
                                        + f" --xla_force_host_platform_device_count={devices}").strip(),
               JAX_PLATFORMS="cpu", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, os.path.abspath(script), *flags], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])

CONFIG = dict(vocab_size=32, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=8, pe="t5",
              dropout=0.1)


def named(tree) -> dict:
    """``{parameter name: leaf}`` of a parameter pytree."""
    import jax

    from posjax.distributed import param_name

    return {param_name(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def tp_train(out_dir: str | None, mesh, interrupt_at: int | None = None, *, steps: int = 6,
             every: int = 2, keep: int = 2):
    """Train on ``mesh``; returns ``(TrainResult, {parameter name: array})``."""
    from flax import nnx

    from posjax.models import Classifier, TransformerConfig
    from posjax.training import ArrayBatches, TrainConfig, classification_loss, train

    rng = np.random.default_rng(0)
    data = {"tokens": rng.integers(0, 32, (32, 8)).astype(np.int32),
            "labels": rng.integers(0, 3, 32).astype(np.int32)}
    cfg = TransformerConfig(**CONFIG)
    model = Classifier(cfg, 3, rngs=nnx.Rngs(0))
    base = ArrayBatches(data, 8, seed=1)

    def batches(step):
        if step == interrupt_at:
            raise KeyboardInterrupt
        return base(step)

    tc = TrainConfig(steps=steps, batch_size=8, optimizer="adamw", learning_rate=1e-2,
                     checkpoint_every=every, keep_checkpoints=keep, log_every=1, progress=False)
    result = train(model, classification_loss, batches, tc, out_dir=out_dir, mesh=mesh,
                   run_config={"model": cfg})
    return result, named(nnx.state(model, nnx.Param))
