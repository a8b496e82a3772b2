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
    base = TrainConfig(steps=steps, batch_size=cfg.batch_size, optimizer=cfg.optimizer,
                       learning_rate=cfg.learning_rate, log_every=max(steps // 4, 1),
                       progress=False)
    ms = [{"seed": s} for s in seeds]

    def ensemble(n_steps, vectorize=None):
        return train_ensemble(make, loss, [ArrayBatches(data, cfg.batch_size, seed=s)
                                           for s in seeds], base.replace(steps=n_steps), members=ms,
                              vectorize=vectorize)

    def sequential(n_steps):
        models = []
        for s in seeds:
            model = make({"seed": s})
            train(model, loss, ArrayBatches(data, cfg.batch_size, seed=s),
                  base.replace(steps=n_steps, seed=s))
            models.append(model)
        return models

    auto = jax.default_backend() != "cpu"  # train_ensemble's default strategy
    t0 = time.perf_counter()
    ensemble(2)
    ensemble(2, vectorize=not auto)
    sequential(2)
    warm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    seq_models = sequential(steps)
    seq_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ens = ensemble(steps)
    ens_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    ensemble(steps, vectorize=not auto)
    other_s = time.perf_counter() - t0

    def max_diff(all_params):
        return max(float(np.abs(a - b).max()) for em, sm in zip(ens.models, seq_models)
                   for a, b in zip(_params(em, all_params=all_params),
                                   _params(sm, all_params=all_params)))

    return {"model": f"init_sweep quick ({label}, d={cfg.d_model}, {cfg.num_layers} layers, "
                     f"batch {cfg.batch_size})",
            "members": members, "steps": steps, "sequential_s": round(seq_s, 3),
            "ensemble_s": round(ens_s, 3), "speedup": round(seq_s / ens_s, 3),
            "max_param_diff": max_diff(False), "max_param_diff_all": max_diff(True),
            "strategy": "vmap" if auto else "lax.map",
            "other_strategy": {"strategy": "lax.map" if auto else "vmap",
                               "ensemble_s": round(other_s, 3),
                               "speedup": round(seq_s / other_s, 3)},
            "warmup_s": round(warm_s, 3), "backend": jax.default_backend(),
            "device": str(jax.devices()[0].device_kind), "cpus": os.cpu_count(),
            "load_average": list(os.getloadavg()), "python": platform.python_version(),
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
