"""Long context: perplexity, retrieval and attention of small causal LMs out to 8x their
training length, for every causal PE.

    python -m experiments.long_context [--preset quick|cpu|gpu|paper] [--seeds N] [--out DIR]
        [--set key=value ...]   (e.g. --set pes=none,rope,alibi,xpos dataset=synthetic;
                                 dataset=text text_file=PATH)

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

import numpy as np
from flax import nnx

from experiments.common import (CellStore, experiment_parser, preset_name, config_overrides,
                                run_cli, versions, write_json)
from experiments.long_context import data as lcdata
from experiments.long_context.evaluate import evaluate, lengths

DEFAULT_OUT = "runs/long_context"
ROPE_SCALINGS = ("rope_linear", "rope_ntk", "rope_yarn", "rope_llama3", "longrope")
QUICK_PES = ("none", "sinusoidal", "rope", "alibi", "t5", "fire")
CPU_PES = QUICK_PES + ("learned", "kerple_log", "kerple_power", "xpos", "hope", "pope",
                       "sandwich", "p_rope")
# Every other causal PE of length_generalization's catalogue is one `--set pes=` away.
OTHER_PES = ("fope", "dynamic_position_bias", "polar_pope", "cayley_string", "liere", "comrope",
             "cope", "fox", "dape", "path", "mrope", "cape", "hype", "gridpe", "tupe", "cpe",
             "lape", "complex", "positional_attention", "rope_plus_abs", "mla", "random_fixed")


@dataclasses.dataclass(frozen=True)
class LCConfig:
    """Every setting of a run (recorded in results.json).

    Attributes:
      dataset / text_file / vocab_size / corpus_tokens / data_seed: the corpus (data.py).
      pes, scalings: trained PEs; RoPE scalings evaluated on the trained RoPE models.
      train_length: L. eval_factors: evaluated lengths in units of L.
      retrieval_fraction: share of training rows that are passkey / needle rows.
      key_length, num_symbols, num_needles: the retrieval tasks; depths, trials: their grid.
      eval_rows: held-out stream rows of 8L + 1 tokens (perplexity); attention_rows of them
        for the attention diagnostics.
      geometry_windows: stream windows per length for the positional distributions (stress).
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
    geometry_windows: int = 2000
    steps: int = 2000
    batch_size: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 100
    num_layers: int = 2
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 256
    seeds: int = 3

    def __post_init__(self):
        from posjax import encodings

        if self.dataset not in ("stdlib", "text", "synthetic"):
            raise ValueError(f"dataset must be stdlib, text or synthetic, got {self.dataset!r}")
        if self.seeds < 1 or self.steps < 1 or self.train_length < 8:
            raise ValueError("need seeds >= 1, steps >= 1 and train_length >= 8")
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


QUICK = LCConfig(pes=QUICK_PES, steps=300, corpus_tokens=200_000, vocab_size=1000,
                 trials=12, geometry_windows=1000)
PRESETS = {"quick": QUICK, "cpu": LCConfig(), "paper": LCConfig(steps=5000, seeds=5),
           "gpu": LCConfig(pes=CPU_PES + OTHER_PES, train_length=64, steps=3000, d_model=128,
                           num_layers=4, d_ff=512, batch_size=64, corpus_tokens=2_000_000,
                           eval_rows=32, trials=32)}


def model_config(cfg: LCConfig, pe: str, options: dict, vocab_size: int):
    from posjax.models import TransformerConfig
    return TransformerConfig(vocab_size=vocab_size, num_layers=cfg.num_layers,
                             d_model=cfg.d_model, num_heads=cfg.num_heads, d_ff=cfg.d_ff,
                             max_len=max(lengths(cfg)), pe=pe, pe_options=options, causal=True,
                             pre_norm=True, dropout=0.0)


def pe_options(pe: str, cfg: LCConfig, length: int | None = None) -> dict[str, Any]:
    """Options of a trained PE, or of a RoPE scaling at evaluation length ``length``."""
    L = cfg.train_length
    s = max(1.0, (length or L) / L)
    if pe in ("hope", "fope"):
        return {"train_length": L}
    if pe in ("rope_linear", "rope_ntk"):
        return {"factor": s}
    if pe in ("rope_yarn", "rope_llama3"):
        return {"factor": s, "original_max_len": L}
    if pe == "longrope":
        return {"factor": s, "original_max_len": L}
    return {}


