"""Length generalisation: train decoders on short algorithmic instances, test on longer ones.

Protocol (after Kazemnejad et al., "The Impact of Positional Encoding on
Length Generalization in Transformers", arXiv 2305.19466): decoder-only, causal, pre-LN models
(``TransformerConfig(causal=True)``, ``LanguageModel``) are trained on
``<bos> input <sep> target <eos>`` with instance lengths l in [1, L] (loss on the target tokens and
``<eos>`` only) and tested by exact match of the whole target for l in [1, 4L].

    python -m experiments.length_generalization [--preset quick|gpu|paper] [--seeds N] [--out DIR]
        [--set key=value ...]    (e.g. --set tasks=copy,reverse pes=none,rope,alibi train.steps=2000;
                                  a ~107M model: --set model.num_layers=12 model.d_model=768
                                  model.num_heads=12 model.d_ff=3072; a per-layer schedule:
                                  --set model.layer_types=sliding,full model.sliding_window=8)

The seeds of one (task, PE) train together as one ensemble (:func:`posjax.training.train_ensemble`;
each seed has its own training data, init and order). Writes ``DIR/results.json`` (every option,
interpretation, seed and version), ``DIR/report.md``, ``DIR/curves_<task>.png`` and one resumable
cell per (task, PE) under ``DIR/cells``; the training checkpoints under ``DIR/train`` make an
interrupted ensemble resume where it stopped. Accuracies are mean ± 95 % CI over seeds and the
NoPE verdict is decided by the CI of a per-seed difference.

Evaluation: greedy decoding with exact match is computed as "every target token (and ``<eos>``)
is the argmax given the gold prefix" in one causal forward pass
(:func:`posjax.training.lm_exact_match`) -- identical to greedy exact match (if greedy reproduces
the target, every step saw the gold prefix; conversely). Greedy decoding with
:func:`posjax.models.generate` (from a key/value cache when every PE of the model supports one,
else recomputing the sequence each step) cross-checks this on a sample of every test length
(``greedy_check_per_length``); the agreement is recorded.

Per-layer schedules (``posjax.models.schedules.PRESETS``: ``sched_llama4_irope``,
``sched_gemma3``, ``sched_rnope_swa``, ``sched_olmo3``; the bidirectional ``modernbert`` is
not a decoder) run as rows through ``--set pes=...``: the preset's layer pattern repeated to
``num_layers`` (a pattern longer than the model: one layer per kind, in pattern order), its PE
per layer kind, and its window / chunk (and Llama 4's temperature
``floor_scale``) set to ``schedule_span`` positions, so that the windowed layers are local at
these sequence lengths. They are in no preset's PE list (the quick preset is unchanged).

RoPE context-extension variants (``rope_linear``, ``rope_ntk``, ``rope_yarn``, ``rope_llama3``,
``longrope`` without searched per-pair factors, i.e. its attention factor alone) are
applied at test time to the trained RoPE model (``rope_scaling_mode="test_time"``, RoPE has no
parameters), with s = test width / train width and the original length = train width.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Sequence

import numpy as np
from flax import nnx

from experiments.common import experiment_parser, resolve_config, versions, write_json, CellStore
from experiments.length_generalization.config import (DEFAULT_OUT, LengthGeneralizationConfig,
                                                      PRESETS, ROPE_SCALINGS, SCHEDULE_PES)
from experiments.length_generalization.report import nope_claim, summarise, write_outputs
from posjax.data import algorithmic as alg
from posjax.models import TransformerConfig, rebuild_with_config


# --- widths, model, PE options ---------------------------------------------------------------
def task_options(cfg: LengthGeneralizationConfig) -> dict[str, Any]:
    return {"digit_order": cfg.addition_digit_order, "scratchpad": cfg.parity_scratchpad}


def widths(cfg: LengthGeneralizationConfig, task: str) -> tuple[int, int]:
    """Padded sequence widths (train, test)."""
    sp = cfg.parity_scratchpad
    return (alg.sequence_length(task, cfg.train_max_length, scratchpad=sp),
            alg.sequence_length(task, cfg.test_factor * cfg.train_max_length, scratchpad=sp))


def pe_options(pe: str, cfg: LengthGeneralizationConfig, train_width: int, test_width: int) -> dict[str, Any]:
    """The options each PE gets in this experiment (recorded per cell)."""
    factor = test_width / train_width
    if pe == "learned":
        return {"num_positions": test_width}
    if pe == "hope":
        return {"train_length": train_width} if cfg.hope_train_length == "train_width" else {}
    if pe == "fope":  # clip the frequencies that do not complete a turn within training
        return {"train_length": train_width}
    if pe == "lape":
        return {"base_pe": cfg.lape_base}
    if pe == "rope_linear":
        return {"factor": factor}
    if pe == "rope_ntk":
        return {"factor": factor}
    if pe in ("rope_yarn", "rope_llama3"):
        return {"factor": factor, "original_max_len": train_width, "base": 10000.0}
    if pe == "longrope":  # no searched per-pair factors: the attention factor only
        return {"factor": factor, "original_max_len": train_width}
    return {}


def model_config(cfg: LengthGeneralizationConfig, pe: str, options: dict[str, Any], max_len: int
                 ) -> TransformerConfig:
    """``cfg.model`` with the cell's PE (or ``sched_*`` schedule), the task vocabulary and
    ``max_len`` (the test width)."""
    from posjax.models.schedules import preset_config

    base = dataclasses.replace(cfg.model, vocab_size=alg.vocab_size(), max_len=max_len)
    if pe in SCHEDULE_PES:
        fields = preset_config(SCHEDULE_PES[pe], span=cfg.schedule_span)
        fields.pop("causal")
        if len(fields["layer_types"]) > base.num_layers:  # one layer per kind, in pattern order
            fields["layer_types"] = tuple(dict.fromkeys(fields["layer_types"]))[:base.num_layers]
        return dataclasses.replace(base, pe="none", pe_options={}, **fields)
    return dataclasses.replace(base, pe=pe, pe_options=options)


# --- one cell ---------------------------------------------------------------------------------
def _seeds(task: str, seed: int, cfg: LengthGeneralizationConfig) -> dict[str, int]:
    t = cfg.tasks.index(task) if task in cfg.tasks else alg.TASKS.index(task)
    return {"data_seed": 1000 * seed + t, "test_seed": 500_000 + 1000 * seed + t,
            "init_seed": seed, "shuffle_seed": seed}


def train_models(task: str, pe: str, cfg: LengthGeneralizationConfig, out_dir: str) -> list[tuple[Any, dict]]:
    """Train (or resume) every seed of one (task, PE) as one ensemble; ``[(model, info)]``."""
    from posjax.models import LanguageModel
    from posjax.training import ArrayBatches, masked_lm_loss, train_ensemble

    train_w, test_w = widths(cfg, task)
    seeds = [_seeds(task, seed, cfg) for seed in range(cfg.seeds)]
    options = pe_options(pe, cfg, train_w, test_w)
    mcfg = model_config(cfg, pe, options, test_w)
    batches = []
    for sd in seeds:
        lengths = alg.train_lengths(cfg.n_train, cfg.train_max_length, seed=sd["data_seed"])
        data = alg.make_dataset(task, lengths, seed=sd["data_seed"], width=train_w,
                                **task_options(cfg))
        batches.append(ArrayBatches({"tokens": data["tokens"], "loss_mask": data["loss_mask"]},
                                    cfg.train.batch_size, seed=sd["shuffle_seed"]))
    steps = cfg.train.steps
    tcfg = dataclasses.replace(cfg.train, log_every=max(steps // 10, 1),
                               checkpoint_every=max(steps // 4, 1))
    members = [{"seed": sd["shuffle_seed"], "init_seed": sd["init_seed"]} for sd in seeds]
    result = train_ensemble(lambda m: LanguageModel(mcfg, rngs=nnx.Rngs(m["init_seed"])),
                            masked_lm_loss, batches, tcfg, members=members,
                            out_dir=os.path.join(out_dir, "train", f"{task}-{pe}"),
                            run_config={"model": mcfg.to_dict(), "task": task, "seeds": seeds,
                                        "task_options": task_options(cfg)},
                            desc=f"{task}/{pe}")
    out = []
    for i, (model, sd) in enumerate(zip(result.models, seeds)):
        info = {"loss": result.metrics[i].get("loss"),
                "token_accuracy": result.metrics[i].get("token_accuracy"),
                "train_seconds": round(result.seconds, 2), "resumed_from": result.resumed_from,
                "diverged_at": result.diverged.get(i), "pe_options": options,
                "train_width": train_w, "test_width": test_w, **sd}
        out.append((model, info))
    return out


def evaluate_model(model, task: str, seed: int, cfg: LengthGeneralizationConfig, *, greedy: bool = True
                   ) -> dict[str, Any]:
    """Per-length exact match on fresh test instances, plus the greedy cross-check."""
    from posjax.training import lm_exact_match
    from posjax.training.evaluation import greedy_exact_match

    _, test_w = widths(cfg, task)
    seeds = _seeds(task, seed, cfg)
    lengths = np.arange(1, cfg.test_factor * cfg.train_max_length + 1)
    data = alg.make_dataset(task, alg.eval_lengths(lengths, cfg.per_length),
                            seed=seeds["test_seed"], width=test_w, **task_options(cfg))
    t0 = time.perf_counter()
    exact = lm_exact_match(model, data["tokens"], data["loss_mask"], batch=cfg.eval_batch)
    per_length = {int(l): float(exact[data["length"] == l].mean()) for l in lengths}
    check = {"n": 0, "agree": 0}
    if greedy and cfg.greedy_check_per_length:
        pick = np.concatenate([np.flatnonzero(data["length"] == l)[:cfg.greedy_check_per_length]
                               for l in lengths])
        g, cached = greedy_exact_match(model, data["tokens"][pick], data["prefix_len"][pick],
                                       data["target_len"][pick])
        check = {"n": int(len(pick)), "agree": int((g == exact[pick]).sum()),
                 "greedy_accuracy": float(g.mean()), "kv_cache": cached}
    return {"per_length": per_length, "greedy_check": check,
            "eval_seconds": round(time.perf_counter() - t0, 2)}


def run_cell(task: str, pe: str, cfg: LengthGeneralizationConfig, out_dir: str, rope_cache: dict) -> list[dict]:
    """Every seed of one (task, PE): train (or reuse the trained RoPE models for a test-time
    scaling) and evaluate; one result dict per seed."""
    if pe in ROPE_SCALINGS and cfg.rope_scaling_mode == "test_time":
        if task not in rope_cache:  # resumes from the RoPE ensemble's final checkpoint
            rope_cache[task] = train_models(task, "rope", cfg, out_dir)
        trained = []
        train_w, test_w = widths(cfg, task)
        options = pe_options(pe, cfg, train_w, test_w)
        for model, info in rope_cache[task]:  # the RoPE model's parameters, the scaled PE
            scaled = rebuild_with_config(model, model_config(cfg, pe, options, test_w))
            trained.append((scaled, {**info, "pe_options": options, "trained_as": "rope"}))
    else:
        trained = train_models(task, pe, cfg, out_dir)
        if pe == "rope":
            rope_cache[task] = trained
    greedy = cfg.greedy_check_pes is None or pe in cfg.greedy_check_pes
    return [{**info, **evaluate_model(model, task, seed, cfg, greedy=greedy)}
            for seed, (model, info) in enumerate(trained)]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser(__doc__.splitlines()[0], default_out=DEFAULT_OUT)
    args = p.parse_args(argv)
    cfg = resolve_config(args, PRESETS)
    results = run(cfg, args.out)
    print(open(os.path.join(args.out, "report.md")).read())
    return results


def run(cfg: LengthGeneralizationConfig, out: str) -> dict[str, Any]:
    """Run (or resume) every cell of ``cfg`` and write results.json, report.md and the curves."""
    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    options = dataclasses.asdict(cfg)
    # schedule_span keys the sched_* cells only (runs without them keep their cells)
    store = CellStore(out, {k: v for k, v in options.items()
                            if k not in ("tasks", "pes", "schedule_span")})
    cells: dict[tuple[str, str, int], dict] = {}
    rope_cache: dict = {}
    todo = [(t, pe) for t in cfg.tasks for pe in cfg.pes]
    for task, pe in tqdm(todo, desc="cells"):
        key = {"task": task, "pe": pe}
        if pe in SCHEDULE_PES:
            key["schedule_span"] = cfg.schedule_span
        per_seed = store.compute(key, lambda: run_cell(task, pe, cfg, out, rope_cache),
                                 count=cfg.seeds)
        for seed, value in enumerate(per_seed):
            cells[(task, pe, seed)] = value
    seconds = time.perf_counter() - t0
    summary = summarise(cells, cfg, cfg.seeds)
    summary["nope_claim"] = nope_claim(summary)
    results = {"experiment": "length_generalization", "config": options,
               "seeds": list(range(cfg.seeds)), "versions": versions(),
               "wall_seconds": round(seconds, 1),
               "cells": [{"task": t, "pe": pe, "seed": s, **v} for (t, pe, s), v in cells.items()],
               "summary": summary}
    write_json(os.path.join(out, "results.json"), results)
    write_outputs(out, cfg, cfg.seeds, cells, summary, seconds)
    return results
