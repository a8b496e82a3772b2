"""Options of the stress experiment: :class:`StressConfig`, the presets and :func:`make_config`."""
from __future__ import annotations

import dataclasses
from typing import Any, Literal, Sequence

from posjax.analysis.stress_geometry import GEOMETRY_PATHS, geometry_path
from posjax.geometry.stress_targets import has_gram_factorisation
from experiments.common import apply_overrides, described
from posjax.models.config import TransformerConfig
from posjax.training.config import TrainConfig

#: The PEs of the accuracy table: one encoder classifier trained per PE and seed.
TRAINED_ENCODINGS = ("sinusoidal", "learned", "rope", "alibi", "t5", "none", "mds")

DATASETS = ("synthetic", "sst2", "imdb", "text", "stdlib")
#: The fixed encodings of the stress table ("t5": the registry T5 bias at initialisation).
FIXED_ENCODINGS = ("sinusoidal", "rope", "alibi", "nope")
#: The fixed encodings of the sample-size analysis.
SENSITIVITY_ENCODINGS = ("sinusoidal", "rope", "alibi")
# Fields that do not change any cell's numbers (excluded from the cell salt): adding seeds or
# encodings, or changing the checkpoint interval, keeps the finished cells. ``data_dir`` is
# not among them: another folder may hold another corpus, whose cells must not be reused.
_NOT_RESULTS = ("hub_timeout", "mode", "seeds", "encodings", "sens_samples", "sens_repeats")
_NOT_RESULTS_TRAIN = ("progress", "checkpoint_every")  # fields of `train` with the same role

#: The encoder classifier of the accuracy table; each run sets ``vocab_size``, ``max_len``
#: (from the corpus), ``pe`` and ``pe_options`` (the PE of the row).
MODEL = TransformerConfig(num_layers=4, d_model=128, num_heads=4, d_ff=512, dropout=0.0,
                          causal=False, pre_norm=True)
_SET_PER_RUN_MODEL = ("vocab_size", "max_len", "pe", "pe_options")  # train.build_model's
#: Its training; each (PE, seed) cell sets ``seed`` and logs every ``min(log_every, steps)``.
TRAIN = TrainConfig(steps=2000, batch_size=64, optimizer="adamw", learning_rate=1e-3,
                    weight_decay=0.01, schedule="cosine", warmup_fraction=0.1, log_every=100,
                    checkpoint_every=0, progress=False)
# Options of the geometry path: part of the accuracy cells' salt only when the matrix-free path ran (the
# dense path's cells do not depend on them, so runs stored before they existed stay valid).
_PATH_OPTIONS = ("geometry", "matrix_free_above", "matrix_free_k", "stress_exact_max",
                 "stress_pairs")


