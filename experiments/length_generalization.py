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

from experiments._length_generalization_report import (REFERENCE_PES, ROPE_SCALINGS,  # noqa: F401 (re-exported)
                                    nope_claim, summarise, write_outputs)
from experiments.common import (CellStore, described, experiment_parser, resolve_config, run_cli,
                                versions, write_json)
from posjax.data import algorithmic as alg
from posjax.models import TransformerConfig
from posjax.training import TrainConfig

DEFAULT_OUT = "runs/length_generalization"
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


def scaled_rope(trained, pe: str, task: str, cfg: LengthGeneralizationConfig):
    """The trained RoPE model's parameters in a model whose PE is the scaling variant ``pe``."""
    from posjax.models import LanguageModel

    train_w, test_w = widths(cfg, task)
    options = pe_options(pe, cfg, train_w, test_w)
    model = LanguageModel(model_config(cfg, pe, options, test_w), rngs=nnx.Rngs(0))
    nnx.update(model, nnx.state(trained, nnx.Param))
    return model, options


def run_cell(task: str, pe: str, cfg: LengthGeneralizationConfig, out_dir: str, rope_cache: dict) -> list[dict]:
    """Every seed of one (task, PE): train (or reuse the trained RoPE models for a test-time
    scaling) and evaluate; one result dict per seed."""
    if pe in ROPE_SCALINGS and cfg.rope_scaling_mode == "test_time":
        if task not in rope_cache:  # resumes from the RoPE ensemble's final checkpoint
            rope_cache[task] = train_models(task, "rope", cfg, out_dir)
        trained = []
        for model, info in rope_cache[task]:
            scaled, options = scaled_rope(model, pe, task, cfg)
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


if __name__ == "__main__":
    run_cli(main)
