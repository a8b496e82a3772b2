"""``experiments.additive_vs_multiplicative``: the experiment's config
(:class:`AdditiveVsMultiplicativeConfig`), its presets and the reported numbers."""
from __future__ import annotations

import dataclasses

from experiments.common import described
from posjax.models import TransformerConfig
from posjax.training import TrainConfig


PES = ("none", "sinusoidal", "learned", "t5", "alibi", "rope", "rope_plus_abs", "mla")


REPORTED = {  # secondary-source numbers (unverified), for comparison only
    ("distance", "rope"): "92.64", ("distance", "mla"): "88.34",
    ("distance", "sinusoidal"): "second best", ("distance", "alibi"): "fails",
    ("distance", "none"): "fails", ("count", "rope"): "69.43", ("count", "mla"): "97.41",
    ("count", "sinusoidal"): "moderate", ("count", "alibi"): "worst", ("count", "none"): "77.69"}


def _model_template() -> TransformerConfig:
    """The classifier body of arXiv 2505.13027 (6 layers, ReLU, dropout 0.1, N(0, 1) token
    embeddings; ``kv_source="embeddings"`` is its code's quirk); ``vocab_size`` (574 token ids), ``max_len`` (``seq_len``) and
    ``pe`` / ``pe_options`` (the row) are set per cell."""
    return TransformerConfig(vocab_size=574, num_layers=6, d_model=256, num_heads=16, d_ff=512,
                             pe="none", activation="relu", dropout=0.1, embed_init_std=1.0,
                             kv_source="residual")


def _train_template() -> TrainConfig:
    """AdamW + cosine (arXiv 2505.13027; faithful betas: b1=0.98, b2=0.9); ``steps`` comes from
    ``epochs`` / ``steps``, ``seed`` from the init seed; ``checkpoint_every=0``: none."""
    return TrainConfig(batch_size=512, optimizer="adamw", learning_rate=1e-4, weight_decay=1e-5,
                       b1=0.9, b2=0.999, eps=1e-8, schedule="cosine", warmup_fraction=0.06,
                       checkpoint_every=1000)


# Library fields the experiment decides (data, row, seeds); --set of another value is refused.
DECIDED = {"model": ("pe", "pe_options", "vocab_size", "max_len"),
           "train": ("steps", "seed", "log_every", "progress", "optimizer")}


@dataclasses.dataclass(frozen=True)
class AdditiveVsMultiplicativeConfig:
    """Every knob of the experiment; ``dataclasses.asdict`` goes into results.json."""

    # data (arXiv 2505.13027)
    distance_samples: int = 100_000
    count_samples: int = 50_000
    seq_len: int = 128
    max_tokens: int = 120
    left_range: tuple[int, int] = (1, 25)
    between_range: tuple[int, int] = (1, 70)
    right_range: tuple[int, int] = (1, 25)
    count_length: int = 120
    count_range: tuple[int, int] = (0, 100)
    count_triggers: int = 30
    exclude_triggers_from_fillers: bool = True   # False: faithful (extra trigger copies)
    filler_ids: str = "all"                       # docs/interpretations.md: "all" | "non_special"
    ignore_label0: bool = False                   # True: faithful (counting ignores y = 0)
    dedup: bool = True
    split_seed: int = 42
    train_fraction: float = 0.7
    pooling: str = "mean"
    # PEs compared in arXiv 2505.13027
    pes: tuple[str, ...] = PES
    count_pes: tuple[str, ...] = PES
    sweep_k: tuple[int, ...] = (0, 1, 2, 3, 16)            # partial-head RoPE on the distance task
    rope_interleaved: bool = True
    learned_std: float = 1.0
    t5_buckets: int = 32
    t5_max_distance: int = 128
    alibi_slopes: str = "canonical"               # "exp": faithful_slopes
    mla_rope_dim: int = 16
    mla_shared_query_rope: bool = False           # True: part of faithful_mla
    # training (arXiv 2505.13027)
    epochs: int = 100
    steps: int | None = None                      # overrides epochs when set
    decay_mask: str = described("all parameters", "optax.adamw decays every parameter")
    seed_grid: str = "cross"                      # "cross": data x init seeds; "paired": (s, s)
    # analysis (arXiv 2505.13027)
    ablation_split: str = "test"                  # "all": train + test, as the original
    ablation_max_samples: int | None = None
    attention_probe: bool = True
    drop_threshold: float = 30.0
    dominance_threshold: float = 5.0
    eval_batch_size: int = 512
    seeds: int = 3                                # seeds per row (pairs: see seed_grid)
    model: TransformerConfig = dataclasses.field(default_factory=_model_template)
    train: TrainConfig = dataclasses.field(default_factory=_train_template)

    def __post_init__(self):
        bad = [p for p in (*self.pes, *self.count_pes) if p not in PES]
        if bad:
            raise ValueError(f"unknown PE row(s) {bad}; choose from {', '.join(PES)}")
        if self.ablation_split not in ("test", "all"):
            raise ValueError(f"ablation_split must be 'test' or 'all', got {self.ablation_split!r}")
        if self.seed_grid not in ("cross", "paired"):
            raise ValueError(f"seed_grid must be 'cross' or 'paired', got {self.seed_grid!r}")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be positive, got {self.steps}")
        for part, template in (("model", _model_template()), ("train", _train_template())):
            for name in DECIDED[part]:
                if getattr(getattr(self, part), name) != getattr(template, name):
                    raise ValueError(f"{part}.{name} is decided by the experiment (data, PE row, "
                                     f"seeds, epochs / steps); it cannot be set")


QUICK = dict(distance_samples=3000, count_samples=3000, seq_len=32, max_tokens=32,
             left_range=(1, 6), between_range=(1, 16), right_range=(1, 6), count_length=32,
             count_range=(0, 16), count_pes=("none", "rope", "mla"), sweep_k=(0, 1, 2, 4),
             steps=250, seed_grid="paired", eval_batch_size=1024, seeds=3,
             model=dataclasses.replace(_model_template(), num_layers=2, d_model=64, num_heads=4,
                                       d_ff=128, dropout=0.0),
             train=dataclasses.replace(_train_template(), batch_size=32, learning_rate=3e-3,
                                       checkpoint_every=0))


PRESETS = {
    "quick": AdditiveVsMultiplicativeConfig(**QUICK),
    # one H200 in <= 8 min: the paper's model and data, 3 paired seeds, 2,000 steps per cell
    "gpu": AdditiveVsMultiplicativeConfig(
        steps=2000, seed_grid="paired",
        train=dataclasses.replace(_train_template(), checkpoint_every=0)),
    "paper": AdditiveVsMultiplicativeConfig(),
}
# Quick settings rationale: length 32 and 2 x 64-wide layers (d_h 16 as in the paper) keep a cell
# to ~10 s of CPU time, about half of it compilation (one evaluation batch: one compile); lr 3e-3
# (30x the paper's) compensates for 250 steps; counting runs the three rows its claim is about;
# k = 0 and k = H of the sweep reuse the NoPE and RoPE cells.
