"""Long context: perplexity, retrieval and attention of small causal LMs out to 8x their
training length, for every causal PE.

    python -m experiments.long_context [--preset quick|cpu|gpu|paper] [--seeds N] [--out DIR]
        [--set key=value ...]   (e.g. --set pes=none,rope,alibi,xpos dataset=synthetic
                                 model.d_model=32 train.steps=100; dataset=text text_file=PATH)

Per PE one ensemble of ``seeds`` small causal pre-LN decoders
(:func:`posjax.training.train_ensemble`; each seed its own init and data order) is trained at
length L on the corpus's contiguous stream with passkey and needle rows of length <= L mixed in
(so retrieval is learnable), then evaluated with :mod:`posjax.evals` at lengths
``eval_factors x L`` (default 1, 2, 4, 8): perplexity (non-overlapping windows of held-out
stream), passkey and needle exact match (length x depth),
attention entropy / distance / sink mass. RoPE's training-free scalings (linear, NTK, YaRN,
llama3, and LongRoPE without searched factors = its attention factor alone) are applied at
evaluation time to the trained RoPE models with ``s = max(1, l / L)`` at each evaluated length
``l`` (the dynamic choice). Learned tables have ``max_len = 8L``; rows past L are never trained.
Writes ``DIR/results.json``, ``DIR/report.md``, PNG figures and one resumable cell per PE under
``DIR/cells`` (training checkpoints under ``DIR/train``).
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Sequence

from flax import nnx

from posjax.encodings.rope import RoPEOptions

from experiments.common import (CellStore, apply_overrides, config_overrides, experiment_parser,
                                preset_name, run_cli, versions, write_json)
from experiments.long_context import data as lcdata
from experiments.long_context.config import DEFAULT_OUT, PRESETS, LongContextConfig
from experiments.long_context.evaluate import evaluate, lengths
from experiments.long_context.geometry import check_windows

def model_config(cfg: LongContextConfig, pe: str, options: dict, vocab_size: int):
    """``cfg.model`` with the per-PE fields: ``vocab_size``, ``max_len`` = the longest
    evaluated length, ``pe`` and ``pe_options``."""
    return dataclasses.replace(cfg.model, vocab_size=vocab_size, max_len=max(lengths(cfg)),
                               pe=pe, pe_options=options)


def pe_options(pe: str, cfg: LongContextConfig, length: int | None = None) -> dict[str, Any]:
    """Options of a trained PE, or of a RoPE scaling at evaluation length ``length``."""
    L = cfg.train_length
    s = max(1.0, (length or L) / L)
    if pe in ("hope", "fope"):
        return {"train_length": L}
    if pe in ("rope_linear", "rope_ntk"):
        return {"factor": s}
    if pe == "rope_yarn":
        return {"factor": s, "original_max_len": L}
    if pe == "rope_llama3":  # its own default base is Llama 3.1's 5e5: keep the trained RoPE's
        return {"factor": s, "original_max_len": L, "base": RoPEOptions().base}
    if pe == "longrope":
        return {"factor": s, "original_max_len": L}
    return {}


def train_pe(pe: str, cfg: LongContextConfig, corpus: dict, out: str) -> tuple[list, dict]:
    """Train (or resume) every seed of one PE as one ensemble; ``(models, info)``."""
    from posjax.models import LanguageModel
    from posjax.training import ArrayBatches, masked_lm_loss, train_ensemble

    mcfg = model_config(cfg, pe, pe_options(pe, cfg), corpus["model_vocab"])
    batches = [ArrayBatches(lcdata.training_arrays(corpus["train"], corpus["vocab"], cfg, s),
                            cfg.train.batch_size, seed=s) for s in range(cfg.seeds)]
    steps = cfg.train.steps
    tcfg = dataclasses.replace(cfg.train, log_every=max(steps // 10, 1),
                               checkpoint_every=max(steps // 3, 1))
    result = train_ensemble(lambda m: LanguageModel(mcfg, rngs=nnx.Rngs(m["init_seed"])),
                            masked_lm_loss, batches, tcfg,
                            members=[{"seed": s, "init_seed": s} for s in range(cfg.seeds)],
                            out_dir=os.path.join(out, "train", pe),
                            run_config={"model": mcfg.to_dict()}, desc=f"train {pe}")
    info = {"loss": [m.get("loss") for m in result.metrics], "train_seconds": result.seconds,
            "diverged": {str(k): v for k, v in result.diverged.items()},
            "rows": len(batches[0].arrays["tokens"])}
    return list(result.models), info


def run_pe(pe: str, cfg: LongContextConfig, corpus: dict, out: str, rope_cache: dict) -> dict:
    """Every seed of one PE (trained, or a RoPE scaling of the trained RoPE models)."""
    from posjax.models import rebuild_with_config
    from experiments.long_context.geometry import pe_stress

    if pe in cfg.scalings and pe not in cfg.pes:
        if "rope" not in rope_cache:
            rope_cache["rope"] = train_pe("rope", cfg, corpus, out)
        trained, info = rope_cache["rope"]

        def at(model):  # the RoPE model's parameters, the scaling for evaluation length l
            return lambda l: rebuild_with_config(
                model, model_config(cfg, pe, pe_options(pe, cfg, l), corpus["model_vocab"]))
        evals = [evaluate(at(m), cfg, corpus, s) for s, m in enumerate(trained)]
        return {"trained_as": "rope", "info": info, "seeds": evals,
                "options": {l: pe_options(pe, cfg, l) for l in lengths(cfg)}}
    trained, info = train_pe(pe, cfg, corpus, out)
    if pe == "rope":
        rope_cache["rope"] = (trained, info)
    evals = [evaluate(lambda l, m=m: m, cfg, corpus, s) for s, m in enumerate(trained)]
    geometry = pe_stress(pe, trained, cfg, corpus)
    return {"trained_as": pe, "info": info, "seeds": evals, "options": pe_options(pe, cfg),
            "geometry": geometry}


def prepare(cfg: LongContextConfig, out: str) -> dict:
    stream, corpus_vocab, info = lcdata.corpus_stream(cfg, os.path.join(out, "cache"))
    train, rows = lcdata.split_stream(stream, cfg)
    check_windows(cfg, train)
    vocab = lcdata.retrieval_vocab(cfg, corpus_vocab, info["first_id"])
    return {"train": train, "eval": rows, "vocab": vocab, "corpus_vocab": corpus_vocab,
            "model_vocab": corpus_vocab + 2, "info": {**info, "tokens": int(len(stream))}}


def run(cfg: LongContextConfig, out: str, *, preset: str = "custom") -> dict[str, Any]:
    """Run (or resume) every PE of ``cfg``; write results.json, report.md and the figures."""
    from experiments.long_context import geometry, report

    t0 = time.perf_counter()
    corpus = prepare(cfg, out)
    options = dataclasses.asdict(cfg)
    store = CellStore(out, {k: v for k, v in options.items() if k not in ("pes", "scalings")})
    cells, rope_cache = {}, {}
    for pe in cfg.pes + tuple(s for s in cfg.scalings if s not in cfg.pes):
        key = {"pe": pe}
        if pe in cfg.scalings and pe not in cfg.pes:  # keyed by the options it is evaluated with
            key["eval_options"] = {str(l): pe_options(pe, cfg, l) for l in lengths(cfg)}
        cells[pe] = store.compute(key, lambda: run_pe(pe, cfg, corpus, out, rope_cache))
    corr = geometry.corpus_stress(cfg, corpus, cells)
    seconds = time.perf_counter() - t0
    load = os.getloadavg()
    summary = report.summarise(cells, cfg)
    results = {"experiment": "long_context", "preset": preset, "config": options,
               "corpus": corpus["info"], "seeds": list(range(cfg.seeds)),
               "versions": versions(), "wall_seconds": round(seconds, 1),
               "load_average": [round(x, 2) for x in load], "provenance": store.provenance(),
               "cells": cells, "summary": summary, "geometry": corr}
    write_json(os.path.join(out, "results.json"), results)
    report.write_report(out, results)
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser(__doc__.splitlines()[0], default_out=DEFAULT_OUT)
    for action in p._actions:                          # this experiment adds the `cpu` preset
        if action.dest == "preset":
            action.choices = tuple(PRESETS)
    args = p.parse_args(argv)
    name = preset_name(args)
    cfg = apply_overrides(PRESETS[name], config_overrides(LongContextConfig, args))
    results = run(cfg, args.out, preset=name)
    print(open(os.path.join(args.out, "report.md")).read())
    return results


if __name__ == "__main__":
    run_cli(main)
