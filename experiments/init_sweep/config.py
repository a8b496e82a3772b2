"""``experiments.init_sweep``: the sweep's config (:class:`InitSweepConfig`), its presets and
the companion reference numbers."""
from __future__ import annotations

import dataclasses

from posjax.models import TransformerConfig
from posjax.training import TrainConfig


COMPANION_SEEDS = (2235, 6312, 6068, 9742, 8880, 2197, 669, 6256, 3309, 2541, 8643, 7785, 195,
                   6914, 29)


FIXED_PES = {  # label -> (registry name, options); grid_width is added for the 2-D ones
    "none": ("none", {}),
    "sin1d": ("sinusoidal", {}),
    "sin2d": ("sinusoidal2d", {}),
    "rope2d_axial": ("rope2d_axial", {}),
    "random_fixed": ("random_fixed", {}),
}


REFERENCE = {  # companion replication of arXiv 2406.08272 (test / human-puzzle val), mean %
    "sin2d": (98.51, 97.65), 0.1: (96.99, 92.47), 0.2: (98.61, 95.56), 0.5: (98.64, 94.63),
    1.0: (98.07, 89.38), 2.0: (84.66, 37.72)}


def _model_template() -> TransformerConfig:
    """The classifier body (arXiv 2406.08272, Sec. 3 and the companion code: post-LN, a GELU
    after the MLP, the PE added before every block, one head); ``input_dim`` (5 features),
    ``max_len`` (grid_width²) and ``pe`` / ``pe_options`` (the label) are set per cell."""
    return TransformerConfig(num_layers=4, d_model=160, num_heads=1, d_ff=640, pe="none",
                             pre_norm=False, pe_every_layer=True, mlp_trailing_activation=True,
                             activation="gelu", dropout=0.0)


def _train_template() -> TrainConfig:
    """Adam (AdamW with weight decay 0); ``steps`` comes from ``epochs`` / ``max_steps``."""
    return TrainConfig(batch_size=128, optimizer="adam", learning_rate=1e-4, progress=False)


# Library fields the experiment decides (data, label, epochs); --set of another value is refused.
DECIDED = {"model": ("pe", "pe_options", "input_dim", "max_len"),
           "train": ("steps", "log_every", "checkpoint_every")}


@dataclasses.dataclass(frozen=True)
class InitSweepConfig:
    """Every setting of the sweep (recorded in results.json).

    ``seeds`` is a count: the first ``seeds`` companion seeds (then 1000, 1001, ...).
    ``model`` / ``train``: the library configs, set dotted (``--set model.d_model=32
    train.learning_rate=3e-3``); the rest is the experiment's own, set flat.
    """

    sigmas: tuple[float, ...] = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.2, 1.5, 1.8, 2.0)
    fixed_pes: tuple[str, ...] = tuple(FIXED_PES)
    seeds: int = 15
    data_seed: int = 0
    n_per_condition: int = 3000
    readout: str = "last"               # "last" (companion), "query", "mean"
    grid_width: int = 4
    random_fixed_std: float = 1.0       # std of the fixed random table
    rope_base: float = 10000.0          # base of axial 2-D RoPE
    epochs: int = 4000
    max_steps: int | None = None        # replaces epochs when set
    model: TransformerConfig = dataclasses.field(default_factory=_model_template)
    train: TrainConfig = dataclasses.field(default_factory=_train_template)

    def __post_init__(self):
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if not self.sigmas and not self.fixed_pes:
            raise ValueError("nothing to run: sigmas and fixed_pes are both empty")
        if any(s <= 0 for s in self.sigmas):
            raise ValueError(f"every σ must be positive, got {self.sigmas}")
        unknown = set(self.fixed_pes) - set(FIXED_PES)
        if unknown:
            raise ValueError(f"unknown fixed PE(s) {sorted(unknown)}; choose from {list(FIXED_PES)}")
        if self.train.optimizer not in ("adam", "adamw", "sgd"):
            raise ValueError(f"train.optimizer must be adam, adamw or sgd, got "
                             f"{self.train.optimizer!r}")
        if self.readout not in ("last", "query", "mean"):
            raise ValueError(f"readout must be last, query or mean, got {self.readout!r}")
        if self.model.d_model % 4:
            raise ValueError(f"model.d_model must be divisible by 4 for the 2-D PEs, got "
                             f"{self.model.d_model}")
        if self.n_per_condition < 10:
            raise ValueError(f"n_per_condition must be >= 10, got {self.n_per_condition}")
        if self.max_steps is not None and self.max_steps <= 0:
            raise ValueError(f"max_steps must be positive, got {self.max_steps}")
        for part, template in (("model", _model_template()), ("train", _train_template())):
            for name in DECIDED[part]:
                if getattr(getattr(self, part), name) != getattr(template, name):
                    raise ValueError(f"{part}.{name} is decided by the experiment (data, label, "
                                     f"epochs / max_steps); it cannot be set")

    @property
    def seed_values(self) -> tuple[int, ...]:
        extra = tuple(range(1000, 1000 + max(self.seeds - len(COMPANION_SEEDS), 0)))
        return (COMPANION_SEEDS + extra)[:self.seeds]

    def steps(self, train_size: int) -> int:
        return self.max_steps or self.epochs * (train_size // self.train.batch_size)


PRESETS = {
    # 2-core CPU: small model, 5 seeds of every cell in ensembles; 1,500 steps (~44 epochs) is
    # the longest run that stays within 10 minutes there (8.5 min at load 2; 600 steps: 3.8 min)
    "quick": InitSweepConfig(
        sigmas=(0.05, 0.1, 0.2, 0.5, 1.0, 2.0), seeds=5, n_per_condition=800, max_steps=1500,
        model=dataclasses.replace(_model_template(), d_model=32, num_layers=2, d_ff=128),
        train=dataclasses.replace(_train_template(), batch_size=64, learning_rate=3e-3)),
    # one H200 in <= 8 min: the paper's model and grid, 8 seeds, 4,000 steps (~63 epochs)
    "gpu": InitSweepConfig(seeds=8, max_steps=4000),
    # the paper's configuration: 15 companion seeds, 4,000 epochs
    "paper": InitSweepConfig(),
}
