"""Configuration of ``experiments.long_context``: :class:`LongContextConfig`, its presets and
the PE lists."""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from posjax.models import TransformerConfig
from posjax.training import TrainConfig

DEFAULT_OUT = "runs/long_context"
ROPE_SCALINGS = ("rope_linear", "rope_ntk", "rope_yarn", "rope_llama3", "longrope")
QUICK_PES = ("none", "sinusoidal", "rope", "alibi", "t5", "fire")
CPU_PES = QUICK_PES + ("learned", "kerple_log", "kerple_power", "xpos", "hope", "pope",
                       "sandwich", "p_rope")
# Every other causal PE of length_generalization's catalogue is one `--set pes=` away.
OTHER_PES = ("fope", "dynamic_position_bias", "polar_pope", "cayley_string", "liere", "comrope",
             "cope", "fox", "dape", "path", "mrope", "cape", "hype", "gridpe", "tupe", "cpe",
             "lape", "complex", "positional_attention", "rope_plus_abs", "mla", "random_fixed")


def _model(**changes: Any):
    """The decoder: causal, pre-LN, no dropout; ``vocab_size``, ``max_len`` (8L), ``pe`` and
    ``pe_options`` are decided per PE by :func:`model_config`."""
    base = dict(num_layers=2, d_model=64, num_heads=4, d_ff=256, causal=True, pre_norm=True,
                dropout=0.0)
    return TransformerConfig(**{**base, **changes})


def _train(**changes: Any):
    """AdamW, linear warm-up then cosine decay, clipping at 1; ``log_every`` / ``checkpoint_every``
    are decided by ``steps`` (a tenth, a third)."""
    base = dict(steps=2000, batch_size=32, optimizer="adamw", learning_rate=3e-3,
                schedule="cosine", warmup_steps=100, grad_clip=1.0, progress=True)
    return TrainConfig(**{**base, **changes})


_PER_PE = ("vocab_size", "max_len", "pe", "pe_options")  # model fields decided per PE / corpus


@dataclasses.dataclass(frozen=True)
class LongContextConfig:
    """Every setting of a run (recorded in results.json). ``--set`` keys: these fields flat
    (``pes=``, ``train_length=``), the decoder's and the optimiser's dotted (``model.d_model=``,
    ``model.num_layers=``, ``train.steps=``, ``train.learning_rate=``).

    Attributes:
      dataset / text_file / vocab_size / corpus_tokens / data_seed: the corpus (data.py);
        ``vocab_size`` is the tokenizer's (the model's is it + 2 markers).
      pes, scalings: trained PEs; RoPE scalings evaluated on the trained RoPE models.
      train_length: L. eval_factors: evaluated lengths in units of L.
      retrieval_fraction: share of training rows that are passkey / needle rows.
      key_length, num_symbols, num_needles: the retrieval tasks; depths, trials: their grid.
      eval_rows: held-out stream rows of 8L + 1 tokens (perplexity); attention_rows of them
        for the attention diagnostics.
      geometry_windows: stream windows per length for the positional distributions (stress).
      model: the decoder (:class:`posjax.models.TransformerConfig`); its ``vocab_size``,
        ``max_len``, ``pe`` and ``pe_options`` are set per PE and refused here.
      train: the optimiser (:class:`posjax.training.TrainConfig`) of every ensemble.
    """

    dataset: str = "stdlib"
    text_file: str | None = None
    vocab_size: int = 2000
    corpus_tokens: int = 400_000
    data_seed: int = 0
    pes: tuple[str, ...] = CPU_PES
    scalings: tuple[str, ...] = ROPE_SCALINGS
    train_length: int = 32
    eval_factors: tuple[int, ...] = (1, 2, 4, 8)
    retrieval_fraction: float = 0.3
    key_length: int = 2
    num_symbols: int = 16
    num_needles: int = 2
    depths: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    trials: int = 16
    eval_rows: int = 16
    attention_rows: int = 4
    geometry_windows: int = 1500  # the stdlib stream holds ~1,530 windows of 128 tokens
    seeds: int = 3
    model: TransformerConfig = dataclasses.field(default_factory=_model)
    train: TrainConfig = dataclasses.field(default_factory=_train)

    def __post_init__(self):
        from posjax import encodings

        if self.dataset not in ("stdlib", "text", "synthetic"):
            raise ValueError(f"dataset must be stdlib, text or synthetic, got {self.dataset!r}")
        if self.dataset == "text" and not (self.text_file and os.path.isfile(self.text_file)):
            raise ValueError(f"dataset 'text' needs text_file=PATH of an existing file, got "
                             f"{self.text_file!r}")
        if self.dataset != "text" and self.text_file is not None:
            raise ValueError(f"text_file is read only with dataset=text (dataset is "
                             f"{self.dataset!r})")
        if self.seeds < 1 or self.train.steps < 1 or self.train_length < 8:
            raise ValueError("need seeds >= 1, train.steps >= 1 and train_length >= 8")
        if 1 not in self.eval_factors or min(self.eval_factors) < 1:
            raise ValueError(f"eval_factors must include 1 and be >= 1, got {self.eval_factors}")
        if not 0 <= self.retrieval_fraction < 1:
            raise ValueError(f"retrieval_fraction must be in [0, 1), got {self.retrieval_fraction}")
        known = set(encodings.names())
        for p in self.pes + self.scalings:
            if p not in known:
                raise ValueError(f"unknown PE {p!r}; registered: {', '.join(sorted(known))}")
        if self.scalings and "rope" not in self.pes:
            raise ValueError("the RoPE scalings are applied to the trained RoPE models: add "
                             "rope to pes or pass an empty list (--set scalings=)")
        for name in ("log_every", "checkpoint_every"):
            if getattr(self.train, name) != getattr(_train(), name):
                raise ValueError(f"train.{name} is decided by train.steps (log every tenth, "
                                 f"checkpoint every third); it cannot be set")
        default = _model()
        for name in _PER_PE:
            if getattr(self.model, name) != getattr(default, name):
                raise ValueError(f"model.{name} is decided per PE and corpus (pes=, "
                                 f"train_length=, vocab_size=); it cannot be set")


QUICK = LongContextConfig(pes=QUICK_PES, corpus_tokens=200_000, vocab_size=1000, trials=12,
                          geometry_windows=1000, train=_train(steps=300))
PRESETS = {"quick": QUICK, "cpu": LongContextConfig(),
           "paper": LongContextConfig(seeds=5, train=_train(steps=5000)),
           "gpu": LongContextConfig(pes=CPU_PES + OTHER_PES, train_length=64,
                                    corpus_tokens=2_000_000, eval_rows=32, trials=32,
                                    geometry_windows=750,  # of 4L = 256 tokens
                                    model=_model(d_model=128, num_layers=4, d_ff=512),
                                    train=_train(steps=3000, batch_size=64))}