def train_pe(pe: str, cfg: LCConfig, corpus: dict, out: str) -> tuple[list, dict]:
    """Train (or resume) every seed of one PE as one ensemble; ``(models, info)``."""
    from posjax.models import LanguageModel
    from posjax.training import ArrayBatches, TrainConfig, masked_lm_loss, train_ensemble

    mcfg = model_config(cfg, pe, pe_options(pe, cfg), corpus["model_vocab"])
    batches = [ArrayBatches(lcdata.training_arrays(corpus["train"], corpus["vocab"], cfg, s),
                            cfg.batch_size, seed=s) for s in range(cfg.seeds)]
    tcfg = TrainConfig(steps=cfg.steps, batch_size=cfg.batch_size, optimizer="adamw",
                       learning_rate=cfg.learning_rate, schedule="cosine",
                       warmup_steps=cfg.warmup_steps, grad_clip=1.0,
                       log_every=max(cfg.steps // 10, 1), checkpoint_every=max(cfg.steps // 3, 1),
                       progress=True)
    result = train_ensemble(lambda m: LanguageModel(mcfg, rngs=nnx.Rngs(m["init_seed"])),
                            masked_lm_loss, batches, tcfg,
                            members=[{"seed": s, "init_seed": s} for s in range(cfg.seeds)],
                            out_dir=os.path.join(out, "train", pe),
                            run_config={"model": mcfg.to_dict()}, desc=f"train {pe}")
    info = {"loss": [m.get("loss") for m in result.metrics], "train_seconds": result.seconds,
            "diverged": {str(k): v for k, v in result.diverged.items()},
            "rows": len(batches[0].arrays["tokens"])}
    return list(result.models), info


def run_pe(pe: str, cfg: LCConfig, corpus: dict, out: str, rope_cache: dict) -> dict:
    """Every seed of one PE (trained, or a RoPE scaling of the trained RoPE models)."""
    from posjax.models import LanguageModel
    from experiments.long_context.geometry import pe_stress

    if pe in cfg.scalings and pe not in cfg.pes:
        if "rope" not in rope_cache:
            rope_cache["rope"] = train_pe("rope", cfg, corpus, out)
        trained, info = rope_cache["rope"]

        def at(model):
            def build(l):
                m = LanguageModel(model_config(cfg, pe, pe_options(pe, cfg, l),
                                               corpus["model_vocab"]), rngs=nnx.Rngs(0))
                nnx.update(m, nnx.state(model, nnx.Param))
                return m
            return build
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


def prepare(cfg: LCConfig, out: str) -> dict:
    stream, corpus_vocab, info = lcdata.corpus_stream(cfg, os.path.join(out, "cache"))
    train, rows = lcdata.split_stream(stream, cfg)
    vocab = lcdata.retrieval_vocab(cfg, corpus_vocab, info["first_id"])
    return {"train": train, "eval": rows, "vocab": vocab, "corpus_vocab": corpus_vocab,
            "model_vocab": corpus_vocab + 2, "info": {**info, "tokens": int(len(stream))}}


def run(cfg: LCConfig, out: str, *, preset: str = "custom") -> dict[str, Any]:
    """Run (or resume) every PE of ``cfg``; write results.json, report.md and the figures."""
    from experiments.long_context import geometry, report

    t0 = time.perf_counter()
    corpus = prepare(cfg, out)
    options = dataclasses.asdict(cfg)
    store = CellStore(out, {k: v for k, v in options.items() if k not in ("pes", "scalings")})
    cells, rope_cache = {}, {}
    for pe in cfg.pes + tuple(s for s in cfg.scalings if s not in cfg.pes):
        cells[pe] = store.compute({"pe": pe}, lambda: run_pe(pe, cfg, corpus, out, rope_cache))
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
    cfg = dataclasses.replace(PRESETS[name], **config_overrides(LCConfig, args))
    results = run(cfg, args.out, preset=name)
    print(open(os.path.join(args.out, "report.md")).read())
    return results


if __name__ == "__main__":
    run_cli(main)