@dataclasses.dataclass(frozen=True)
class StressConfig:
    """Every option of the experiment; each reading of docs/interpretations.md is a field
    (arXiv 2604.05217: ``metric`` Eq. (3), stress Eq. (4) without square root, raw and at the
    optimal scale; ranks ``tau`` (r_tau) and ``eps`` (r_eps, energy rule)). ``model`` and
    ``train`` are set by dotted keys (``--set model.d_model=64 train.steps=500``)."""

    dataset: str = "synthetic"
    mode: str = described("paper", "the preset: --preset quick|gpu|paper")
    seeds: int = 3
    data_seed: int = 0
    encodings: tuple[str, ...] = TRAINED_ENCODINGS
    # geometry
    metric: str = "chord"
    keep_special: bool = True
    pad_mode: str = "drop"
    smoothing: float = 0.0
    top_k: int | None = None
    min_count: int = 1
    tau: float = 1e-6
    eps: float = 1e-3
    eps_alt: float = 1e-2
    sinusoidal_dim: int = 768
    rope_head_dim: int = 64
    rope_mode: str = "kernel"
    alibi_scale: Any = None
    alibi_heads: int = 12
    smacof_max_iter: int = 300
    smacof_tol: float | None = None  # None: 4 ulps of the data dtype (see geometry.smacof)
    # dense n x n geometry or matrix-free (docs/long_context_geometry.md)
    geometry: Literal["auto", "dense", "matrix_free"] = "auto"
    matrix_free_above: int = 4096       # auto: matrix-free when n > this
    matrix_free_k: int = 64             # top-k eigenpairs of B on the matrix-free path
    stress_exact_max: int = 8192        # matrix-free stress exact (streamed) up to this n
    stress_pairs: int = 200_000         # else estimated from this many sampled pairs (95 % CI)
    # synthetic corpus and task
    num_positions: int | None = 128
    vocab_size: int = 2000
    samples_per_position: int = 100_000
    mixing: str = "linear"
    alpha: float = 0.1
    task_shift: int | None = None  # None: max(1, n // 8)
    train_examples: int | None = 20_000
    test_examples: int | None = 4096
    # text
    max_len: int = 64
    tokenizer_vocab: int = 8000
    vocab_file: str | None = None
    data_dir: str | None = None
    hub_timeout: float = 5.0
    # sensitivity (docs/interpretations.md toy: V = 2000, n = 128)
    sens_positions: int = 128
    sens_vocab: int = 2000
    sens_samples: tuple[int | None, ...] = (None, 100_000, 10_000, 1_000)
    sens_repeats: int = 3
    # model and training (accuracy table): dotted --set keys (model.d_model=64, train.steps=500)
    model: TransformerConfig = dataclasses.field(default_factory=lambda: MODEL)
    train: TrainConfig = dataclasses.field(default_factory=lambda: TRAIN)
    pooling: str = "mean"
    # the MDS PE: the variant of D it is built from, scale gamma, trainable factors, lift
    mds_variant: str = "plugin"
    mds_scale: float = 1.0
    mds_trainable: str = "both"
    mds_lift: str = "pad"
    mds_max_rank: int | None = None
    # pretrained checkpoint row and custom corpora
    pretrained: str | None = None
    pretrained_layernorm: bool = False
    tokenizer: str | None = None
    text_column: str | None = None
    # real text without downloads: dataset "stdlib" (docstrings of the standard library, or of
    # the installed package `package`, e.g. numpy); `stream`: the geometry corpus is one
    # contiguous token stream cut into windows of n tokens (text and stdlib); `require_n`: fail
    # when fewer than num_positions positions are analysed
    package: str | None = None
    stream: bool = False
    require_n: bool = False
    fixed_encodings: tuple[str, ...] = FIXED_ENCODINGS

    def __post_init__(self):
        for name, value, choices in (("dataset", (self.dataset,), DATASETS),
                                     ("fixed_encodings", self.fixed_encodings,
                                      FIXED_ENCODINGS + ("t5",)),
                                     ("encodings", self.encodings, TRAINED_ENCODINGS)):
            bad = sorted(set(value) - set(choices))
            if bad and name == "dataset":
                raise ValueError(f"unknown dataset {bad[0]!r}; choose one of {', '.join(choices)}")
            if bad:
                raise ValueError(f"unknown {name} {bad}; choose from {', '.join(choices)}")
        for name, choices in (("mds_variant", ("plugin", "split_half", "exact")),
                              ("geometry", GEOMETRY_PATHS),
                              ("pooling", ("cls", "mean", "last"))):
            if getattr(self, name) not in choices:
                raise ValueError(f"{name} must be {', '.join(choices[:-1])} or {choices[-1]}, "
                                 f"got {getattr(self, name)!r}")
        for key, least in (("seeds", 1), ("matrix_free_above", 1), ("matrix_free_k", 1),
                           ("stress_exact_max", 1), ("stress_pairs", 2)):
            if getattr(self, key) < least:
                raise ValueError(f"{'--' if key == 'seeds' else ''}{key} must be >= {least}, "
                                 f"got {getattr(self, key)}")
        if self.dataset == "synthetic" and (self.data_dir or self.vocab_file):
            raise ValueError("--data-dir and --vocab-file apply to sst2 and imdb only")
        if self.package and self.dataset != "stdlib":
            raise ValueError("package applies to --dataset stdlib only")
        if self.mds_variant == "exact" and self.dataset != "synthetic":
            raise ValueError("mds_variant='exact' exists only for the synthetic dataset")
        if self.geometry == "matrix_free" and not has_gram_factorisation(self.metric):
            raise ValueError(f"geometry='matrix_free' needs the chord or normalized metric "
                             f"(B of {self.metric!r} has no Gram factorisation)")
        if self.geometry == "matrix_free" and self.mds_variant == "split_half":
            raise ValueError("mds_variant='split_half' needs geometry='dense' (split-half "
                             "debiasing is not computed matrix-free)")
        for name, want in (("model", TransformerConfig), ("train", TrainConfig)):
            if not isinstance(getattr(self, name), want):
                raise ValueError(f"{name} must be a {want.__name__} (set its fields with "
                                 f"--set {name}.<field>=...)")
        for name, template, per_run in (("model", MODEL, _SET_PER_RUN_MODEL),
                                        ("train", TRAIN, ("seed",))):
            for field in per_run:
                if getattr(getattr(self, name), field) != getattr(template, field):
                    raise ValueError(f"{name}.{field} is set by each accuracy run (from the "
                                     f"corpus, the PE row, the seed); it cannot be set")

    def salt(self, keys: Sequence[str] | None = None, path: str = "dense") -> dict[str, Any]:
        """The options that change a cell's numbers (``keys``: only those; ``path``: the
        geometry path, whose options count on the matrix-free path only)."""
        drop = _NOT_RESULTS + (_PATH_OPTIONS if path == "dense" else ())
        rec = {k: v for k, v in dataclasses.asdict(self).items() if k not in drop}
        rec["train"] = {k: v for k, v in rec["train"].items() if k not in _NOT_RESULTS_TRAIN}
        if path != "dense":
            rec["geometry_path"] = path
        return rec if keys is None else {k: rec[k] for k in keys}

    def geometry_path(self, n: int) -> str:
        """``"dense"`` or ``"matrix_free"`` for ``n`` positions
        (:func:`posjax.analysis.stress_geometry.geometry_path` of these options)."""
        return geometry_path(n, self.geometry, matrix_free_above=self.matrix_free_above,
                             metric=self.metric)

    def plan(self) -> StressPlan:
        """Every option as the keyword arguments of the functions the driver calls, resolved
        once before the run (the driver computes only from the plan; it reads the config itself
        to build the corpus, :func:`~experiments.stress_table.data.prepare`, and to record it)."""
        alibi = {"scale": self.alibi_scale, **({"num_heads": self.alibi_heads}
                                               if self.alibi_scale == "mean_slope" else {})}
        fixed = {"sinusoidal": {"dim": self.sinusoidal_dim}, "alibi": alibi, "nope": {},
                 "rope": {"head_dim": self.rope_head_dim, "mode": self.rope_mode},
                 "t5": {"use_registry": True, "num_heads": self.alibi_heads}}
        pairs = dict(metric=self.metric, exact_max=self.stress_exact_max,
                     pairs=self.stress_pairs, seed=self.data_seed)
        return StressPlan(
            geometry=dict(metric=self.metric, geometry=self.geometry,
                          matrix_free_above=self.matrix_free_above,
                          split_half_ok=self.mds_variant != "split_half",
                          estimator=dict(num_positions=self.num_positions,
                                         pad_mode=self.pad_mode, smoothing=self.smoothing,
                                         top_k=self.top_k, min_count=self.min_count)),
            pairs=pairs, smacof_max_iter=self.smacof_max_iter, smacof_tol=self.smacof_tol,
            tables=dict(tau=self.tau, eps=self.eps, eps_alt=self.eps_alt,
                        paper_d=self.sinusoidal_dim, model_d=self.model.d_model),
            matrix_free_k=self.matrix_free_k,
            encodings={k: fixed[k] for k in self.fixed_encodings},
            required_n=self.num_positions if self.require_n else None,
            accuracy=dict(encodings=tuple(self.encodings), seeds=self.seeds, model=self.model,
                          train=self.train, pooling=self.pooling, mds_variant=self.mds_variant,
                          mds=dict(scale=self.mds_scale, max_rank=self.mds_max_rank,
                                   trainable=self.mds_trainable, lift=self.mds_lift),
                          run_config={"dataset": self.dataset}),
            accuracy_salt={p: {"part": "E4", **self.salt(path=p)} for p in GEOMETRY_PATHS[1:]},
            sensitivity=dict(n=self.sens_positions, vocab=self.sens_vocab,
                             samples=self.sens_samples, repeats=self.sens_repeats,
                             matrix_free=self.geometry_path(self.sens_positions) == "matrix_free",
                             pair_options=pairs, mixing=self.mixing, alpha=self.alpha,
                             data_seed=self.data_seed,
                             encodings={k: fixed[k] for k in SENSITIVITY_ENCODINGS}),
            sensitivity_salt={"part": "sensitivity", **self.salt(_SENSITIVITY_SALT)},
            pretrained=None if not self.pretrained else dict(
                checkpoint=self.pretrained, layernorm=self.pretrained_layernorm,
                required=self.num_positions if self.require_n else None))


