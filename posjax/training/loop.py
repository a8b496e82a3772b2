"""One small training loop shared by every experiment.

``train(model, loss_fn, batches, config, out_dir=...)`` runs jitted optimiser steps on an NNX
model, logs JSON lines, shows a progress bar, checkpoints with orbax, resumes from the latest
valid checkpoint of the same run, saves on SIGTERM/Ctrl-C, and stops on a non-finite loss or an
out-of-range input (token id, table position, label), keeping the exact state after the last
good step. See ``docs/reliability.md`` for what is guaranteed.

In a multi-process (multi-host) run every process calls ``train`` with the same arguments: all of
them take part in the steps and in the orbax checkpoints (each writes its own shards), while only
process 0 writes ``metrics.jsonl`` and ``config.json`` and shows the progress bar.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.input_checks import collect, first_error, rows_valid, stack_rows
from posjax.training.config import TrainConfig, make_optimizer, make_schedule, pe_phase
from posjax.training.driver import RESUME_MODES, check_resume_mode, drive, open_run  # noqa: F401
from posjax.training.run_dir import run_record
from posjax.training.step_cache import BoundedCache

LossFn = Callable[[nnx.Module, Any, jax.Array], tuple[jax.Array, Mapping[str, jax.Array]]]


class TrainingDiverged(FloatingPointError):
    """Raised when the loss becomes NaN or Inf; the last good checkpoint is kept."""


class InvalidBatch(ValueError):
    """Raised when a batch holds an out-of-range token id, position or label; the message names
    the value, the limit and the step (``token id 99 >= vocab_size 16 in batch at step 2``)."""



@dataclasses.dataclass
class TrainResult:
    """What :func:`train` returns: the final step, the last logged metrics, the eval history."""

    step: int
    metrics: dict[str, float]
    evals: list[dict[str, float]]
    resumed_from: int | None
    seconds: float


def member_step(graphdef, loss_fn: LossFn, tx, params, rest, opt_state, batch, key):
    """The step body of one model, shared by :func:`step_function` and the ensemble step
    (:func:`posjax.training.ensemble_step_function`, which maps it over members).

    Args:
      graphdef, params, rest: the model as ``nnx.split(model, nnx.Param, ...)``.
      loss_fn: ``(model, batch, key) -> (scalar loss, metrics)``.
      tx: the optax optimiser; ``opt_state`` its state for ``params``.
      batch: the step's batch; ``key``: its dropout key.

    Returns:
      ``(new_params, new_opt_state, loss, metrics, finite, checks)``: the candidate update
      (``params + tx.update(grads)``), ``finite`` (scalar bool: loss and gradient norm are
      finite) and the input-range rows ``checks [n, 4]`` (:func:`posjax.input_checks.check_range`)
      recorded by the loss. Whether to apply the update is the caller's decision.
    """
    def objective(p):
        with collect() as rows:
            loss, metrics = loss_fn(nnx.merge(graphdef, p, rest), batch, key)
        return loss, (metrics, stack_rows(rows))

    (loss, (metrics, checks)), grads = jax.value_and_grad(objective, has_aux=True)(params)
    updates, new_opt = tx.update(grads, opt_state, params)
    new_params = jax.tree.map(lambda p, u: p + u, params, updates)
    gnorm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree.leaves(grads)))
    return new_params, new_opt, loss, metrics, jnp.isfinite(loss) & jnp.isfinite(gnorm), checks


def step_function(graphdef, loss_fn: LossFn, tx):
    """The jitted step ``(params, rest, opt_state, batch, step, base_key, ok=True) -> (params,
    opt_state, loss, metrics, applied, checks)``.

    The dropout key of a step is ``fold_in(base_key, step)``. The update is applied only when
    ``ok`` (every earlier step of this stretch was applied), the loss and gradient are finite and
    every range check of the inputs passed (``checks``: the ``[n, 4]`` rows of
    :func:`posjax.input_checks.check_range`); otherwise params and optimiser state come back
    unchanged and ``applied`` is False. Chaining ``ok = applied`` from step to step therefore
    freezes the state at the last good step, even when the host looks at ``applied`` only at
    the next log boundary.
    """

    @jax.jit
    def step_fn(params, rest, opt_state, batch, step, base_key, ok=True):
        key = jax.random.fold_in(base_key, step)
        new_params, new_opt, loss, metrics, finite, checks = member_step(
            graphdef, loss_fn, tx, params, rest, opt_state, batch, key)
        applied = ok & finite & rows_valid(checks)
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(applied, a, b), new, old)
        return keep(new_params, params), keep(new_opt, opt_state), loss, metrics, applied, checks

    return step_fn


def make_train_step(graphdef, loss_fn: LossFn, tx, seed: int):
    """The jitted step ``(params, rest, opt_state, batch, step) -> (params, opt_state, loss,
    metrics, applied)`` with dropout keys ``fold_in(key(seed), step)`` (see
    :func:`step_function`; ``applied`` is False for a non-finite loss or an out-of-range
    input, whose update is skipped)."""
    step_fn, base = step_function(graphdef, loss_fn, tx), jax.random.key(seed)

    def step(params, rest, opt_state, batch, step):
        return step_fn(params, rest, opt_state, batch, step, base)[:5]

    return step


# Steps shared by train() calls: an exact hit (same graph definition, loss and optimiser settings)
# reuses the step object; otherwise the step is traced and shares the executable of any earlier
# step with the same program (posjax.training.step_cache), so models that differ only in their
# initialisation (seed, init scale, table values) compile once.
_STEP_CACHE = BoundedCache(64)


def _cached_step(graphdef, loss_fn: LossFn, config: TrainConfig):
    from posjax.training.step_cache import StructuralStep

    optim = dataclasses.replace(config, seed=0, log_every=1, eval_every=0, checkpoint_every=0,
                                keep_checkpoints=1, progress=False, random_positions=None,
                                pe_schedule=None)
    build = lambda: StructuralStep(step_function(graphdef, loss_fn, make_optimizer(optim)))
    # an unhashable key (static attribute) is built afresh: the structural cache still shares
    return _STEP_CACHE.get((graphdef, loss_fn, optim), build)


# The steps of mesh runs, their new state pinned to the placed shardings (see _pinned_step).
_PINNED = BoundedCache(64)


def _pinned_step(step_fn, params: Any, opt_state: Any, ok_sharding: Any = None):
    """``step_fn`` whose new params and optimiser state keep the shardings of ``params`` and
    ``opt_state``. Left to itself the partitioner may return some leaves in another layout (a
    replicated leaf split over ``"model"``, say), so that the second step, fed those outputs,
    would compile the step a second time; pinned, every step runs one executable. The
    ``applied`` flag fed back as the next step's ``ok`` is pinned to ``ok_sharding`` (the
    sharding of the first ``ok``) for the same reason."""
    shardings = (jax.tree.map(lambda x: x.sharding, params),
                 jax.tree.map(lambda x: x.sharding, opt_state))
    key = (step_fn, jax.tree.structure(shardings), tuple(jax.tree.leaves(shardings)), ok_sharding)
    return _PINNED.get(key, lambda: jax.jit(
        step_fn, out_shardings=(*shardings, None, None, ok_sharding, None)))


def train(model: nnx.Module, loss_fn: LossFn, batches: Callable[[int], Any], config: TrainConfig,
          *, out_dir: str | None = None, eval_fn: Callable[[nnx.Module], Mapping[str, float]] | None = None,
          run_config: Mapping[str, Any] | None = None, desc: str = "train",
          mesh: jax.sharding.Mesh | None = None, resume: str = "auto") -> TrainResult:
    """Train ``model`` in place.

    Args:
      model: an NNX module; its ``nnx.Param`` variables are trained, other state is kept fixed.
      loss_fn: ``(model, batch, key) -> (scalar loss, dict of scalar metrics)``; ``key`` is a
        per-step PRNG key (``jax.random.fold_in(key(seed), step)``) for dropout.
      batches: ``step -> batch`` (a pytree of arrays); must be deterministic in ``step`` for
        bit-identical resumption (see :class:`posjax.training.ArrayBatches`).
      config: the :class:`TrainConfig`.
      out_dir: where ``metrics.jsonl``, ``config.json`` and ``checkpoints/`` go; locked for the
        duration of the run (``train.lock``).
      eval_fn: ``model -> metrics`` run every ``eval_every`` steps and at the end.
      run_config: extra configuration recorded in ``config.json`` (data options, ...). The
        model's own configuration, PE options and variable shapes are always recorded.
      desc: progress-bar label.
      mesh: optional ``("data", "model")`` mesh (:func:`posjax.distributed.make_mesh`): the
        state is placed with :func:`posjax.distributed.place_state` (replicated, or split
        tensor-parallel over ``"model"``) and every batch is split over ``"data"`` by
        :func:`posjax.distributed.shard_batch` (``batches(step)`` returns the global batch).
        None (default): the default device, unchanged behaviour. On resumption the checkpoint
        is restored straight into the placed state, each leaf with its sharding.
      resume: "auto" (resume from the latest valid checkpoint of the same run, start fresh in a
        new ``out_dir``), "must" (resume or raise) or "never" (``out_dir`` must hold no run).

    Returns:
      A :class:`TrainResult`.

    Raises:
      TrainingDiverged: a non-finite loss or gradient; the state after the last finite step is
        kept in memory and saved under that step's number.
      InvalidBatch: an out-of-range token id, position or label (named with its step); the state
        after the last good step is kept and saved the same way.
      ValueError: ``out_dir`` holds another run (the differing fields are named), or a log
        without checkpoints, or contradicts ``resume``.
      posjax.training.run_dir.RunDirLocked: another process is training in ``out_dir``.
      KeyboardInterrupt: on SIGTERM/Ctrl-C, after saving a checkpoint.
    """
    from posjax.distributed.mesh import is_main_process

    check_resume_mode(resume, out_dir)
    return _train(model, loss_fn, batches, config, out_dir=out_dir, eval_fn=eval_fn,
                  run_config=run_config, desc=desc, mesh=mesh, resume=resume,
                  main=is_main_process())


def _check_pe_schedule_start(model, config) -> None:
    """The model passed to ``train`` carries the first phase's PE (so the run record, made from
    it, is the same whichever phase a resumed run starts in)."""
    first = config.pe_schedule[0]
    cfg = getattr(model, "config", None)
    have = (getattr(cfg, "pe", None), dict(getattr(cfg, "pe_options", None) or {}))
    if have != (first[1], first[2]):
        raise ValueError(f"TrainConfig.pe_schedule starts with PE {first[1]!r} "
                         f"{first[2] or ''} but the model has {have[0]!r} {have[1] or ''}; build "
                         "the model with the first phase's PE")


def _with_positions(batches, config):
    """``batches`` whose batches get ``positions`` from :func:`randomized_positions`."""
    from posjax.training.positions import randomized_positions

    def get(s):
        batch = batches(s)
        if not isinstance(batch, dict) or "tokens" not in batch:
            raise ValueError("TrainConfig.random_positions needs dict batches with 'tokens'")
        if batch.get("segment_ids") is not None:
            raise ValueError("TrainConfig.random_positions does not apply to packed rows "
                             "(segment_ids): their positions restart at every segment")
        b, t = jnp.shape(batch["tokens"])[:2]
        return {**batch, "positions": randomized_positions(b, t, config.random_positions,
                                                           seed=config.seed, step=s)}

    return get


def _train(model, loss_fn, batches, config, *, out_dir, eval_fn, run_config, desc, mesh, resume,
           main):
    from posjax.training.positions import check_position_range

    if config.pe_schedule is not None:
        if mesh is not None:
            raise ValueError("TrainConfig.pe_schedule is not supported with a mesh")
        _check_pe_schedule_start(model, config)
    if config.random_positions is not None:
        check_position_range(model, config.random_positions)
        batches = _with_positions(batches, config)
    record = run_record(config, model, run_config)  # the model as passed (first phase's PE)
    tx = make_optimizer(config)
    schedule = make_schedule(config)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    opt_state = tx.init(params)
    step_fn = _cached_step(graphdef, loss_fn, config)
    base_key = jax.random.key(config.seed)
    phase = 0

    def enter_phase(index: int, current) -> None:
        """Rebuild the model's PE for phase ``index``; the parameters carry over."""
        nonlocal graphdef, rest, step_fn, phase
        from posjax.models.pe_swap import replace_pe

        nnx.update(model, current)
        _, name, options = config.pe_schedule[index]
        replace_pe(model, name, options, seed=config.seed)
        if config.random_positions is not None:
            check_position_range(model, config.random_positions)
        graphdef, new_params, rest = nnx.split(model, nnx.Param, ...)
        if jax.tree.structure(new_params) != jax.tree.structure(current):
            raise ValueError(f"TrainConfig.pe_schedule phase {index} (PE {name!r}) changes the "
                             "model's parameters; every phase must have the same ones (e.g. "
                             "parameter-free PEs: rope, none, alibi, ...)")
        step_fn = _cached_step(graphdef, loss_fn, config)
        phase = index

    if mesh is not None:  # placed before a restore, which then keeps each leaf's sharding
        from posjax.distributed.training import place_state, shard_batch
        params, opt_state, rest = place_state(mesh, params, opt_state, rest)
        ok_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        step_fn = _pinned_step(step_fn, params, opt_state, ok_sharding)

    opened = open_run(out_dir, lambda: record, (params, opt_state),
                      resume=resume, keep=config.keep_checkpoints, main=main)
    with opened as (run, (params, opt_state)):
        evals: list[dict[str, float]] = []
        last: dict[str, float] = {k: float(v) for k, v in (run.last_row or {}).items()
                                  if k not in ("step", "lr", "time")}  # a resumed run's
        pending: list[tuple[int, jax.Array, Any, jax.Array, jax.Array]] = []
        t0 = time.perf_counter()
        good_step = run.start
        ok = jnp.asarray(True) if mesh is None else jax.device_put(jnp.asarray(True), ok_sharding)

        if pe_phase(config, run.start) != phase:  # resumed mid-schedule
            enter_phase(pe_phase(config, run.start), params)

        def step(s: int) -> None:
            nonlocal params, opt_state, ok
            if pe_phase(config, s) != phase:
                enter_phase(pe_phase(config, s), params)
            batch = (jax.tree.map(jnp.asarray, batches(s)) if mesh is None
                     else shard_batch(batches(s), mesh))
            params, opt_state, loss, metrics, ok, checks = step_fn(
                params, rest, opt_state, batch, jnp.asarray(s, jnp.int32), base_key, ok)
            pending.append((s, loss, metrics, ok, checks))

        def save(s: int) -> None:
            run.save(s, (params, opt_state))

        def publish() -> None:
            nnx.update(model, params)

        def evaluate(s: int) -> None:
            if eval_fn is None:
                return
            publish()
            row = {"step": s, **{f"eval/{k}": float(v) for k, v in eval_fn(model).items()}}
            evals.append(row)
            run.write(row)

        def flush(bar) -> None:
            nonlocal last, good_step
            for s, loss, metrics, applied, checks in pending:
                if not bool(applied):
                    # steps after the first refused one were refused too (``ok`` chain): params
                    # and opt_state hold the state after `good_step` steps
                    save(good_step)
                    pending.clear()
                    error = first_error(checks)
                    if error is not None:
                        raise InvalidBatch(f"{error} in batch at step {s}: training "
                                           f"stopped{run.where(good_step)}")
                    raise TrainingDiverged(f"non-finite loss ({float(loss)}) at step {s}: "
                                           f"training stopped{run.where(good_step)}")
                good_step = s + 1
            if pending:
                s, loss, metrics, _, _ = pending[-1]
                last = {"loss": float(loss), **{k: float(v) for k, v in metrics.items()}}
                run.write({"step": s + 1, "lr": float(schedule(s)), **last,
                           "time": round(time.perf_counter() - t0, 3)})
                bar.set_postfix(loss=f"{last['loss']:.4f}")
            pending.clear()

        final = drive(run, config, step=step, flush=flush, save=save, evaluate=evaluate,
                      publish=publish, halts=(TrainingDiverged, InvalidBatch), desc=desc,
                      main=main)
    return TrainResult(step=final, metrics=last, evals=evals, resumed_from=run.resumed,
                       seconds=time.perf_counter() - t0)
