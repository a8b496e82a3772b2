"""Training configuration and the optax optimiser/schedule built from it."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import optax

from posjax.config_types import check_field_types

OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("constant", "cosine", "linear")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything the training loop needs besides the model, the loss and the data.

    Attributes:
      steps: total optimiser steps.
      batch_size: examples per step (used by :class:`ArrayBatches`).
      optimizer: "adamw" (decoupled weight decay on all parameters, like PyTorch), "adam", "sgd".
      learning_rate, weight_decay, b1, b2, eps, momentum: optimiser hyper-parameters.
      schedule: "constant", "cosine" (to 0) or "linear" (to 0), after ``warmup_steps`` of linear
        warm-up (or ``warmup_fraction`` of ``steps`` when given).
      grad_clip: global-norm clipping threshold (None: off).
      seed: seeds the data order and the per-step dropout keys.
      log_every: steps between metric rows (and finiteness checks).
      eval_every: steps between evaluations (0: only at the end).
      checkpoint_every: steps between checkpoints (0: only at the end or on interrupt).
      keep_checkpoints: checkpoints kept on disk.
      progress: show a progress bar.
      random_positions: M, or None (off): every batch gets ``positions`` sampled per row as a
        sorted subset of ``[0, M)`` (randomized positional encodings, arXiv 2305.16843;
        :func:`posjax.training.randomized_positions`), any PE; a table PE shorter than M refuses.
      pe_schedule: None, or phases ``((step, pe), ...)`` / ``((step, pe, pe_options), ...)``
        with strictly increasing steps from 0: from each step on the model runs with that PE
        (e.g. ``((0, "rope"), (800, "none"))``: RoPE, then no PE and the remaining steps
        recalibrate, DroPE, arXiv 2512.12167). The model passed to ``train`` must carry the
        first phase's PE; every phase must have the same parameters (e.g. parameter-free PEs).
    """

    steps: int = 1000
    batch_size: int = 32
    optimizer: str = "adamw"
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    momentum: float = 0.0
    schedule: str = "constant"
    warmup_steps: int = 0
    warmup_fraction: float | None = None
    grad_clip: float | None = None
    seed: int = 0
    log_every: int = 50
    eval_every: int = 0
    checkpoint_every: int = 0
    keep_checkpoints: int = 2
    progress: bool = True
    random_positions: int | None = None
    pe_schedule: tuple | None = None

    def __post_init__(self):
        check_field_types(self, "TrainConfig.")
        if self.pe_schedule is not None:
            object.__setattr__(self, "pe_schedule", _check_pe_schedule(self.pe_schedule))
        if self.random_positions is not None and self.random_positions <= 0:
            raise ValueError(f"TrainConfig.random_positions must be a positive int (the range "
                             f"M of the positions), got {self.random_positions}")
        for field in dataclasses.fields(self):  # NaN passes every `<=` test below
            value = getattr(self, field.name)
            if isinstance(value, (float, np.floating)) and not math.isfinite(value):
                raise ValueError(f"TrainConfig.{field.name} must be finite, got {value}")
        if self.steps <= 0:
            raise ValueError(f"TrainConfig.steps must be positive, got {self.steps}")
        if self.batch_size <= 0:
            raise ValueError(f"TrainConfig.batch_size must be positive, got {self.batch_size}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        if self.warmup_fraction is not None and not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.log_every <= 0:
            raise ValueError(f"log_every must be positive, got {self.log_every}")

    @property
    def warmup(self) -> int:
        if self.warmup_fraction is not None:
            return int(round(self.warmup_fraction * self.steps))
        return self.warmup_steps

    def replace(self, **changes: Any) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


def _check_pe_schedule(schedule) -> tuple:
    """Normalise ``pe_schedule`` to ``((step, pe, options_dict), ...)``; ValueError naming the
    entry otherwise."""
    out, last = [], -1
    for i, entry in enumerate(schedule):
        entry = tuple(entry) if isinstance(entry, (list, tuple)) else (entry,)
        if len(entry) not in (2, 3):
            raise ValueError(f"TrainConfig.pe_schedule[{i}] must be (step, pe) or (step, pe, "
                             f"pe_options), got {entry!r}")
        step, pe = entry[0], entry[1]
        opts = entry[2] if len(entry) == 3 else {}
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
            raise ValueError(f"TrainConfig.pe_schedule[{i}] step must be an int, got {step!r}")
        if not isinstance(pe, str) or not isinstance(opts, dict):
            raise ValueError(f"TrainConfig.pe_schedule[{i}] needs a PE name (str) and an options "
                             f"dict, got {pe!r}, {opts!r}")
        if (i == 0 and step != 0) or step <= last:
            raise ValueError(f"TrainConfig.pe_schedule steps must start at 0 and increase "
                             f"strictly, got step {step} at entry {i}")
        last = int(step)
        out.append((int(step), pe, dict(opts)))
    if not out:
        raise ValueError("TrainConfig.pe_schedule is empty (use None for no schedule)")
    return tuple(out)


def pe_phase(cfg: TrainConfig, step: int) -> int:
    """Index of the ``pe_schedule`` phase that step ``step`` runs in (0 without a schedule)."""
    if cfg.pe_schedule is None:
        return 0
    return max(i for i, (start, _, _) in enumerate(cfg.pe_schedule) if start <= step)


def make_schedule(cfg: TrainConfig) -> optax.Schedule:
    """Warm-up then constant / cosine / linear decay of the learning rate."""
    peak, warm, total = cfg.learning_rate, cfg.warmup, cfg.steps
    if cfg.schedule == "constant":
        after = optax.constant_schedule(peak)
    elif cfg.schedule == "cosine":
        after = optax.cosine_decay_schedule(peak, max(total - warm, 1))
    else:
        after = optax.linear_schedule(peak, 0.0, max(total - warm, 1))
    if warm == 0:
        return after
    return optax.join_schedules([optax.linear_schedule(0.0, peak, warm), after], [warm])


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    """The optax transformation described by ``cfg``."""
    lr = make_schedule(cfg)
    if cfg.optimizer == "adamw":
        opt = optax.adamw(lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps, weight_decay=cfg.weight_decay)
    elif cfg.optimizer == "adam":
        opt = optax.adam(lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
    else:
        opt = optax.sgd(lr, momentum=cfg.momentum or None)
    if cfg.grad_clip is not None:
        opt = optax.chain(optax.clip_by_global_norm(cfg.grad_clip), opt)
    return opt