#: The options that key a sensitivity cell (its corpus, metric and fixed encodings).
_SENSITIVITY_SALT = ("metric", "mixing", "alpha", "data_seed", "sens_positions", "sens_vocab",
                     "sinusoidal_dim", "rope_head_dim", "rope_mode", "alibi_scale", "alibi_heads")


@dataclasses.dataclass(frozen=True)
class StressPlan:
    """A :class:`StressConfig` resolved into the keyword arguments of each step of a run:
    ``geometry`` of :func:`~posjax.analysis.stress_geometry.geometry_variants` (with
    ``estimator``, of :func:`posjax.geometry.positional_distributions`); ``pairs`` of
    :func:`~posjax.geometry.stress_targets.coords_stress`; ``tables``, the SMACOF options and
    ``matrix_free_k`` of :mod:`posjax.analysis.stress_tables`; ``encodings`` the fixed rows
    (``{name: options}`` of :mod:`posjax.analysis.encoding_geometry`); ``required_n`` the least
    number of analysed positions (or None); ``accuracy`` the trained rows; ``sensitivity`` the
    sample-size analysis; ``pretrained`` the checkpoint row (or None); the salts key the
    finished cells (``accuracy_salt`` per geometry path)."""

    geometry: dict[str, Any]
    pairs: dict[str, Any]
    smacof_max_iter: int
    smacof_tol: float | None
    tables: dict[str, Any]
    matrix_free_k: int
    encodings: dict[str, dict]
    required_n: int | None
    accuracy: dict[str, Any]
    accuracy_salt: dict[str, dict[str, Any]]
    sensitivity: dict[str, Any]
    sensitivity_salt: dict[str, Any]
    pretrained: dict[str, Any] | None


