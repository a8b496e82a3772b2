"""Many small models trained at once: one jitted step over parameters stacked on a leading axis.

``train_ensemble(make_model, loss_fn, batches, config, members=[...])`` builds one model per
member, stacks their state (parameters, fixed variables, optimiser state) along a new leading
"member" axis and runs the :func:`posjax.training.train` step over it (``jax.vmap``, or
``jax.lax.map`` on CPU) inside one jitted step, so M seeds of one cell cost one compiled program
and one dispatch per step instead of M.

Members may differ in anything that leaves the program unchanged: initialisation (seed, init
scale, table values), data order (one ``batches`` per member) and the scalar hyper-parameters
``seed`` (dropout keys), ``learning_rate`` and ``weight_decay``, which enter the step as traced
per-member scalars. Each member follows exactly the updates it would get from ``train`` alone.

A member whose loss or gradient becomes NaN/Inf is frozen at its last good parameters and reported
in :attr:`EnsembleResult.diverged`; the others go on. Checkpoints, resumption (bit-identical),
the run record, the ``out_dir`` lock, the resume modes, the log rewind, the verified checkpoints
and the SIGTERM handling are those of :func:`posjax.training.train` (one shared driver,
:mod:`posjax.training.driver`). An out-of-range input stops the whole ensemble with
``InvalidBatch`` at its last good step instead of freezing a member.
"""
from __future__ import annotations

import dataclasses
import json
import time
import types
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax._json import jsonable
from posjax.input_checks import first_error, rows_valid
from posjax.training.config import TrainConfig, make_optimizer, make_schedule
from posjax.training.driver import check_resume_mode, drive, open_run
from posjax.training.loop import InvalidBatch, LossFn, member_step
from posjax.training.run_dir import run_record
from posjax.training.step_cache import BoundedCache, StructuralStep, program_key

#: member keys that set a per-member training hyper-parameter (all others go to ``make_model``)
MEMBER_HYPERPARAMETERS = ("seed", "learning_rate", "weight_decay")


@dataclasses.dataclass
class EnsembleResult:
    """What :func:`train_ensemble` returns.

    Attributes:
      step: the final step.
      members: the member dicts, in order.
      models: the trained models (member ``i``'s final parameters, or its last good ones when it
        diverged).
      metrics: per member, the last logged metrics (``loss`` and the loss function's metrics).
      diverged: member index -> first step whose loss or gradient was not finite.
      evals: per member, its rows of ``eval_fn`` results.
      resumed_from: the checkpoint step the run resumed from (None: fresh run).
      seconds: wall time of the loop.
    """

    step: int
    members: list[dict[str, Any]]
    models: list[nnx.Module]
    metrics: list[dict[str, float]]
    diverged: dict[int, int]
    evals: list[list[dict[str, float]]]
    resumed_from: int | None
    seconds: float


def _member_config(config: TrainConfig, member: Mapping[str, Any], index: int = 0
                   ) -> TrainConfig:
    """``config`` with the member's hyper-parameters (validated by :class:`TrainConfig`)."""
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    fixed = sorted(k for k in member if k in fields and k not in MEMBER_HYPERPARAMETERS)
    if fixed:
        raise ValueError(f"member {dict(member)} sets {fixed}: only {MEMBER_HYPERPARAMETERS} may "
                         "differ between ensemble members (others change the compiled program)")
    try:
        return config.replace(**{k: member[k] for k in MEMBER_HYPERPARAMETERS if k in member})
    except ValueError as e:
        raise ValueError(f"ensemble member {index} ({dict(member)}): {e}") from None


