"""Ensemble training vs sequential runs: M seeds of the Latin-square model.

    python -m benchmarks.ensemble [--quick] [--out DIR] [--members M] [--steps S]

Trains M seeds of the ``init_sweep`` quick model (learned PE, σ = 0.2, 2 layers, d = 32) for S
steps twice in one process: as one :func:`posjax.training.train_ensemble` (one vmapped step) and
as M sequential :func:`posjax.training.train` calls (same per-seed data order, dropout keys and
hyper-parameters). Both paths are warmed up first (a short run of each compiles its step; the
structural step cache then serves every seed), so the timings compare steady-state training only.

Writes ``DIR/ensemble.json``: ``{"model", "members", "steps", "sequential_s", "ensemble_s",
"speedup", "max_param_diff", "max_param_diff_all", "strategy", "other_strategy", ...}``:
``ensemble_s`` uses ``train_ensemble``'s default for the backend (``jax.lax.map`` over members on
CPU, ``jax.vmap`` on accelerators); ``other_strategy`` times the other one. ``max_param_diff`` is the largest
absolute difference between a member's parameters and its sequential twin, over every parameter
except the attention key biases; ``max_param_diff_all`` includes them. (Softmax is invariant to
the key bias, so its true gradient is 0; Adam normalises the rounding noise of that 0, which
differs between a batched and an unbatched program, into steps of size ~lr.)

``profile`` explains the ratio: the compute of one ``train`` step and of one ensemble step per
strategy (each step called directly and waited for), the FLOPs of one member's step, ``train``'s
per-step time inside its loop (``sequential_s / (members * steps)``), the host overhead that
leaves (loop minus compute), ``compute_ratio`` (one ``train`` step's compute over the best
ensemble compute per member: what running the members together saves in compute) and
``speedup_bound``: the loop's per-step time over the best ensemble compute per member, the most
the ensemble can reach. The profile runs after the timed runs, so on a shared machine its load
(``profile.load_average``) may differ from theirs (``load_average``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np


def _params(model, *, all_params: bool) -> list[np.ndarray]:
    import jax
    from flax import nnx

    leaves = jax.tree_util.tree_leaves_with_path(nnx.state(model, nnx.Param))
    return [np.asarray(x) for path, x in leaves
            if all_params or "['key']['bias']" not in jax.tree_util.keystr(path)]


def _blocking_ms(fn, repeats: int) -> float:
    """Median wall time (ms) of ``fn()`` waited to completion, after two warm-up calls."""
    import jax

    jax.block_until_ready(fn())
    jax.block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e3)


def profile(make, loss, batches, base, seeds, repeats: int = 20) -> dict:
    """Per-step compute of one ``train`` step and of one ensemble step (each strategy), timed
    with the step called directly and waited for, and the step's FLOPs (XLA cost analysis).

    Every number is per step (``*_per_member_ms``: divided by the member count). What the
    ensemble can gain over sequential runs is bounded by ``train``'s per-step time in its loop
    divided by the ensemble's compute per member (``speedup_bound``, filled in by :func:`run`).
    """
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from posjax.training.config import make_optimizer
    from posjax.training import ensemble_step_function, stack_members, step_function

    tx = make_optimizer(base)
    splits = [nnx.split(make({"seed": s}), nnx.Param, ...) for s in seeds]
    graphdef, params, rest = splits[0]
    opt = tx.init(params)
    single = step_function(graphdef, loss, tx)
    batch = jax.tree.map(jnp.asarray, batches[0](0))
    args = (params, rest, opt, batch, jnp.asarray(0, jnp.int32), jax.random.key(seeds[0]), True)
    cost = single.lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    out = {"train_step_ms": _blocking_ms(lambda: single(*args), repeats),
           "flops_per_member_step": float(cost.get("flops", float("nan"))),
           "bytes_per_member_step": float(cost.get("bytes accessed", float("nan")))}
    m = len(seeds)
    stacked = (stack_members([p for _, p, _ in splits]),
               stack_members([r for _, _, r in splits]),
               stack_members([tx.init(p) for _, p, _ in splits]), jnp.ones(m, bool),
               jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs)), *[b(0) for b in batches]),
               jnp.asarray(0, jnp.int32),
               jnp.stack([jax.random.key_data(jax.random.key(s)) for s in seeds]),
               jnp.full(m, base.learning_rate, jnp.float32),
               jnp.full(m, base.weight_decay, jnp.float32), True)
    for name, vectorize in (("lax.map", False), ("vmap", True)):
        step = ensemble_step_function(graphdef, loss, base, 0, vectorize)
        ms = _blocking_ms(lambda: step(*stacked), max(repeats // 4, 3))
        out[f"ensemble_step_ms[{name}]"] = ms
        out[f"ensemble_per_member_ms[{name}]"] = ms / m
    out["train_gflops_per_s"] = out["flops_per_member_step"] / out["train_step_ms"] / 1e6
    out["load_average"] = list(os.getloadavg())
    return out


def run(members: int, steps: int, sigma: float = 0.2) -> dict:
    import jax

    from experiments import init_sweep
    from posjax.data.latin_square import LSTOptions, make_splits
    from posjax.training import ArrayBatches, TrainConfig, train, train_ensemble

    cfg = init_sweep.PRESETS["quick"]
    label = f"learned_s{sigma:g}"
    seeds = [1000 + i for i in range(members)]
    data = init_sweep.model_arrays(make_splits(LSTOptions(n_per_condition=cfg.n_per_condition),
                                               seed=cfg.data_seed)["train"])
    loss = init_sweep.make_loss(cfg.readout)
    make = lambda m: init_sweep.build_model(label, cfg, m["seed"])
    base = TrainConfig(steps=steps, batch_size=cfg.train.batch_size,
                       optimizer=cfg.train.optimizer, learning_rate=cfg.train.learning_rate,
                       log_every=max(steps // 4, 1), progress=False)
    ms = [{"seed": s} for s in seeds]

    def ensemble(n_steps, vectorize=None):
        return train_ensemble(make, loss, [ArrayBatches(data, cfg.train.batch_size, seed=s)
                                           for s in seeds], base.replace(steps=n_steps), members=ms,
                              vectorize=vectorize)

    def sequential(n_steps):
        models = []
        for s in seeds:
            model = make({"seed": s})
            train(model, loss, ArrayBatches(data, cfg.train.batch_size, seed=s),
                  base.replace(steps=n_steps, seed=s))
            models.append(model)
        return models

    auto = jax.default_backend() != "cpu"  # train_ensemble's default strategy
    t0 = time.perf_counter()
    ensemble(2)
    ensemble(2, vectorize=not auto)
    sequential(2)
    warm_s = time.perf_counter() - t0
    load_start = list(os.getloadavg())
    t0 = time.perf_counter()
    seq_models = sequential(steps)
    seq_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ens = ensemble(steps)
    ens_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ensemble(steps, vectorize=not auto)
    other_s = time.perf_counter() - t0

    load_timed = list(os.getloadavg())
    prof = profile(make, loss, [ArrayBatches(data, cfg.train.batch_size, seed=s) for s in seeds], base,
                   seeds)
    loop_ms = seq_s / (members * steps) * 1e3
    best = min(v for k, v in prof.items() if k.startswith("ensemble_per_member_ms"))
    prof.update({"train_loop_step_ms": loop_ms,
                 "train_host_overhead_ms": loop_ms - prof["train_step_ms"],
                 "compute_ratio": prof["train_step_ms"] / best, "speedup_bound": loop_ms / best})
    prof = {k: round(v, 4) if isinstance(v, float) and v < 1e6 else v for k, v in prof.items()}

    def max_diff(all_params):
        return max(float(np.abs(a - b).max()) for em, sm in zip(ens.models, seq_models)
                   for a, b in zip(_params(em, all_params=all_params),
                                   _params(sm, all_params=all_params)))

    return {"model": f"init_sweep quick ({label}, d={cfg.model.d_model}, "
                     f"{cfg.model.num_layers} layers, "
                     f"batch {cfg.train.batch_size})",
            "members": members, "steps": steps, "sequential_s": round(seq_s, 3),
            "ensemble_s": round(ens_s, 3), "speedup": round(seq_s / ens_s, 3),
            "max_param_diff": max_diff(False), "max_param_diff_all": max_diff(True),
            "strategy": "vmap" if auto else "lax.map",
            "other_strategy": {"strategy": "lax.map" if auto else "vmap",
                               "ensemble_s": round(other_s, 3),
                               "speedup": round(seq_s / other_s, 3)},
            "profile": prof, "warmup_s": round(warm_s, 3), "backend": jax.default_backend(),
            "device": str(jax.devices()[0].device_kind), "cpus": os.cpu_count(),
            "load_average": {"before_timing": load_start, "after_timing": load_timed},
            "python": platform.python_version(),
            "jax": jax.__version__}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="100 steps instead of 300")
    p.add_argument("--out", default="runs/bench", help="output directory (default: %(default)s)")
    p.add_argument("--members", type=int, default=8, help="seeds (default: %(default)s)")
    p.add_argument("--steps", type=int, default=None, help="steps per member (overrides --quick)")
    args = p.parse_args(argv)
    if args.members < 1:
        raise SystemExit(f"error: --members must be >= 1, got {args.members}")
    steps = args.steps or (100 if args.quick else 300)
    if steps < 1:
        raise SystemExit(f"error: --steps must be >= 1, got {steps}")
    result = run(args.members, steps)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ensemble.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