_TINY_MODEL = dict(d_model=32, num_layers=2, num_heads=2, d_ff=64)
_TEXT_QUICK = dict(train_examples=2000, test_examples=500, seeds=3, pooling="cls",
                   sens_repeats=1, model=_TINY_MODEL)
_TEXT_PAPER = dict(train_examples=None, test_examples=None, pooling="cls",
                   model=dict(d_model=256, d_ff=1024, dropout=0.1))
PRESETS: dict[tuple[str, str], dict[str, Any]] = {
    ("synthetic", "paper"): {},
    # one H200 in <= 8 min: the paper-scale synthetic corpus and trained encoders, 5 seeds
    ("synthetic", "gpu"): dict(seeds=5),
    ("synthetic", "quick"): dict(num_positions=32, vocab_size=500, samples_per_position=20_000,
                                 train_examples=3000, test_examples=1024, seeds=3, sens_repeats=2,
                                 model=_TINY_MODEL,
                                 train=dict(steps=200, batch_size=32, learning_rate=3e-3)),
    ("sst2", "paper"): dict(_TEXT_PAPER, num_positions=64, max_len=64, train=dict(
        steps=3000, learning_rate=3e-4, checkpoint_every=1000)),
    ("sst2", "quick"): dict(_TEXT_QUICK, num_positions=64, max_len=64, tokenizer_vocab=3000,
                            train=dict(steps=150, learning_rate=1e-3)),
    ("text", "paper"): dict(_TEXT_PAPER, num_positions=128, max_len=128,
                            train=dict(steps=3000, learning_rate=3e-4)),
    ("text", "quick"): dict(_TEXT_QUICK, num_positions=32, max_len=32, tokenizer_vocab=1000,
                            train=dict(steps=100, learning_rate=1e-3)),
    ("imdb", "paper"): dict(_TEXT_PAPER, num_positions=512, max_len=512, train=dict(
        steps=3000, batch_size=32, learning_rate=3e-4, checkpoint_every=1000)),
    ("imdb", "quick"): dict(_TEXT_QUICK, num_positions=256, max_len=256, train_examples=1000,
                            test_examples=300, tokenizer_vocab=3000,
                            train=dict(steps=100, learning_rate=1e-3, batch_size=32)),
    # docstrings of the standard library (or --set package=numpy) as contiguous windows of n
    # tokens; unlabelled (no accuracy table); with --pretrained the checkpoint's table raw and
    # after its embedding LayerNorm
    ("stdlib", "quick"): dict(num_positions=128, max_len=128, stream=True, require_n=True,
                              fixed_encodings=FIXED_ENCODINGS + ("t5",),
                              pretrained_layernorm=True, tokenizer_vocab=8000, seeds=1,
                              model=dict(d_model=384),  # MiniLM's d: the r(n + d) row at it
                              sens_samples=(None,), sens_repeats=1),
}
PRESETS[("stdlib", "paper")] = {**PRESETS[("stdlib", "quick")], "num_positions": 512,
                                "max_len": 512}