class _ReadKeys(dict):
    """A member dict that records which keys ``make_model`` reads (iterating it counts as
    reading every key)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read: set = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.read.add(key)
        return super().__contains__(key)

    def _all(self, view):
        self.read.update(super().keys())
        return view()

    def __iter__(self):
        return self._all(super().__iter__)

    def keys(self):
        return self._all(super().keys)

    def items(self):
        return self._all(super().items)

    def values(self):
        return self._all(super().values)


def _build_members(make_model: Callable, members: Sequence[dict]) -> list:
    """``make_model`` of every member; a key that is neither a hyper-parameter
    (``MEMBER_HYPERPARAMETERS``) nor read by ``make_model`` for any member is refused (a typo
    such as ``lr`` would otherwise be recorded but have no effect)."""
    models, read = [], set(MEMBER_HYPERPARAMETERS)
    for m in members:
        tracked = _ReadKeys(m)
        models.append(make_model(tracked))
        read |= tracked.read
    unused = sorted({k for m in members for k in m} - read, key=str)
    if unused:
        raise ValueError(f"ensemble member keys {unused} are never read by make_model and are "
                         f"not training hyper-parameters {MEMBER_HYPERPARAMETERS}")
    return models


def _traced_config(config: TrainConfig, learning_rate: jax.Array, weight_decay: jax.Array):
    """A stand-in for ``config`` whose learning rate and weight decay are traced scalars, read
    by :func:`make_optimizer` like a :class:`TrainConfig`."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    values.update(learning_rate=learning_rate, weight_decay=weight_decay, warmup=config.warmup)
    return types.SimpleNamespace(**values)


def _over_members(fn: Callable, in_axes: tuple, vectorize: bool) -> Callable:
    """``fn`` applied to every member: ``jax.vmap`` (one batched program), or ``jax.lax.map``
    (the members one after another inside one compiled program; faster on XLA:CPU, where a
    small model's step is bound by its kernels, so batching saves no compute per member, and
    the batched activations of many members fall out of the cache, see ``docs/ensembles.md``)."""
    if vectorize:
        return jax.vmap(fn, in_axes=in_axes)
    mapped = [i for i, ax in enumerate(in_axes) if ax == 0]

    def over(*args):
        def one(xs):
            full = list(args)
            for i, x in zip(mapped, xs):
                full[i] = x
            return fn(*full)

        return jax.lax.map(one, tuple(args[i] for i in mapped))

    return over


def ensemble_step_function(graphdef, loss_fn: LossFn, config: TrainConfig,
                           batch_axis: int | None, vectorize: bool,
                           mesh: jax.sharding.Mesh | None = None):
    """The jitted step over stacked state ``(params, rest, opt_state, alive, batch, step, keys,
    learning_rates, weight_decays, ok=True) -> (params, opt_state, alive, loss, metrics, applied,
    checks)``: the step of :func:`posjax.training.train` per member, with the member frozen
    (state kept, ``alive`` False from then on) at its first non-finite loss or gradient.

    ``checks`` holds each member's input-range rows (``[members, n, 4]``, see
    :func:`posjax.input_checks.check_range`). An out-of-range input in any member's batch is a
    data error, not a divergence: the whole step is refused (every member's state and ``alive``
    kept) and ``applied`` is False; chaining ``ok = applied`` freezes the ensemble at its last
    good step, as :func:`posjax.training.train` does.

    With a ``mesh``, the members are split over its ``"data"`` axis (``jax.shard_map``): each
    device runs its own members with the chosen strategy, and the per-member batches are split
    the same way (a shared batch is replicated); other mesh axes hold replicas.
    """

    def member(params, rest, opt_state, alive, batch, step, key_data, lr, wd):
        key = jax.random.fold_in(jax.random.wrap_key_data(key_data), step)
        tx = make_optimizer(_traced_config(config, lr, wd))
        new_params, new_opt, loss, metrics, finite, checks = member_step(
            graphdef, loss_fn, tx, params, rest, opt_state, batch, key)
        ok = alive & finite
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, old)
        return keep(new_params, params), keep(new_opt, opt_state), ok, loss, metrics, checks

    in_axes = (0, 0, 0, 0, batch_axis, None, 0, 0, 0)
    over = _over_members(member, in_axes, vectorize)
    if mesh is not None:
        from jax.sharding import PartitionSpec

        split = PartitionSpec("data")
        specs = tuple(PartitionSpec() if ax is None else split for ax in in_axes)
        over = jax.shard_map(over, mesh=mesh, in_specs=specs, out_specs=split)

    def step(params, rest, opt_state, alive, batch, step, keys, lrs, wds, ok=True):
        new_params, new_opt, new_alive, loss, metrics, checks = over(
            params, rest, opt_state, alive, batch, step, keys, lrs, wds)
        applied = ok & jax.vmap(rows_valid)(checks).all()
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(applied, a, b), new, old)
        return (*keep((new_params, new_opt, new_alive), (params, opt_state, alive)), loss,
                metrics, applied, checks)

    return jax.jit(step)


