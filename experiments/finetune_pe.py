"""Fine-tune a pretrained encoder with its positional encoding swapped (arXiv 2604.05217).

    python -m experiments.finetune_pe [--preset quick|gpu|paper] [--model bert-base-uncased]
        [--dataset sst2|imdb|text] [--pes learned,mds,sinusoidal,rope,alibi,none]
        [--data-dir DIR] [--seeds N] [--out DIR] [--set key=value ...]
                                 (e.g. --set steps=1000 max_len=128 pe_scale=none)

For every PE the checkpoint is loaded with :func:`posjax.pretrained.load_hf` (``learned``: the
checkpoint's own position table; the others swapped in, every other weight kept), a
classification head is put on the ``[CLS]`` token (BERT's pooler) and the whole model is
fine-tuned; test accuracy is reported as mean ± 95 % Student-t interval over seeds, next to
the stress of the PE against the Hellinger geometry of the training corpus (raw and at the
optimal scale; Eq. (4) of the paper, no square root). The MDS PE is built from the rank-r_eps
MDS coordinates of that geometry (Algorithm 1 of the paper). Additive PEs swapped in (mds,
sinusoidal) are rescaled so that their mean row norm over the used positions equals that of the
checkpoint's own table (``pe_scale="match"``; "none" keeps them as defined: a unit sinusoid has
row norm sqrt(d/2), tens of times a pretrained table's, which drowns the token embeddings
before the embedding LayerNorm). Each PE is compared with
``learned`` by Welch's t interval on the accuracy difference: "higher"/"lower" when the 95 %
interval excludes 0, else "inconclusive".

Presets (``--preset``, default paper; ``--quick`` is ``--preset quick``; ``--set`` overrides any
field of :class:`FinetuneConfig`):

* ``quick``: offline. A tiny random BERT checkpoint in the Hugging Face layout and a generated
  labelled corpus (a polarity word, flipped by a ``not`` right before it, plus distractor
  ``not``s elsewhere: word order matters, and a bag of words tops out at 75 %) are written
  under ``OUT``; 400 steps per run, 3 seeds; about 10 minutes on 2 CPU cores.
* ``gpu``: bert-base-uncased on SST-2, 6 PEs x 3 seeds, sized for one H200 in about 8 minutes
  (bfloat16, max_len 64, 500 steps of batch 32 per run).
* ``paper``: 3 epochs of SST-2 (or IMDB with max_len 512) at batch 32, learning rate 2e-5.

Offline machines: ``--model`` takes a local checkpoint directory (config.json, model.safetensors,
vocab.txt or tokenizer.json) and ``--data-dir`` a directory of ``train``/``validation`` files (see
README, "pretrained checkpoints").
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any, Sequence

import numpy as np

from experiments.common import (CI_METHOD, CellStore, config_overrides, experiment_parser,
                                fmt_ci, markdown_table, mean_ci, parse_set, preset_name, run_cli,
                                versions, welch_ci, write_json)

PES = ("learned", "mds", "sinusoidal", "rope", "alibi", "none")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """Every option of the fine-tuning experiment (field names shared with the stress
    experiment's data preparation). ``seeds`` is a count (seeds 0..seeds-1)."""

    model: str = "bert-base-uncased"
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
    steps: int = 500
    batch_size: int = 32
    learning_rate: float = 3e-5
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    dtype: str = "bfloat16"
    metric: str = "chord"
    mds_eps: float = 1e-3
    mds_scale: float = 1.0
    mds_trainable: str = "both"
    pe_scale: str = "match"
    progress: bool = False

    @property
    def num_positions(self) -> int:
        return self.max_len

    @property
    def pretrained(self) -> str:
        return self.model

    def __post_init__(self):
        if self.dataset not in ("sst2", "imdb", "text"):
            raise ValueError(f"--dataset must be sst2, imdb or text, got {self.dataset!r}")
        bad = sorted(set(self.pes) - set(PES))
        if bad or not self.pes:
            raise ValueError(f"unknown PE(s) {bad}; choose from {', '.join(PES)}")
        if self.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {self.seeds}")
        if self.pe_scale not in ("match", "none"):
            raise ValueError(f"pe_scale must be 'match' or 'none', got {self.pe_scale!r}")


PRESETS = {
    # offline, 2 CPU cores: a generated tiny checkpoint and corpus (see write_quick_assets)
    "quick": FinetuneConfig(dataset="text", max_len=24, steps=400, batch_size=32,
                            learning_rate=3e-3, warmup_fraction=0.1, dtype="float32"),
    # one H200 in about 8 minutes: bert-base-uncased on SST-2, 500 steps per run
    "gpu": FinetuneConfig(max_len=64, steps=500, batch_size=32, learning_rate=3e-5,
                          dtype="bfloat16"),
    # 3 epochs of SST-2 at batch 32, learning rate 2e-5
    "paper": FinetuneConfig(max_len=64, steps=6300, batch_size=32, learning_rate=2e-5,
                            dtype="bfloat16"),
}
PAPER_IMDB = dict(max_len=512, steps=2350, batch_size=32)  # 3 epochs of 25k reviews

QUICK_WORDS = ("the", "movie", "film", "plot", "actor", "was", "is", "quite", "really", "and",
               "but", "very", "story", "music", "ending", "a", "not", "good", "bad", "great",
               "awful")


def make_config(preset: str = "paper", **overrides: Any) -> FinetuneConfig:
    """The configuration of ``preset`` (the paper preset on IMDB: max_len 512, 3 epochs) with
    ``overrides`` applied."""
    if preset not in PRESETS:
        raise ValueError(f"--preset must be one of {tuple(PRESETS)}, got {preset!r}")
    base = PRESETS[preset]
    if preset == "paper" and overrides.get("dataset") == "imdb":
        base = dataclasses.replace(base, **PAPER_IMDB)
    fields = {f.name for f in dataclasses.fields(FinetuneConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(sorted(fields))}")
    return dataclasses.replace(base, **overrides)


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
    import json

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


def geometry(cfg: FinetuneConfig, prep: Any, hf: dict) -> tuple[dict[str, dict], np.ndarray]:
    """Stress of every PE against the corpus geometry, and the MDS coordinates ``[n, r]``."""
    import jax

    from posjax.analysis.encoding_geometry import encoding_distances
    import posjax.geometry as geo
    from posjax.geometry.stress_targets import stress_pair
    from posjax.pretrained import position_table

    d = int(hf["hidden_size"])
    heads = int(hf["num_attention_heads"])
    with jax.enable_x64(True):
        P, _ = geo.positional_distributions(
            prep.geo_tokens, lengths=prep.geo_lengths, vocab_size=prep.vocab_size,
            num_positions=cfg.max_len, pad_id=prep.pad_id, keep_special=True,
            on_empty="truncate")
        D = np.asarray(geo.hellinger_matrix(np.asarray(P), metric=cfg.metric), np.float64)
        n = D.shape[0]
        mds = geo.classical_mds(D, rank_rule=("energy", cfg.mds_eps))
        coords = np.asarray(mds.coords, np.float64)
        table = np.asarray(position_table(cfg.model), np.float64)[:n]
        m = min(n, table.shape[0])
        distances = {
            "learned": geo.dist_learned(table[:m]),
            "mds": geo.dist_learned(coords),
            "sinusoidal": encoding_distances("sinusoidal", n, dim=d),
            "rope": encoding_distances("rope", n, head_dim=d // heads, mode="kernel"),
            "alibi": encoding_distances("alibi", n),
            "none": encoding_distances("nope", n),
        }
        stress = {pe: {**stress_pair(D[:E.shape[0], :E.shape[0]], np.asarray(E, np.float64)),
                       "n": int(E.shape[0])} for pe, E in distances.items()}
    stress["mds"]["rank"] = int(coords.shape[1])
    return stress, coords


def table_norm(cfg: FinetuneConfig) -> float:
    """Mean row norm of the checkpoint's position table over positions 0..max_len-1."""
    from posjax.pretrained import position_table

    table = np.asarray(position_table(cfg.model), np.float64)[:cfg.max_len]
    return float(np.linalg.norm(table, axis=1).mean())


def finetune_cell(cfg: FinetuneConfig, prep: Any, pe: str, seed: int, coords: np.ndarray
                  ) -> dict[str, Any]:
    """Fine-tune the checkpoint with ``pe`` (one seed); the JSON-ready row."""
    from posjax.encodings.mds import mds_model_coords
    from posjax.pretrained import load_hf, param_count
    from posjax.training import (ArrayBatches, TrainConfig, classification_loss,
                                 evaluate_classifier, train)

    options = None
    target = table_norm(cfg) if cfg.pe_scale == "match" else None
    if pe == "mds":
        table = mds_model_coords(coords, cfg.max_len, prep.model_offset, cfg.mds_scale)
        if target is not None:
            table = table * (target / float(np.linalg.norm(table, axis=1).mean()))
        options = {"coords": table, "rank": int(table.shape[1]), "trainable": cfg.mds_trainable}
    elif pe == "sinusoidal" and target is not None:
        from posjax.pretrained import read_config, resolve
        d = int(read_config(resolve(cfg.model))["hidden_size"])
        options = {"scale": target / math.sqrt(d / 2)}  # a unit sinusoid row has norm sqrt(d/2)
    model, config = load_hf(cfg.model, head="classifier", num_classes=prep.num_classes,
                            pe=None if pe == "learned" else pe, pe_options=options,
                            dtype=cfg.dtype, seed=seed)
    if config.max_len < cfg.max_len:
        raise ValueError(f"max_len={cfg.max_len} exceeds the checkpoint's {config.max_len} "
                         f"positions")
    tcfg = TrainConfig(steps=cfg.steps, batch_size=cfg.batch_size, optimizer="adamw",
                       learning_rate=cfg.learning_rate, weight_decay=cfg.weight_decay,
                       schedule="cosine", warmup_fraction=cfg.warmup_fraction, seed=seed,
                       log_every=max(1, min(100, cfg.steps)), progress=cfg.progress)
    t0 = time.perf_counter()
    result = train(model, classification_loss, ArrayBatches(prep.train, cfg.batch_size, seed=seed),
                   tcfg, desc=f"{pe} s{seed}")
    test = evaluate_classifier(model, prep.test)
    return {"pe": pe, "seed": seed, "test_accuracy": test["accuracy"], "test_loss": test["loss"],
            "train_loss_last": (result.metrics or {}).get("loss"),
            "params": param_count(model), "seconds": time.perf_counter() - t0}


def summarise(rows: list[dict], stress: dict[str, dict], pes: Sequence[str]) -> list[dict]:
    """One line per PE: stress, accuracy mean +- 95 % CI over seeds (with the per-seed values),
    and the difference to ``learned`` with its 95 % Welch interval: "higher"/"lower" when the
    interval excludes 0, else "inconclusive"."""
    acc = {pe: [r["test_accuracy"] for r in sorted(rows, key=lambda r: r["seed"]) if r["pe"] == pe]
           for pe in pes}
    out = []
    for pe in pes:
        line = {"pe": pe, "seeds": len(acc[pe]), "accuracy": mean_ci(acc[pe]),
                "stress_raw": stress[pe]["raw"], "stress_optimal": stress[pe]["optimal"]}
        if pe != "learned" and "learned" in acc:
            diff = welch_ci(acc[pe], acc["learned"])
            line["vs_learned"] = {**diff, "direction": (
                "inconclusive" if not np.isfinite(diff["half"]) else
                "higher" if diff["lo"] > 0 else "lower" if diff["hi"] < 0 else "inconclusive")}
        out.append(line)
    return out


def table(summary: list[dict]) -> str:
    """The report table (accuracy in %)."""
    body = []
    for s in summary:
        vs = s.get("vs_learned")
        body.append([s["pe"], f"{s['stress_raw']:.4g}", f"{s['stress_optimal']:.4g}",
                     fmt_ci(s["accuracy"], 100), s["seeds"],
                     "—" if vs is None else f"{fmt_ci(vs, 100)} {vs['direction']}"])
    return markdown_table(["PE", "stress σ_raw", "stress σ*", "accuracy % (mean ± 95% CI)",
                           "seeds", "Δ vs learned, points (95% Welch CI)"], body)


def run(cfg: FinetuneConfig, out_dir: str, *, preset: str = "custom", log=print
        ) -> dict[str, Any]:
    """Run the experiment into ``out_dir`` (results.json, report.md); returns the results.
    ``preset`` is the name recorded with the configuration."""
    from posjax.data.classification_corpus import text_classification_corpus
    from posjax.pretrained import load_checkpoint, resolve

    t0 = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    prep = text_classification_corpus(  # the checkpoint's tokenizer unless one is named
        cfg.dataset, out_dir, num_positions=cfg.num_positions, max_len=cfg.max_len,
        keep_special=cfg.keep_special, train_examples=cfg.train_examples,
        test_examples=cfg.test_examples, seed=cfg.data_seed, data_dir=cfg.data_dir,
        text_column=cfg.text_column, vocab_file=cfg.vocab_file,
        tokenizer=cfg.tokenizer or (None if cfg.vocab_file else resolve(cfg.model)),
        tokenizer_vocab=cfg.tokenizer_vocab, hub_timeout=cfg.hub_timeout)
    if prep.train is None:
        raise ValueError("fine-tuning needs labelled train and validation/test files")
    hf, _, _ = load_checkpoint(cfg.model)
    stress, coords = geometry(cfg, prep, hf)
    log(f"geometry: n={stress['none']['n']}, MDS rank {stress['mds']['rank']}")
    record = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "progress"}
    store = CellStore(out_dir, {"part": "finetune", **record, "pes": None, "seeds": None})
    rows = []
    for pe in cfg.pes:
        for seed in range(cfg.seeds):
            row = store.compute({"pe": pe, "seed": seed},
                                lambda pe=pe, seed=seed: finetune_cell(cfg, prep, pe, seed, coords))
            rows.append(row)
            log(f"{pe:>10s} seed {seed}: accuracy {row['test_accuracy']:.3f} "
                f"({row['seconds']:.1f} s)")
    summary = summarise(rows, stress, cfg.pes)
    results = {"experiment": "finetune_pe", "paper": "arXiv 2604.05217", "preset": preset,
               "options": record, "seeds": list(range(cfg.seeds)), "ci_method": CI_METHOD,
               "versions": versions(), "data": prep.info, "stress": stress, "rows": rows,
               "summary": summary, "seconds": time.perf_counter() - t0}
    write_json(os.path.join(out_dir, "results.json"), results)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(f"# Fine-tuning {cfg.model} with swapped PEs ({cfg.dataset}, preset "
                f"{preset})\n\n{table(summary)}\n\nStress: Eq. (4) of arXiv 2604.05217 (no "
                f"square root) of each PE's distances against the Hellinger ({cfg.metric}) "
                f"geometry of the training corpus, n = {stress['none']['n']} positions; learned = "
                f"the checkpoint's own table. Accuracy on {prep.test['labels'].shape[0]} test "
                f"examples, {cfg.seeds} seeds, {cfg.steps} steps of batch {cfg.batch_size}; "
                f"intervals: {CI_METHOD}; Δ vs learned: Welch's t interval on the difference "
                f"of mean accuracies.\n")
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser("Fine-tune a pretrained encoder with each PE swapped in "
                          "(arXiv 2604.05217)", default_out="runs/finetune_pe")
    p.add_argument("--model", default=None, help="checkpoint directory or hub id "
                   "(default bert-base-uncased; quick: a generated tiny checkpoint)")
    p.add_argument("--dataset", default=None, help="sst2, imdb or text (quick: generated)")
    p.add_argument("--pes", default=None,
                   help=f"comma-separated PEs (default {','.join(PES)}; same as --set pes=...)")
    p.add_argument("--data-dir", default=None, help="local split files (offline)")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json, vocab.txt or a directory")
    p.add_argument("--progress", action="store_true", help="show training progress bars")
    args = p.parse_args(argv)
    preset = preset_name(args)
    overrides = config_overrides(FinetuneConfig, args,
                                 ("model", "dataset", "data_dir", "tokenizer", "progress"))
    if args.pes is not None:
        overrides.update(parse_set(FinetuneConfig, [f"pes={args.pes}"]))
    if preset == "quick" and "model" not in overrides and "data_dir" not in overrides:
        model, data = write_quick_assets(args.out)
        overrides.update(model=model, data_dir=data, dataset="text")
    cfg = make_config(preset, **overrides)
    results = run(cfg, args.out, preset=preset)
    print()
    print(table(results["summary"]))
    print(f"\nreport: {os.path.join(args.out, 'report.md')}  ({results['seconds']:.0f} s)")
    return results


if __name__ == "__main__":
    run_cli(main)