PRESETS[("stdlib", "gpu")] = PRESETS[("stdlib", "paper")]
for _d in ("sst2", "imdb"):  # the paper-scale text runs fit one H200 as they are
    PRESETS[(_d, "gpu")] = PRESETS[(_d, "paper")]


def make_config(dataset: str, *, quick: bool = False, preset: str | None = None,
                **overrides: Any) -> StressConfig:
    """The preset ``(dataset, quick|gpu|paper)`` with ``overrides`` applied (``quick=True`` is
    ``preset="quick"``; the default is paper)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    mode = preset or ("quick" if quick else "paper")
    if (dataset, mode) not in PRESETS:
        raise ValueError(f"unknown preset {mode!r}; choose quick, gpu or paper")
    fields = {f.name for f in dataclasses.fields(StressConfig)}
    for key in sorted(set(overrides) - fields):
        hint = [f"{n}.{key}" for n, c in (("model", TransformerConfig), ("train", TrainConfig))
                if key in {f.name for f in dataclasses.fields(c)}]
        raise ValueError(f"unknown option {key!r}" + (f": did you mean {' or '.join(hint)}?"
                         if hint else f"; valid: {', '.join(sorted(fields))}"))
    base = StressConfig(dataset=dataset, mode=mode)
    return apply_overrides(apply_overrides(base, PRESETS[(dataset, mode)]), overrides)