_ENSEMBLE_STEPS = BoundedCache(64)


def _cached_ensemble_step(graphdef, loss_fn: LossFn, config: TrainConfig, batch_axis,
                          vectorize: bool, mesh: jax.sharding.Mesh | None = None):
    optim = dataclasses.replace(config, seed=0, log_every=1, eval_every=0, checkpoint_every=0,
                                keep_checkpoints=1, progress=False)
    build = lambda: StructuralStep(ensemble_step_function(graphdef, loss_fn, optim, batch_axis,
                                                  vectorize, mesh))
    return _ENSEMBLE_STEPS.get((graphdef, loss_fn, optim, batch_axis, vectorize, mesh), build)


def _check_same_program(splits, loss_fn: LossFn, batch: Any, members) -> None:
    """Every member must run the program of member 0 (else stacking them would be wrong)."""
    key0 = None
    graphdef0 = splits[0][0]
    for i, (graphdef, params, rest) in enumerate(splits):
        try:
            if i and graphdef == graphdef0:
                continue
        except Exception:  # graph definitions that cannot be compared: trace
            pass
        fn = lambda p, r, b, k, g=graphdef: loss_fn(nnx.merge(g, p, r), b, k)
        key = program_key(fn, params, rest, batch, jax.random.key(0))[0]
        if key0 is None:
            key0 = key
        elif key != key0:
            raise ValueError(f"member {i} ({members[i]}) builds a model whose computation differs "
                             f"from member 0's ({members[0]}): ensemble members may differ only "
                             "in initialisation, data order and scalar hyper-parameters")


def _stack_member_batches(found: Sequence[Any], step: int, members: Sequence[dict]) -> Any:
    """The members' batches of ``step`` stacked on a leading axis; a batch with other keys,
    shapes or dtypes than member 0's is a ValueError naming the member and the field."""
    ref = jax.tree_util.tree_flatten_with_path(found[0])
    for i, batch in enumerate(found[1:], 1):
        leaves, tree = jax.tree_util.tree_flatten_with_path(batch)
        if tree != ref[1]:
            raise ValueError(f"the batch of member {i} ({members[i]}) at step {step} has the "
                             f"fields {tree}, member 0's has {ref[1]}")
        for (path, x), (_, x0) in zip(leaves, ref[0]):
            if np.shape(x) != np.shape(x0):
                raise ValueError(f"the batch of member {i} ({members[i]}) at step {step}: field "
                                 f"{jax.tree_util.keystr(path)} has shape {np.shape(x)}, member "
                                 f"0's {np.shape(x0)} (every member's batch must have one shape)")
    return jax.tree.map(lambda *xs: np.stack(xs), *found)


def stack_members(trees: Sequence[Any]) -> Any:
    """The trees of ``m`` members as one tree whose leaves have a leading member axis ``[m, ...]``
    (the state layout :func:`ensemble_step_function` takes)."""
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


def _member(tree: Any, i: int) -> Any:
    return jax.tree.map(lambda x: x[i], tree)


