"""``experiments.length_generalization``: the experiment's config
(:class:`LengthGeneralizationConfig`), its presets and PE lists."""
from __future__ import annotations

import dataclasses

from experiments.common import described
from posjax.data import algorithmic as alg
from posjax.models import TransformerConfig
from posjax.training import TrainConfig


DEFAULT_OUT = "runs/length_generalization"
ROPE_SCALINGS = ("rope_linear", "rope_ntk", "rope_yarn", "rope_llama3", "longrope")
# The PEs of Kazemnejad et al. (APE = sinusoidal, plus learned) used for the NoPE comparison.
REFERENCE_PES = ("none", "sinusoidal", "learned", "rope", "alibi", "t5")


# PEs of 2022-2025 (sandwich ... path): relative biases, rotations and contextual logits.
NEW_PES = ("sandwich", "p_rope", "mrope", "fope", "dynamic_position_bias", "polar_pope", "cayley_string",
           "liere", "comrope", "cope", "fox", "dape", "path")


# The quick preset trains the reference PEs (each trained PE: one 3-member ensemble, 20-50 s of CPU);
# the 2022-2025 PEs add 13 trained rows, which would take it past 10 minutes on 2 CPU cores: run
# them with `--quick --set pes=...` (QUICK_PES + NEW_PES; docs/results_experiments.md).
QUICK_PES = ("none", "learned", "sinusoidal", "rope", "alibi", "t5", "kerple_log", "kerple_power",
             "fire", "xpos", "hope", "pope") + ROPE_SCALINGS


FULL_PES = QUICK_PES + NEW_PES + ("cape", "hype", "gridpe", "tupe", "cpe", "lape", "complex",
                        "positional_attention", "rope_plus_abs", "mla", "random_fixed")


# Per-layer schedules (posjax.models.schedules.PRESETS), run as rows by name: --set pes=sched_gemma3
SCHEDULE_PES = {"sched_llama4_irope": "llama4_irope", "sched_gemma3": "gemma3",
                "sched_rnope_swa": "rnope_swa", "sched_olmo3": "olmo3"}


# Registered PEs this experiment does not run, and why (every other registered PE is in FULL_PES).
EXCLUDED_PES = {
    "mrope_yarn": "on 1-D text it is rope_yarn (tested), which the reference rows already train",
    "string_shift": "an inference-time remapping of a trained RoPE model's distances (arXiv "
                    "2410.18745); training with it from scratch is not the method",
    "mds": "its table is built from a corpus's positional geometry; the algorithmic tasks give "
           "no such corpus",
    "learned_interpolated": "stretches its table over the padded sequence width, so at test "
                            "time even short instances would see resampled positions (see "
                            "unseen_rows)",
    "rope_proportional": "with its default proportion 1 it is rope_linear, and with a proportion "
                         "< 1 it leaves the low-frequency pairs unrotated, as p_rope does",
    "rope2d_axial": "a 2-D grid PE",
    "sinusoidal2d": "a 2-D grid PE",
}


def _model_template() -> TransformerConfig:
    """The decoder of every cell (pre-LN, causal, GELU, no dropout); ``pe``/``pe_options``,
    ``vocab_size`` and ``max_len`` are set per cell from the PE row and the task's widths."""
    return TransformerConfig(num_layers=6, d_model=256, num_heads=8, d_ff=1024, pe="none",
                             causal=True, pre_norm=True, dropout=0.0)


# Library fields each cell decides (from its PE row, the task's widths, train.steps): --set of
# another value is refused rather than ignored.
DECIDED = {"model": ("pe", "pe_options", "vocab_size", "max_len"),
           "train": ("log_every", "checkpoint_every")}


def _train_template() -> TrainConfig:
    """AdamW + cosine; ``log_every`` / ``checkpoint_every`` are derived from ``steps``."""
    return TrainConfig(steps=20_000, batch_size=64, optimizer="adamw", learning_rate=3e-4,
                       weight_decay=0.0, schedule="cosine", warmup_steps=1000, grad_clip=1.0,
                       progress=True)


