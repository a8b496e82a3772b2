"""Configuration of ``experiments.finetune_pe``: :class:`FinetunePEConfig`, the presets and the
quick preset's generated assets (a tiny BERT checkpoint and an order-dependent corpus)."""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np

from experiments.common import apply_overrides
from posjax.training.config import TrainConfig

PES = ("learned", "mds", "sinusoidal", "rope", "alibi", "none")


def _train(**changes: Any) -> TrainConfig:
    """The fine-tuning optimiser: AdamW, cosine decay after a 10 % linear warm-up."""
    base = dict(steps=500, batch_size=32, optimizer="adamw", learning_rate=3e-5,
                weight_decay=0.01, schedule="cosine", warmup_fraction=0.1, progress=False)
    return TrainConfig(**{**base, **changes})


@dataclasses.dataclass(frozen=True)
class FinetunePEConfig:
    """Every option of the fine-tuning experiment. ``--set`` keys: the experiment's own fields
    flat (``pes=``, ``max_len=``, ``pe_scale=``), the optimiser's dotted (``train.steps=3``,
    ``train.learning_rate=1e-4``). ``seeds`` is a count (seeds 0..seeds-1); ``train.seed`` and
    ``train.log_every`` are set per run (the seed, ``min(100, steps)``), so ``--set`` of another
    value is refused.

    The model is the checkpoint's (``pretrained``: a directory or hub id, read by
    :func:`posjax.pretrained.load_hf`), so there is no ``model.`` config to set: its
    ``TransformerConfig`` comes from the checkpoint, ``dtype`` is the compute dtype.
    """

    pretrained: str = "bert-base-uncased"
    dataset: str = "sst2"
    pes: tuple[str, ...] = PES
    seeds: int = 3
    data_dir: str | None = None
    text_column: str | None = None
    tokenizer: str | None = None
    vocab_file: str | None = None
    hub_timeout: float = 5.0
    max_len: int = 64
    keep_special: bool = True
    train_examples: int | None = None
    test_examples: int | None = None
    data_seed: int = 0
    tokenizer_vocab: int = 8000
    dtype: str = "bfloat16"
    metric: str = "chord"
    mds_eps: float = 1e-3
    mds_scale: float = 1.0
    mds_trainable: str = "both"
    pe_scale: str = "match"
    train: TrainConfig = dataclasses.field(default_factory=_train)

    @property
    def num_positions(self) -> int:
        return self.max_len

    def __post_init__(self):
        if self.dataset not in ("sst2", "imdb", "text", "word_order"):
            raise ValueError(f"--dataset must be sst2, imdb, text or word_order, got "
                             f"{self.dataset!r}")
        bad = sorted(set(self.pes) - set(PES))
        if bad or not self.pes:
            raise ValueError(f"unknown PE(s) {bad}; choose from {', '.join(PES)}")
        if self.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {self.seeds}")
        if self.pe_scale not in ("match", "none"):
            raise ValueError(f"pe_scale must be 'match' or 'none', got {self.pe_scale!r}")
        template = _train()
        for name in ("seed", "log_every"):  # replaced per run (finetune_cell)
            if getattr(self.train, name) != getattr(template, name):
                raise ValueError(f"train.{name} is set per run (the seed, min(100, steps)); "
                                 f"it cannot be set")


PRESETS = {
    # offline, 2 CPU cores: a generated tiny checkpoint and corpus (see write_quick_assets)
    "quick": FinetunePEConfig(dataset="text", max_len=24, dtype="float32",
                              train=_train(steps=400, learning_rate=3e-3)),
    # one H200 in about 8 minutes: bert-base-uncased on SST-2, 500 steps per run
    "gpu": FinetunePEConfig(max_len=64, dtype="bfloat16", train=_train(steps=500)),
    # 3 epochs of SST-2 at batch 32, learning rate 2e-5
    "paper": FinetunePEConfig(max_len=64, dtype="bfloat16",
                              train=_train(steps=6300, learning_rate=2e-5)),
}
PAPER_IMDB = {"max_len": 512, "train": {"steps": 2350, "batch_size": 32}}  # 3 epochs of 25k

QUICK_WORDS = ("the", "movie", "film", "plot", "actor", "was", "is", "quite", "really", "and",
               "but", "very", "story", "music", "ending", "a", "not", "good", "bad", "great",
               "awful")


def make_config(preset: str = "paper", **overrides: Any) -> FinetunePEConfig:
    """The configuration of ``preset`` (the paper preset on IMDB: max_len 512, 3 epochs) with
    ``overrides`` applied: flat fields by name, the optimiser's as ``train={...}`` (the form
    :func:`experiments.common.parse_set` returns for ``train.steps=3``)."""
    if preset not in PRESETS:
        raise ValueError(f"--preset must be one of {tuple(PRESETS)}, got {preset!r}")
    base = PRESETS[preset]
    if preset == "paper" and overrides.get("dataset") == "imdb":
        base = apply_overrides(base, PAPER_IMDB)
    fields = {f.name for f in dataclasses.fields(FinetunePEConfig)}
    unknown = sorted(set(overrides) - fields)
    nested = [k for k in unknown if k in {f.name for f in dataclasses.fields(TrainConfig)}]
    if nested:
        raise ValueError(f"unknown option {nested[0]!r}: did you mean train.{nested[0]}?")
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(sorted(fields))}")
    return apply_overrides(base, overrides)


def negation_corpus(num: int, *, seed: int) -> tuple[list[str], list[int]]:
    """Generated sentences labelled by an order-dependent rule.

    Each sentence holds one polarity word (good/great: 1, bad/awful: 0) among filler words; with
    probability 1/2 a ``not`` directly before it flips the label, and with probability 1/2 a
    distractor ``not`` sits elsewhere (never right before it). The label depends on where the
    ``not`` is, so an encoder without positions cannot reach 100 %.
    """
    rng = np.random.default_rng(seed)
    filler = [w for w in QUICK_WORDS if w not in ("not", "good", "bad", "great", "awful")]
    texts, labels = [], []
    for _ in range(num):
        words = list(rng.choice(filler, int(rng.integers(6, 14))))
        polar = str(rng.choice(["good", "great", "bad", "awful"]))
        label = int(polar in ("good", "great"))
        at = int(rng.integers(2, len(words)))
        negate = bool(rng.random() < 0.5)
        words.insert(at, polar)
        if negate:
            words.insert(at, "not")
            label = 1 - label
        if rng.random() < 0.5:  # a distractor not, never right before the polarity word
            spots = [i for i in range(len(words) + 1)
                     if i != words.index(polar) and (i == 0 or words[i - 1] != "not")]
            words.insert(int(rng.choice(spots)), "not")
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def write_quick_assets(out_dir: str, seed: int = 0) -> tuple[str, str]:
    """The quick preset's tiny checkpoint and generated corpus under ``out_dir``."""
    from posjax.pretrained import write_tiny_checkpoint

    ckpt = write_tiny_checkpoint(os.path.join(out_dir, "tiny-bert"), "bert", words=QUICK_WORDS,
                                 hidden_size=64, num_layers=2, num_heads=4, intermediate_size=128,
                                 max_positions=32, seed=seed)
    data = os.path.join(out_dir, "corpus")
    os.makedirs(data, exist_ok=True)
    for split, n, s in (("train", 2000, seed + 1), ("test", 600, seed + 2)):
        texts, labels = negation_corpus(n, seed=s)
        with open(os.path.join(data, f"{split}.jsonl"), "w") as f:
            f.writelines(json.dumps({"text": t, "label": y}) + "\n" for t, y in zip(texts, labels))
    return str(ckpt), data