def train_ensemble(make_model: Callable[[dict[str, Any]], nnx.Module], loss_fn: LossFn,
                   batches: Callable[[int], Any] | Sequence[Callable[[int], Any]],
                   config: TrainConfig, *, members: Sequence[Mapping[str, Any]],
                   out_dir: str | None = None, mesh: jax.sharding.Mesh | None = None,
                   eval_fn: Callable[[nnx.Module], Mapping[str, float]] | None = None,
                   run_config: Mapping[str, Any] | None = None,
                   desc: str = "ensemble", vectorize: bool | None = None,
                   resume: str = "auto") -> EnsembleResult:
    """Train one model per member in a single jitted, vmapped step.

    Args:
      make_model: ``member dict -> nnx.Module``; every member's model must have the same
        structure and computation (checked: a ValueError names the first member that differs).
      loss_fn: ``(model, batch, key) -> (scalar loss, dict of scalar metrics)``, as for ``train``.
      batches: ``step -> batch`` shared by all members, or a sequence with one such function per
        member (data order per member; every member's batch must have the same shapes).
      config: the shared :class:`TrainConfig`; a member's ``seed``, ``learning_rate`` and
        ``weight_decay`` keys override it for that member.
      members: a non-empty list of dicts, e.g. ``[{"seed": 0, "std": 0.1}, ...]``; every key is
        a hyper-parameter above or is read by ``make_model`` (else a ValueError names it).
      out_dir: ``metrics.jsonl`` (one row per log step, lists indexed by member),
        ``config.json`` (the run record of :func:`posjax.training.train` with the ``members``
        list added) and ``checkpoints/``; locked for the duration of the run, resumed from its
        latest valid checkpoint (see ``resume``) with the log rewound to that step.
      mesh: optional mesh (:func:`posjax.distributed.make_mesh`) whose ``"data"`` axis splits
        the members: each device trains ``len(members) / data`` whole members (with the
        ``vectorize`` strategy) on their own batches; a shared ``batches`` is replicated, other
        mesh axes hold replicas. The member count must be a multiple of the ``"data"`` size;
        the mesh's devices must belong to this process. None: the default device.
      eval_fn: ``model -> metrics`` for each member, every ``eval_every`` steps and at the end.
      run_config: extra configuration recorded in ``config.json``.
      desc: progress-bar label.
      vectorize: True: ``jax.vmap`` over members (one batched program; the default on GPU/TPU);
        False: ``jax.lax.map`` over members inside the one compiled step (the default on CPU,
        where the batched step costs as much per member and, with many members, more: its
        activations no longer fit in the cache; measured by ``benchmarks/ensemble.py``, see
        ``docs/ensembles.md``). Both give each member the updates of ``train``.
      resume: "auto", "must" or "never", as for :func:`posjax.training.train`.

    Returns:
      An :class:`EnsembleResult`.

    Raises:
      posjax.training.InvalidBatch: an out-of-range token id, position or label in a member's
        batch (named with the member and step); every member keeps its state after the last
        good step, which is saved under that step's number. Not reported as a divergence.
      ValueError: ``out_dir`` holds another run (the differing fields, members included, are
        named), or a log without checkpoints, or contradicts ``resume``.
      posjax.training.run_dir.RunDirLocked: another process is training in ``out_dir``.
      KeyboardInterrupt: on SIGTERM/Ctrl-C, after saving a checkpoint.
    """
    from posjax.distributed.mesh import is_main_process

    members, configs, per_member = _checked_members(config, members, batches, resume, out_dir)
    get_batch = ((lambda s: _stack_member_batches([b(s) for b in batches], s, members))
                 if per_member else batches)
    models, graphdef, state = _stacked_state(make_model, loss_fn, members, configs,
                                             batches[0] if per_member else batches)
    if vectorize is None:
        vectorize = jax.default_backend() != "cpu"
    state, place_batch, place_scalar = _placed(state, mesh, len(members), per_member)
    step_fn = _cached_ensemble_step(graphdef, loss_fn, config, 0 if per_member else None,
                                    bool(vectorize), mesh)
    main = is_main_process()

    def record() -> dict[str, Any]:
        out = run_record(config, models[0], run_config)
        out["members"] = json.loads(json.dumps(jsonable(members)))
        return out

    opened = open_run(out_dir, record, (state.params, state.opt_state, state.alive,
                                        state.bad_step),
                      resume=resume, keep=config.keep_checkpoints, main=main)
    with opened as (run, (state.params, state.opt_state, state.alive, state.bad_step)):
        loop = _EnsembleLoop(run, step_fn, state, members, models, eval_fn, make_schedule(config),
                             get_batch=lambda s: place_batch(jax.tree.map(jnp.asarray,
                                                                          get_batch(s))),
                             place_scalar=place_scalar)
        final = drive(run, config, step=loop.step, flush=loop.flush, save=loop.save,
                      evaluate=loop.evaluate, publish=loop.publish, halts=(InvalidBatch,),
                      desc=desc, main=main)
    first_bad = loop.first_bad
    diverged = {int(i): int(first_bad[i]) for i in np.flatnonzero(first_bad >= 0)}
    if diverged and main:
        print(f"{desc}: {len(diverged)} of {len(members)} members diverged and were frozen: "
              + ", ".join(f"#{i} {members[i]} at step {s}" for i, s in sorted(diverged.items())),
              flush=True)
    return EnsembleResult(step=final, members=members, models=models, metrics=loop.last,
                          diverged=diverged, evals=loop.evals, resumed_from=run.resumed,
                          seconds=time.perf_counter() - loop.t0)


