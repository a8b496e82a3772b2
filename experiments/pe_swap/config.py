"""Configuration of ``experiments.pe_swap``: :class:`PESwapConfig` and its presets."""
from __future__ import annotations

import dataclasses
from typing import Any

from experiments.common import VERDICTS, apply_overrides
from posjax.training.config import TrainConfig

VARIANTS = ("learned", "sinusoidal", "rope", "alibi", "t5", "none", "mds", "mds_r",
            "learned_reinit")
UNTESTED = VERDICTS[3]


def _train(**changes: Any) -> TrainConfig:
    """Continued MLM training: AdamW, 10 % linear warm-up then linear decay to 0, global-norm
    clipping at 1."""
    base = dict(steps=300, batch_size=8, optimizer="adamw", learning_rate=1e-4,
                weight_decay=0.01, schedule="linear", warmup_fraction=0.1, grad_clip=1.0,
                eval_every=50, progress=False)
    return TrainConfig(**{**base, **changes})


@dataclasses.dataclass(frozen=True)
class PESwapConfig:
    """Every option of the PE-swap experiment. ``--set`` keys: the experiment's own fields flat
    (``variants=``, ``max_len=``, ``head_steps=``), the optimiser's dotted (``train.steps=``,
    ``train.learning_rate=``, ``train.batch_size=``, ``train.eval_every=``: steps between
    held-out evaluations). ``seeds`` is a count.

    ``pretrained``: the checkpoint (``minilm``, a directory or a hub id; CLI ``--pretrained``,
    alias ``--model``); its ``TransformerConfig`` comes from the checkpoint, so there is no
    ``model.`` config. The head stage trains with ``train`` except ``head_steps`` /
    ``head_learning_rate``; warm-up is at least one step. The MLM loop is the experiment's own
    (it freezes the body for the head stage), so ``train.random_positions`` and
    ``train.pe_schedule`` are refused and ``train.seed`` is replaced by the run's seed.
    """

    pretrained: str = "minilm"
    variants: tuple[str, ...] = VARIANTS
    seeds: int = 3
    max_len: int = 64
    head_steps: int = 300
    head_learning_rate: float = 1e-3
    mask_prob: float = 0.15
    eval_windows: int = 128
    train_windows: int | None = None
    min_words: int = 5
    stdlib_files: tuple[str, ...] = ()
    metric: str = "chord"
    geometry: str = "sentences"
    mds_eps: float = 0.1
    mds_rank: int | None = None
    pe_scale: str = "match"
    plateau_tol: float = 0.02
    dtype: str = "float32"
    data_seed: int = 0
    train: TrainConfig = dataclasses.field(default_factory=_train)

    def __post_init__(self):
        bad = sorted(set(self.variants) - set(VARIANTS))
        if bad or not self.variants:
            raise ValueError(f"unknown variant(s) {bad}; choose from {', '.join(VARIANTS)}")
        if self.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {self.seeds}")
        if self.max_len < 8:
            raise ValueError(f"max_len must be >= 8, got {self.max_len}")
        if not 0 < self.mask_prob < 1:
            raise ValueError(f"mask_prob must be in (0, 1), got {self.mask_prob}")
        if self.geometry not in ("sentences", "windows"):
            raise ValueError(f"geometry must be 'sentences' or 'windows', got {self.geometry!r}")
        if self.pe_scale not in ("match", "none"):
            raise ValueError(f"pe_scale must be 'match' or 'none', got {self.pe_scale!r}")
        for name, value in (("head_steps", self.head_steps), ("eval_windows", self.eval_windows),
                            ("train.eval_every", self.train.eval_every)):
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if self.train.random_positions is not None or self.train.pe_schedule is not None:
            raise ValueError("pe_swap's MLM loop supports neither train.random_positions nor "
                             "train.pe_schedule")

    @property
    def num_masked(self) -> int:
        """Masked positions per window (a fixed count, so shapes are static)."""
        return max(1, int(round(self.mask_prob * (self.max_len - 2))))

    def stage(self, stage: str) -> TrainConfig:
        """The optimiser of ``"head"`` (``head_steps`` at ``head_learning_rate``) or
        ``"variant"`` (``train``), with at least one warm-up step."""
        t = self.train
        if stage == "head":
            t = dataclasses.replace(t, steps=self.head_steps,
                                    learning_rate=self.head_learning_rate)
        elif stage != "variant":
            raise ValueError(f"stage must be 'head' or 'variant', got {stage!r}")
        return dataclasses.replace(t, warmup_steps=max(1, t.warmup), warmup_fraction=None)


PRESETS = {
    "quick": PESwapConfig(seeds=1, head_steps=50, eval_windows=32,
                          train=_train(steps=50, eval_every=25)),
    "cpu": PESwapConfig(seeds=3, head_steps=300, eval_windows=128,
                        train=_train(steps=300, eval_every=50)),
    "gpu": PESwapConfig(seeds=3, max_len=128, head_steps=1000, eval_windows=512,
                        train=_train(steps=2000, batch_size=64, eval_every=250)),
    "paper": PESwapConfig(pretrained="bert-base-uncased", seeds=3, max_len=128, head_steps=2000,
                          eval_windows=1024, train=_train(steps=10000, batch_size=32,
                                                          learning_rate=5e-5, eval_every=1000)),
}


def make_config(preset: str = "quick", **overrides: Any) -> PESwapConfig:
    """``preset`` with ``overrides``: flat fields by name, the optimiser's as ``train={...}``
    (what :func:`experiments.common.parse_set` returns for ``train.steps=3``)."""
    if preset not in PRESETS:
        raise ValueError(f"--preset must be one of {tuple(PRESETS)}, got {preset!r}")
    fields = {f.name for f in dataclasses.fields(PESwapConfig)}
    unknown = sorted(set(overrides) - fields)
    nested = [k for k in unknown if k in {f.name for f in dataclasses.fields(TrainConfig)}]
    if nested:
        raise ValueError(f"unknown option {nested[0]!r}: did you mean train.{nested[0]}?")
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(sorted(fields))}")
    return apply_overrides(PRESETS[preset], overrides)
