"""Cost of the training step's input range checks and last-good-state chaining.

Usage::

    python -m benchmarks.input_checks [--steps 20] [--rounds 5] [--batch 32] [--seq 128]
        [--d-model 128] [--layers 2] [--pe learned]

Times, alternately in one process, two jitted training steps of the same classifier:

* ``checked``: the step of :func:`posjax.training.train` (range checks collected under ``jit``,
  NaN rows for out-of-range ids, the ``ok``/``applied`` chain that freezes the state after a bad
  step);
* ``bare``: the step without any of it (plain embedding lookup, no collection, update kept only
  when the loss is finite), i.e. the step before the checks existed.

Each is compiled first (excluded); then ``--rounds`` rounds of ``--steps`` steps are timed for
each, synchronising at the end of a round. Prints the best-round time per step of each and their
ratio ``checked / bare`` (the machine may be shared: best of rounds).
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.models import Classifier, Transformer, TransformerConfig
from posjax.training import TrainConfig, classification_loss, make_optimizer
from posjax.training import step_function


def _bare_step(graphdef, loss_fn, tx):
    """The step without range checks or chaining (what ``step_function`` was before them)."""

    @jax.jit
    def step_fn(params, rest, opt_state, batch, step, base_key):
        key = jax.random.fold_in(base_key, step)
        objective = lambda p: loss_fn(nnx.merge(graphdef, p, rest), batch, key)
        (loss, metrics), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, new_opt = tx.update(grads, opt_state, params)
        new_params = jax.tree.map(lambda p, u: p + u, params, updates)
        gnorm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads)))
        finite = jnp.isfinite(loss) & jnp.isfinite(gnorm)
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)
        return keep(new_params, params), keep(new_opt, opt_state), loss, metrics, finite

    return step_fn


def _plain_embed(self, tokens):
    return self.embed(tokens)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--pe", default="learned")
    a = ap.parse_args(argv)
    cfg = TransformerConfig(vocab_size=1000, num_layers=a.layers, d_model=a.d_model, num_heads=4,
                            d_ff=4 * a.d_model, max_len=a.seq, pe=a.pe)
    tx = make_optimizer(TrainConfig())
    rng = np.random.default_rng(0)
    batch = {"tokens": jnp.asarray(rng.integers(0, 1000, (a.batch, a.seq)), jnp.int32),
             "labels": jnp.asarray(rng.integers(0, 2, a.batch), jnp.int32)}
    key = jax.random.key(0)

    model = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(0))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    checked = step_function(graphdef, classification_loss, tx)
    original = Transformer.embed_tokens
    Transformer.embed_tokens = _plain_embed  # traced once below, then restored
    try:
        bare = _bare_step(graphdef, classification_loss, tx)
        state_b = (params, tx.init(params))
        jax.block_until_ready(bare(*state_b[:1], rest, state_b[1], batch, jnp.int32(0), key))
    finally:
        Transformer.embed_tokens = original
    state_c = (params, tx.init(params))
    ok = jnp.asarray(True)
    jax.block_until_ready(checked(state_c[0], rest, state_c[1], batch, jnp.int32(0), key, ok))

    def time_round(fn, extra):
        p, o = params, tx.init(params)
        t0 = time.perf_counter()
        for s in range(a.steps):
            out = fn(p, rest, o, batch, jnp.int32(s), key, *extra)
            p, o = out[0], out[1]
        jax.block_until_ready(p)
        return (time.perf_counter() - t0) / a.steps

    times = {"checked": [], "bare": []}
    for _ in range(a.rounds):
        times["bare"].append(time_round(bare, ()))
        times["checked"].append(time_round(checked, (ok,)))
    best = {k: min(v) for k, v in times.items()}
    print(f"device {jax.devices()[0].platform}; batch {a.batch} x seq {a.seq}, d_model "
          f"{a.d_model}, layers {a.layers}, pe {a.pe}; best of {a.rounds} rounds of {a.steps}")
    for k in ("bare", "checked"):
        print(f"  {k:8s} {1e3 * best[k]:8.2f} ms/step   (median "
              f"{1e3 * float(np.median(times[k])):.2f})")
    print(f"  ratio checked / bare = {best['checked'] / best['bare']:.3f}")


if __name__ == "__main__":
    main()
