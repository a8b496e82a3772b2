"""Fine-tune a pretrained encoder with its positional encoding swapped (arXiv 2604.05217).

    python -m experiments.finetune_pe [--preset quick|gpu|paper] [--pretrained bert-base-uncased]
        [--dataset sst2|imdb|text|word_order] [--pes learned,mds,sinusoidal,rope,alibi,none]
        [--data-dir DIR] [--seeds N] [--out DIR] [--set key=value ...]
                                 (e.g. --set train.steps=1000 max_len=128 pe_scale=none)

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
field of :class:`~experiments.finetune_pe.config.FinetunePEConfig`,
the optimiser's dotted: ``train.steps=3``):

* ``quick``: offline. A tiny random BERT checkpoint in the Hugging Face layout and a generated
  labelled corpus (a polarity word, flipped by a ``not`` right before it, plus distractor
  ``not``s elsewhere: word order matters, and a bag of words tops out at 75 %) are written
  under ``OUT``; 400 steps per run, 3 seeds; about 10 minutes on 2 CPU cores.
* ``gpu``: bert-base-uncased on SST-2, 6 PEs x 3 seeds, sized for one H200 in about 8 minutes
  (bfloat16, max_len 64, 500 steps of batch 32 per run).
* ``paper``: 3 epochs of SST-2 (or IMDB with max_len 512) at batch 32, learning rate 2e-5.

Offline machines: ``--pretrained`` (alias ``--model``) takes a local checkpoint directory
(config.json, model.safetensors, vocab.txt or tokenizer.json) and ``--data-dir`` a directory of ``train``/``validation`` files (see
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
                                parse_set, preset_name, run_cli, versions, write_json)
from experiments.finetune_pe.config import PES, FinetunePEConfig, make_config, write_quick_assets
from experiments.finetune_pe.report import report, summarise, table


def geometry(cfg: FinetunePEConfig, prep: Any, hf: dict) -> tuple[dict[str, dict], np.ndarray]:
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
        table = np.asarray(position_table(cfg.pretrained), np.float64)[:n]
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


def table_norm(cfg: FinetunePEConfig) -> float:
    """Mean row norm of the checkpoint's position table over positions 0..max_len-1."""
    from posjax.pretrained import position_table

    table = np.asarray(position_table(cfg.pretrained), np.float64)[:cfg.max_len]
    return float(np.linalg.norm(table, axis=1).mean())


def finetune_cell(cfg: FinetunePEConfig, prep: Any, pe: str, seed: int, coords: np.ndarray
                  ) -> dict[str, Any]:
    """Fine-tune the checkpoint with ``pe`` (one seed); the JSON-ready row."""
    from posjax.encodings.mds import mds_model_coords
    from posjax.pretrained import load_hf, param_count
    from posjax.training import (ArrayBatches, classification_loss, evaluate_classifier,
                                 train)

    options = None
    target = table_norm(cfg) if cfg.pe_scale == "match" else None
    if pe == "mds":
        table = mds_model_coords(coords, cfg.max_len, prep.model_offset, cfg.mds_scale)
        if target is not None:
            table = table * (target / float(np.linalg.norm(table, axis=1).mean()))
        options = {"coords": table, "rank": int(table.shape[1]), "trainable": cfg.mds_trainable}
    elif pe == "sinusoidal" and target is not None:
        from posjax.pretrained import read_config, resolve
        d = int(read_config(resolve(cfg.pretrained))["hidden_size"])
        options = {"scale": target / math.sqrt(d / 2)}  # a unit sinusoid row has norm sqrt(d/2)
    model, config = load_hf(cfg.pretrained, head="classifier", num_classes=prep.num_classes,
                            pe=None if pe == "learned" else pe, pe_options=options,
                            dtype=cfg.dtype, seed=seed)
    if config.max_len < cfg.max_len:
        raise ValueError(f"max_len={cfg.max_len} exceeds the checkpoint's {config.max_len} "
                         f"positions")
    tcfg = dataclasses.replace(cfg.train, seed=seed, log_every=max(1, min(100, cfg.train.steps)))
    t0 = time.perf_counter()
    batches = ArrayBatches(prep.train, tcfg.batch_size, seed=seed)
    result = train(model, classification_loss, batches, tcfg, desc=f"{pe} s{seed}")
    test = evaluate_classifier(model, prep.test)
    return {"pe": pe, "seed": seed, "test_accuracy": test["accuracy"], "test_loss": test["loss"],
            "train_loss_last": (result.metrics or {}).get("loss"),
            "params": param_count(model), "seconds": time.perf_counter() - t0}


def run(cfg: FinetunePEConfig, out_dir: str, *, preset: str = "custom", log=print
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
        tokenizer=cfg.tokenizer or (None if cfg.vocab_file else resolve(cfg.pretrained)),
        tokenizer_vocab=cfg.tokenizer_vocab, hub_timeout=cfg.hub_timeout)
    if prep.train is None:
        raise ValueError("fine-tuning needs labelled train and validation/test files")
    hf, _, _ = load_checkpoint(cfg.pretrained)
    stress, coords = geometry(cfg, prep, hf)
    log(f"geometry: n={stress['none']['n']}, MDS rank {stress['mds']['rank']}")
    record = dataclasses.asdict(cfg)
    record["train"].pop("progress")
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
        f.write(report(results, int(prep.test["labels"].shape[0])))
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser("Fine-tune a pretrained encoder with each PE swapped in "
                          "(arXiv 2604.05217)", default_out="runs/finetune_pe")
    p.add_argument("--pretrained", "--model", dest="pretrained", default=None,
                   help="checkpoint directory or hub id "
                   "(default bert-base-uncased; quick: a generated tiny checkpoint)")
    p.add_argument("--dataset", default=None,
                   help="sst2, imdb, text, or word_order (original vs locally shuffled stdlib "
                   "docstring sentences, a stand-in for SST-2/IMDB; quick: generated)")
    p.add_argument("--pes", default=None,
                   help=f"comma-separated PEs (default {','.join(PES)}; same as --set pes=...)")
    p.add_argument("--data-dir", default=None, help="local split files (offline)")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json, vocab.txt or a directory")
    p.add_argument("--progress", action="store_true", help="show training progress bars")
    args = p.parse_args(argv)
    preset = preset_name(args)
    overrides = config_overrides(FinetunePEConfig, args,
                                 ("pretrained", "dataset", "data_dir", "tokenizer"))
    if args.progress:
        overrides.setdefault("train", {})["progress"] = True
    if args.pes is not None:
        overrides.update(parse_set(FinetunePEConfig, [f"pes={args.pes}"]))
    if preset == "quick" and not {"pretrained", "data_dir", "dataset"} & set(overrides):
        ckpt, data = write_quick_assets(args.out)
        overrides.update(pretrained=ckpt, data_dir=data, dataset="text")
    cfg = make_config(preset, **overrides)
    results = run(cfg, args.out, preset=preset)
    print()
    print(table(results["summary"]))
    print(f"\nreport: {os.path.join(args.out, 'report.md')}  ({results['seconds']:.0f} s)")
    return results


if __name__ == "__main__":
    run_cli(main)