def _checked_members(config: TrainConfig, members, batches, resume: str, out_dir):
    """The arguments of :func:`train_ensemble` checked: ``(members as dicts, each member's
    TrainConfig, per_member)`` (``per_member``: ``batches`` is one function per member)."""
    check_resume_mode(resume, out_dir)
    for option in ("random_positions", "pe_schedule"):
        if getattr(config, option, None) is not None:
            raise ValueError(f"train_ensemble does not support TrainConfig.{option} (use train "
                             "per member)")
    members = [dict(m) for m in members]
    if not members or not all(isinstance(m, dict) for m in members):
        raise ValueError("train_ensemble needs a non-empty list of member dicts")
    configs = [_member_config(config, m, i) for i, m in enumerate(members)]
    per_member = not callable(batches)
    if per_member and len(batches) != len(members):
        raise ValueError(f"got {len(batches)} batch functions for {len(members)} members")
    return members, configs, per_member


@dataclasses.dataclass
class _StackedState:
    """The ensemble's state, every leaf with a leading member axis ``[m, ...]``: parameters,
    fixed variables, optimiser state, ``alive [m]`` (bool), ``bad_step [m]`` (first non-finite
    step, -1: none), dropout key data ``keys [m, ...]``, learning rates and weight decays
    ``[m]``."""

    params: Any
    rest: Any
    opt_state: Any
    alive: Any
    bad_step: Any
    keys: Any
    lrs: Any
    wds: Any


def _stacked_state(make_model, loss_fn: LossFn, members, configs, first_batches):
    """``(models, graphdef, _StackedState)``: one model per member (checked to run one
    program on the first batch of ``first_batches``), their state stacked."""
    models = _build_members(make_model, members)
    splits = [nnx.split(model, nnx.Param, ...) for model in models]
    _check_same_program(splits, loss_fn, jax.tree.map(jnp.asarray, first_batches(0)), members)
    state = _StackedState(
        params=stack_members([p for _, p, _ in splits]),
        rest=stack_members([r for _, _, r in splits]),
        opt_state=stack_members([make_optimizer(c).init(p)
                                 for c, (_, p, _) in zip(configs, splits)]),
        alive=jnp.ones(len(members), bool),
        bad_step=jnp.full(len(members), -1, jnp.int32),
        keys=jnp.stack([jax.random.key_data(jax.random.key(c.seed)) for c in configs]),
        lrs=jnp.asarray([c.learning_rate for c in configs], jnp.float32),
        wds=jnp.asarray([c.weight_decay for c in configs], jnp.float32))
    return models, splits[0][0], state


def _placed(state: _StackedState, mesh, count: int, per_member: bool):
    """``(state, place_batch, place_scalar)``: with a mesh, the state split over its
    ``"data"`` axis and placers for a step's batch (split per member, else replicated) and
    scalars (replicated); without one, unchanged and identities."""
    if mesh is None:
        return state, (lambda b: b), (lambda x: x)
    from jax.sharding import NamedSharding, PartitionSpec
    if "data" not in mesh.shape:
        raise ValueError(f"the mesh needs a 'data' axis to split the members over, got axes "
                         f"{tuple(mesh.shape)}")
    if any(d.process_index != jax.process_index() for d in mesh.devices.flat):
        raise ValueError("train_ensemble's mesh must hold only this process's devices "
                         "(multi-process ensembles are not supported)")
    size = mesh.shape["data"]
    if count % size:
        raise ValueError(f"{count} members cannot be split over a 'data' axis of size {size}")
    split = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())
    fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    state = _StackedState(**jax.device_put(fields, split))
    return (state, lambda b: jax.device_put(b, split if per_member else replicated),
            lambda x: jax.device_put(x, replicated))


