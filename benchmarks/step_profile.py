"""Where the time of a posjax training step goes: the step taken apart, one jitted piece each.

Usage::

    python -m benchmarks.step_profile [--size bert-base] [--pe none] [--dtype bfloat16]
        [--attention-impl cudnn] [--lm-head-dtype compute,float32] [--pieces grad,body,step]
        [--out DIR]

For a ``LanguageModel`` of ``benchmarks.training``'s sizes it times (best of ``--rounds`` rounds of
``--steps`` calls after one untimed call, so compilation is excluded) the jitted functions:

* ``forward`` (piece ``forward``): logits and the mean cross-entropy;
* ``forward+backward`` (``grad``): that loss and its gradient with respect to every parameter;
* ``body forward+backward`` (``body``): the same for the Transformer body alone, with the loss
  ``mean(hidden ** 2)`` (no vocabulary projection, no softmax over the vocabulary);
* ``step`` (``step``): the full training step of ``posjax.training.make_train_step`` (AdamW).

Differences locate the cost: step minus forward+backward is the optimiser, forward+backward
minus the body's is the head (the ``[d, V]`` projection and the cross-entropy over ``V``).
Each row also gives the achieved TFLOP/s of its model FLOPs (``benchmarks.training``'s
convention: ``6 N tokens`` plus attention for a full step, a third of it for a forward pass).
Writes ``DIR/step_profile.json``; it runs on a CPU too (use ``--size quick``).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from benchmarks.training import SIZES, model_flops_per_step, peak_tflops


def _best(fn, args, steps: int, rounds: int) -> float:
    import jax  # noqa: PLC0415

    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(steps):
            out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t) / steps)
    return best


PIECES = ("forward", "grad", "body", "step")


def profile(size: dict, pe: str, dtype: str, attention_impl: str | None, lm_head_dtype: str,
            steps: int, rounds: int, which: tuple[str, ...] = PIECES) -> list[dict[str, Any]]:
    """Time the pieces of one configuration; rows ``{"piece", "ms", "tflops", ...}``."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    import optax  # noqa: PLC0415
    from flax import nnx  # noqa: PLC0415

    from posjax.models import LanguageModel, TransformerConfig  # noqa: PLC0415
    from posjax.training import TrainConfig, make_optimizer, make_train_step  # noqa: PLC0415

    cfg = TransformerConfig(vocab_size=size["vocab_size"], num_layers=size["num_layers"],
                            d_model=size["d_model"], num_heads=size["num_heads"],
                            d_ff=size["d_ff"], max_len=size["seq"], pe=pe, dtype=dtype,
                            attention_impl=attention_impl, lm_head_dtype=lm_head_dtype)
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    rng = np.random.default_rng(0)
    shape = (size["batch"], size["seq"])
    batch = {"tokens": jnp.asarray(rng.integers(0, size["vocab_size"], shape), jnp.int32),
             "targets": jnp.asarray(rng.integers(0, size["vocab_size"], shape), jnp.int32)}

    def loss_fn(m, b, key=None):
        logits = m(b["tokens"], deterministic=True)
        return optax.softmax_cross_entropy_with_integer_labels(logits, b["targets"]).mean(), {}

    def lm_loss(p, b):
        return loss_fn(nnx.merge(graphdef, p, rest), b)[0]

    def body_loss(p, b):
        hidden = nnx.merge(graphdef, p, rest).transformer(b["tokens"], deterministic=True)
        return jnp.mean(jnp.square(hidden.astype(jnp.float32)))

    tx = make_optimizer(TrainConfig(optimizer="adamw", learning_rate=1e-4, weight_decay=0.01))
    opt_state = tx.init(params)
    step_fn = make_train_step(graphdef, loss_fn, tx, 0)
    flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
    matmul = sum(int(np.prod(v.shape)) for path, v in flat
                 if "embed" not in path and "pes" not in path)
    full = model_flops_per_step(matmul, size)
    body = model_flops_per_step(matmul - size["d_model"] * size["vocab_size"], size)
    pieces = {
        "forward": ("forward", jax.jit(lm_loss), (params, batch), full / 3),
        "grad": ("forward+backward", jax.jit(jax.value_and_grad(lm_loss)), (params, batch), full),
        "body": ("body forward+backward", jax.jit(jax.value_and_grad(body_loss)),
                 (params, batch), body),
        "step": ("step (forward+backward+AdamW)",
                 lambda p, o, b: step_fn(p, rest, o, b, jnp.int32(0)), (params, opt_state, batch),
                 full),
    }
    rows = []
    for name, fn, args, flops in (pieces[k] for k in which):
        t = _best(fn, args, steps, rounds)
        rows.append({"piece": name, "ms": 1e3 * t, "model_flops": flops,
                     "tflops": flops / t / 1e12, "lm_head_dtype": lm_head_dtype, "pe": pe,
                     "dtype": dtype, "attention_impl": attention_impl})
        print(f"  {lm_head_dtype:8s} {name:32s} {1e3 * t:8.2f} ms  {flops / t / 1e12:7.1f} TFLOP/s",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="bert-base")
    ap.add_argument("--pe", default="none")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    ap.add_argument("--attention-impl", choices=("xla", "cudnn"), default=None)
    ap.add_argument("--lm-head-dtype", default="compute,float32",
                    help="comma-separated lm_head_dtype values to compare")
    ap.add_argument("--pieces", default=",".join(PIECES),
                    help=f"comma-separated pieces to time, from {','.join(PIECES)}")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="runs/benchmarks")
    args = ap.parse_args(argv)
    heads = [h.strip() for h in args.lm_head_dtype.split(",") if h.strip()]
    bad = sorted(set(heads) - {"compute", "float32"})
    if bad:
        ap.error(f"--lm-head-dtype values must be 'compute' or 'float32', got {bad}")
    which = tuple(p.strip() for p in args.pieces.split(",") if p.strip())
    if not which or set(which) - set(PIECES):
        ap.error(f"--pieces must name some of {PIECES}, got {args.pieces!r}")
    if args.steps < 1 or args.rounds < 1:
        ap.error("--steps and --rounds must be >= 1")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax  # noqa: PLC0415

    from posjax.encodings import names  # noqa: PLC0415

    if args.pe not in names():
        ap.error(f"unknown PE {args.pe!r}")
    dev = jax.devices()[0]
    peak = peak_tflops(getattr(dev, "device_kind", ""))
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "step_profile.json")
    rows: list[dict] = []
    for head in heads:
        rows += profile(dict(SIZES[args.size]), args.pe, args.dtype, args.attention_impl, head,
                        args.steps, args.rounds, which)
        for r in rows:
            r["mfu"] = None if not peak else r["tflops"] / peak
            r["device_kind"] = getattr(dev, "device_kind", "")
        with open(path, "w") as fh:  # after each configuration: an interrupted run keeps it
            json.dump(rows, fh, indent=2)
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