@dataclasses.dataclass(frozen=True)
class LengthGeneralizationConfig:
    """Every setting of a run (recorded in results.json; interpretation choices included, docs/interpretations.md).

    Library configs (set dotted: ``--set model.d_model=64 train.learning_rate=3e-3``):
      model: the decoder (:class:`posjax.models.TransformerConfig`); a per-layer schedule is set
        through it (``model.layer_types=sliding,full model.sliding_window=8``, docs/catalogue.md); the
        experiment replaces ``pe``/``pe_options`` (the PE row), ``vocab_size`` and ``max_len``
        (the test width) per cell.
      train: the optimiser and schedule (:class:`posjax.training.TrainConfig`); ``log_every`` and
        ``checkpoint_every`` are derived from ``train.steps`` (10 and 4 per run).

    The experiment's own fields (set flat: ``--set pes=none,rope``):
      tasks, pes: what to run.
      train_max_length: L (instances of length 1..L in training).
      test_factor: test lengths 1..test_factor * L.
      n_train: training instances per (task, seed); per_length: test instances per length.
      eval_batch: sequences per evaluation forward pass.
      greedy_check_per_length: instances per test length decoded greedily to cross-check the
        teacher-forced exact match; ``greedy_check_pes`` limits the check to some PEs (None: all).
      unseen_rows: learned tables cover the longest test sequence; rows never trained stay at
        their init ("init", arXiv 2305.19466; the only value supported here: interpolation needs the
        instance length, which a padded fixed-width batch does not give).
      rope_scaling_mode: "test_time" (scaling applied to the trained RoPE model at test time) or
        "train_and_test" (each variant trained with its scaling).
      hope_train_length: "train_width" (HoPE rotates pairs whose wavelength fits the training
        sequence width) or "max_len" (the model's max_len, i.e. the test width).
      pope_range: "test_width" (PoPE maps positions 0..max_len-1, max_len = test width, onto
        [-1, 1]: training sees only the left part; the only value supported, since PoPE refuses
        positions outside its range).
      lape_base: additive PE wrapped by LaPE.
      addition_digit_order, parity_scratchpad: task options.
      schedule_span: window / chunk size (and Llama 4 floor_scale) of the ``sched_*`` rows.
    """

    tasks: tuple[str, ...] = ("copy", "reverse", "addition", "parity", "counting")
    pes: tuple[str, ...] = FULL_PES
    train_max_length: int = 20
    test_factor: int = 4
    n_train: int = 100_000
    per_length: int = 1000
    eval_batch: int = 256
    greedy_check_per_length: int = 2
    greedy_check_pes: tuple[str, ...] | None = None
    unseen_rows: str = "init"
    rope_scaling_mode: str = "test_time"
    hope_train_length: str = "train_width"
    pope_range: str = "test_width"
    lape_base: str = "learned"
    addition_digit_order: str = "msb_first"
    parity_scratchpad: str = "none"
    eval_method: str = described("teacher_forced_argmax (== greedy exact match; greedy "
                                 "cross-check)", "the evaluation code")
    seeds: int = 3
    schedule_span: int = 8
    model: TransformerConfig = dataclasses.field(default_factory=_model_template)
    train: TrainConfig = dataclasses.field(default_factory=_train_template)

    def __post_init__(self):
        choices = {"unseen_rows": ("init",), "rope_scaling_mode": ("test_time", "train_and_test"),
                   "hope_train_length": ("train_width", "max_len"), "pope_range": ("test_width",)}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.train_max_length < 1 or self.test_factor < 1:
            raise ValueError("train_max_length and test_factor must be >= 1")
        if self.seeds < 1 or self.train.steps < 1:
            raise ValueError(f"seeds and train.steps must be >= 1, got {self.seeds}, "
                             f"{self.train.steps}")
        if not self.model.causal:
            raise ValueError("length_generalization trains decoders: model.causal must be true")
        from posjax.encodings.lape import LapeOptions

        LapeOptions(base_pe=self.lape_base).validate(None)  # a registered additive PE
        for part, template in (("model", _model_template()), ("train", _train_template())):
            for name in DECIDED[part]:
                if getattr(getattr(self, part), name) != getattr(template, name):
                    raise ValueError(f"{part}.{name} is decided per cell by the experiment (PE "
                                     f"row: pes=, widths: train_max_length / test_factor, "
                                     f"logging: train.steps); it cannot be set")
        from posjax import encodings

        for t in self.tasks:
            if t not in alg.TASKS:
                raise ValueError(f"unknown task {t!r}; tasks: {', '.join(alg.TASKS)}")
        if self.schedule_span < 1:
            raise ValueError(f"schedule_span must be >= 1, got {self.schedule_span}")
        known = set(encodings.names())
        for p in self.pes:
            if p not in known and p not in SCHEDULE_PES:
                raise ValueError(f"unknown PE {p!r}; registered: {', '.join(sorted(known))}; "
                                 f"schedules: {', '.join(SCHEDULE_PES)}")


QUICK = dict(tasks=("copy",), pes=QUICK_PES, train_max_length=8, n_train=4000, per_length=32,
             eval_batch=512, greedy_check_per_length=1, greedy_check_pes=("none", "rope", "alibi"),
             seeds=3,
             model=dataclasses.replace(_model_template(), num_layers=2, d_model=64, num_heads=4,
                                       d_ff=128),
             train=dataclasses.replace(_train_template(), steps=500, batch_size=64,
                                       learning_rate=3e-3, warmup_steps=50))


PRESETS = {
    "quick": LengthGeneralizationConfig(**QUICK),
    # one H200 in <= 8 min: copy and reverse, the reference PEs, the paper-sized decoder
    "gpu": LengthGeneralizationConfig(
        tasks=("copy", "reverse"), pes=("none", "learned", "sinusoidal", "rope", "alibi", "t5"),
        seeds=3, train=dataclasses.replace(_train_template(), steps=3000)),
    "paper": LengthGeneralizationConfig(),
}