class _EnsembleLoop:
    """The callbacks :func:`posjax.training.driver.drive` runs for an ensemble (``step``,
    ``flush``, ``save``, ``evaluate``, ``publish``) and what they track: per member the last
    logged metrics, the eval rows, ``first_bad`` (first non-finite step, -1: none)."""

    def __init__(self, run, step_fn, state: _StackedState, members, models, eval_fn, schedule,
                 *, get_batch, place_scalar):
        self.run, self.step_fn, self.state, self.members, self.models = (run, step_fn, state,
                                                                         members, models)
        self.eval_fn, self.schedule = eval_fn, schedule
        self.get_batch, self.place_scalar = get_batch, place_scalar
        self.evals: list[list[dict[str, float]]] = [[] for _ in members]
        self.was_alive = np.asarray(state.alive)
        self.first_bad = np.array(state.bad_step)
        logged = {k: v for k, v in (run.last_row or {}).items()
                  if k not in ("step", "lr", "time", "alive") and isinstance(v, list)
                  and len(v) == len(members)}  # a resumed run's last logged metrics
        self.last: list[dict[str, float]] = [{k: float(v[i]) for k, v in logged.items()}
                                             for i in range(len(members))]
        self.pending: list[tuple[int, jax.Array, Any, jax.Array, jax.Array, jax.Array]] = []
        self.t0 = time.perf_counter()
        # the state after `good_step` steps, with `good_alive`/`good_bad`: what a refused step
        # (bad input) leaves in params/opt_state/alive
        self.good = (run.start, self.was_alive.copy(), self.first_bad.copy())
        self.ok = place_scalar(jnp.asarray(True))

    def step(self, s: int) -> None:
        st = self.state
        st.params, st.opt_state, st.alive, loss, metrics, self.ok, checks = self.step_fn(
            st.params, st.rest, st.opt_state, st.alive, self.get_batch(s),
            self.place_scalar(jnp.asarray(s, jnp.int32)), st.keys, st.lrs, st.wds, self.ok)
        self.pending.append((s, loss, metrics, st.alive, self.ok, checks))

    def save(self, s: int) -> None:
        st = self.state
        self.run.save(s, (st.params, st.opt_state, st.alive, jnp.asarray(self.first_bad)))

    def publish(self) -> None:
        for i, model in enumerate(self.models):
            nnx.update(model, _member(self.state.params, i))

    def evaluate(self, s: int) -> None:
        if self.eval_fn is None:
            return
        self.publish()
        for i, model in enumerate(self.models):
            row = {"step": s, **{f"eval/{k}": float(v) for k, v in self.eval_fn(model).items()}}
            self.evals[i].append(row)
            self.run.write({"member": i, **row})

    def flush(self, bar) -> None:
        for s, loss, metrics, alive_s, applied, checks in self.pending:
            if not bool(applied):
                self._stop_on_bad_input(s, checks)
            ok_s = np.asarray(alive_s)
            for i in np.flatnonzero(self.was_alive & ~ok_s):
                self.first_bad[i] = s
                self.run.write({"step": s, "member": int(i), "diverged": True,
                                "loss": float(np.asarray(loss)[i])})
            self.was_alive = self.was_alive & ok_s
            self.good = (s + 1, self.was_alive.copy(), self.first_bad.copy())
        if self.pending:
            self._log(bar, *self.pending[-1][:3])
        self.pending.clear()

    def _stop_on_bad_input(self, s: int, checks) -> None:
        """Step ``s`` and the later ones were refused for every member (``ok`` chain): save the
        last good state and raise InvalidBatch naming the first member with a bad input."""
        good_step, good_alive, good_bad = self.good
        self.first_bad, self.was_alive = good_bad, good_alive
        self.save(good_step)
        self.pending.clear()
        checks = np.asarray(checks)
        bad = [(i, first_error(checks[i])) for i in range(len(self.members))]
        i, error = next((i, e) for i, e in bad if e is not None)
        raise InvalidBatch(f"{error} in the batch of member {i} ({self.members[i]}) at "
                           f"step {s}: training stopped{self.run.where(good_step)}")

    def _log(self, bar, s: int, loss, metrics) -> None:
        """One log row (lists indexed by member) for step ``s`` and the progress bar."""
        n = len(self.members)
        values = {"loss": np.asarray(loss), **{k: np.asarray(v) for k, v in metrics.items()}}
        self.last = [{k: float(v[i]) for k, v in values.items()} for i in range(n)]
        self.run.write({"step": s + 1, "lr": float(self.schedule(s)),
                        **{k: v.tolist() for k, v in values.items()},
                        "alive": self.was_alive.tolist(),
                        "time": round(time.perf_counter() - self.t0, 3)})
        live = values["loss"][self.was_alive]
        bar.set_postfix(loss=f"{live.mean():.4f}" if live.size else "n/a",
                        alive=f"{int(self.was_alive.sum())}/{n}")
