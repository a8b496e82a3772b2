"""Flagship experiment of arXiv 2604.05217 ("On the Geometry of Positional Encodings in
Transformers", G. Cirrincione): stress of every positional encoding against the Hellinger
geometry of positional statistics, on a synthetic corpus, SST-2 and IMDB.

    python -m experiments.stress_table --dataset synthetic|sst2|imdb [--preset quick|gpu|paper]
        [--seeds N] [--out DIR] [--data-dir DIR] [--vocab-file VOCAB] [--set key=value ...]

Writes ``DIR/results.json`` (every interpretation option recorded), ``DIR/report.md`` and PNG
plots. Tables: E1 stress per encoding (raw and optimal scale; plug-in, split-half and, on the
synthetic corpus, exact ``P``), E2 spectrum, E3 parameters, E4 accuracy of an encoder trained
with each PE (mean ± 95 % CI over seeds), and the sample-size sensitivity analysis. Finished cells (trained
models, sensitivity cells) are stored under ``DIR/cells`` and skipped on rerun.
"""
from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Literal, Sequence

import jax

from experiments import _stress_geometry as G
from experiments import _stress_report as R
from experiments._stress_data import prepare
from experiments._stress_matrix_free import (analyse_matrix_free, fixed_coordinates,
                                              has_gram_factorisation, not_computed)
from experiments._stress_train import E4_ENCODINGS, train_cell
from experiments.common import (CellStore, config_overrides, experiment_parser, preset_name,
                                run_cli, versions, write_json)

DATASETS = ("synthetic", "sst2", "imdb", "text")
# Fields that do not change any cell's numbers (excluded from the cell salt): adding seeds or
# encodings, or changing the checkpoint interval, keeps the finished cells.
_NOT_RESULTS = ("progress", "hub_timeout", "data_dir", "mode", "seeds", "encodings",
                "checkpoint_every", "sens_samples", "sens_repeats")
# Options of the geometry path: part of the E4 cell salt only when the matrix-free path ran (the
# dense path's cells do not depend on them, so runs stored before they existed stay valid).
_PATH_OPTIONS = ("geometry", "matrix_free_above", "matrix_free_k", "stress_exact_max",
                 "stress_pairs")


@dataclasses.dataclass(frozen=True)
class StressConfig:
    """Every option of the experiment; each reading in docs/interpretations.md is a field.

    Geometry (arXiv 2604.05217; docs/interpretations.md): ``metric`` (chord, Eq. (3)); ``keep_special`` ([CLS]/[SEP]
    kept as ordinary tokens); ``pad_mode``; ``smoothing``; ``top_k``; ``min_count`` (positions
    with fewer samples end the analysed range); ``tau`` (full rank r_tau); ``eps`` (low rank
    r_eps, energy rule); stresses are Eq. (4) without square root, reported both raw and at the
    optimal scale (raw is the primary number for MDS rows, sigma* for all others);
    ``sinusoidal_dim``/``rope_head_dim``/``rope_mode``/``alibi_scale`` (adapters, docs/interpretations.md);
    ``smacof_*``. Geometry path: ``geometry`` (``"auto"``: dense up to ``matrix_free_above``
    positions, matrix-free above; ``"dense"``; ``"matrix_free"``), ``matrix_free_k`` (top-k
    eigenpairs of B), ``stress_exact_max`` and ``stress_pairs`` (exact streamed stress up to that
    n, sampled pairs with a 95 % interval above; docs/long_context_geometry.md). Synthetic
    corpus: ``num_positions``, ``vocab_size``, ``samples_per_position``, ``mixing``, ``alpha``, ``task_shift`` (None: n // 8). Sensitivity: ``sens_*``. Model/E4:
    sizes, ``pooling``, optimiser, ``mds_*`` (MDS PE: scale gamma, trainable factors, lift,
    variant of D it is built from).
    """

    dataset: str = "synthetic"
    mode: str = "paper"                 # the preset (quick, gpu, paper)
    seeds: int = 3
    data_seed: int = 0
    encodings: tuple[str, ...] = E4_ENCODINGS
    # geometry
    metric: str = "chord"
    keep_special: bool = True
    pad_mode: str = "drop"
    smoothing: float = 0.0
    top_k: int | None = None
    min_count: int = 1
    tau: float = 1e-6
    eps: float = 1e-3
    eps_alt: float = 1e-2
    sinusoidal_dim: int = 768
    rope_head_dim: int = 64
    rope_mode: str = "kernel"
    alibi_scale: Any = None
    alibi_heads: int = 12
    smacof_max_iter: int = 300
    smacof_tol: float | None = None  # None: 4 ulps of the data dtype (see geometry.smacof)
    # dense n x n geometry or matrix-free (experiments/_stress_matrix_free.py)
    geometry: Literal["auto", "dense", "matrix_free"] = "auto"
    matrix_free_above: int = 4096       # auto: matrix-free when n > this
    matrix_free_k: int = 64             # top-k eigenpairs of B on the matrix-free path
    stress_exact_max: int = 8192        # matrix-free stress exact (streamed) up to this n
    stress_pairs: int = 200_000         # else estimated from this many sampled pairs (95 % CI)
    # synthetic corpus and task
    num_positions: int | None = 128
    vocab_size: int = 2000
    samples_per_position: int = 100_000
    mixing: str = "linear"
    alpha: float = 0.1
    task_shift: int | None = None
    train_examples: int | None = 20_000
    test_examples: int | None = 4096
    # text
    max_len: int = 64
    tokenizer_vocab: int = 8000
    vocab_file: str | None = None
    data_dir: str | None = None
    hub_timeout: float = 5.0
    # sensitivity (docs/interpretations.md toy: V = 2000, n = 128)
    sens_positions: int = 128
    sens_vocab: int = 2000
    sens_samples: tuple[int | None, ...] = (None, 100_000, 10_000, 1_000)
    sens_repeats: int = 3
    # model and training (E4)
    d_model: int = 128
    num_layers: int = 4
    num_heads: int = 4
    d_ff: int = 512
    dropout: float = 0.0
    pooling: str = "mean"
    steps: int = 2000
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.01
    warmup_fraction: float = 0.1
    checkpoint_every: int = 0
    progress: bool = False
    mds_variant: str = "plugin"
    mds_scale: float = 1.0
    mds_trainable: str = "both"
    mds_lift: str = "pad"
    mds_max_rank: int | None = None
    # pretrained checkpoint row and custom corpora (experiments/_stress_pretrained.py)
    pretrained: str | None = None
    pretrained_layernorm: bool = False
    tokenizer: str | None = None
    text_column: str | None = None

    def __post_init__(self):
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose one of "
                             f"{', '.join(DATASETS)}")
        if self.dataset == "synthetic" and (self.data_dir or self.vocab_file):
            raise ValueError("--data-dir and --vocab-file apply to sst2 and imdb only")
        if self.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {self.seeds}")
        bad = sorted(set(self.encodings) - set(E4_ENCODINGS))
        if bad:
            raise ValueError(f"unknown E4 encodings {bad}; choose from {', '.join(E4_ENCODINGS)}")
        if self.mds_variant not in ("plugin", "split_half", "exact"):
            raise ValueError(f"mds_variant must be plugin, split_half or exact, got "
                             f"{self.mds_variant!r}")
        if self.mds_variant == "exact" and self.dataset != "synthetic":
            raise ValueError("mds_variant='exact' exists only for the synthetic dataset")
        if self.geometry not in ("auto", "dense", "matrix_free"):
            raise ValueError(f"geometry must be auto, dense or matrix_free, got {self.geometry!r}")
        for key in ("matrix_free_above", "matrix_free_k", "stress_exact_max"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.stress_pairs < 2:
            raise ValueError(f"stress_pairs must be >= 2, got {self.stress_pairs}")
        if self.geometry == "matrix_free":
            if not has_gram_factorisation(self.metric):
                raise ValueError(f"geometry='matrix_free' needs the chord or normalized metric "
                                 f"(B of {self.metric!r} has no Gram factorisation)")
            if self.mds_variant == "split_half":
                raise ValueError("mds_variant='split_half' needs geometry='dense' (split-half "
                                 "debiasing is not computed matrix-free)")
        if self.pooling not in ("cls", "mean", "last"):
            raise ValueError(f"pooling must be cls, mean or last, got {self.pooling!r}")

    def record(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRESETS: dict[tuple[str, str], dict[str, Any]] = {
    ("synthetic", "paper"): {},
    # one H200 in <= 8 min: the paper-scale synthetic corpus and E4 encoders, 5 seeds
    ("synthetic", "gpu"): dict(seeds=5),
    ("synthetic", "quick"): dict(num_positions=32, vocab_size=500, samples_per_position=20_000,
                                 train_examples=3000, test_examples=1024, seeds=3, d_model=32,
                                 num_layers=2, num_heads=2, d_ff=64, steps=200, batch_size=32,
                                 learning_rate=3e-3, sens_repeats=2),
    ("sst2", "paper"): dict(num_positions=64, max_len=64, train_examples=None, test_examples=None,
                           d_model=256, num_layers=4, num_heads=4, d_ff=1024, dropout=0.1,
                           pooling="cls", steps=3000, batch_size=64, learning_rate=3e-4,
                           checkpoint_every=1000),
    ("sst2", "quick"): dict(num_positions=64, max_len=64, train_examples=2000, test_examples=500,
                            tokenizer_vocab=3000, seeds=3, d_model=32, num_layers=2, num_heads=2,
                            d_ff=64, pooling="cls", steps=150, learning_rate=1e-3,
                            sens_repeats=1),
    ("text", "paper"): dict(num_positions=128, max_len=128, train_examples=None,
                           test_examples=None, d_model=256, num_layers=4, num_heads=4, d_ff=1024,
                           dropout=0.1, pooling="cls", steps=3000, learning_rate=3e-4),
    ("text", "quick"): dict(num_positions=32, max_len=32, train_examples=2000, test_examples=500,
                            tokenizer_vocab=1000, seeds=3, d_model=32, num_layers=2, num_heads=2,
                            d_ff=64, pooling="cls", steps=100, learning_rate=1e-3,
                            sens_repeats=1),
    ("imdb", "paper"): dict(num_positions=512, max_len=512, train_examples=None,
                           test_examples=None, d_model=256, num_layers=4, num_heads=4, d_ff=1024,
                           dropout=0.1, pooling="cls", steps=3000, batch_size=32,
                           learning_rate=3e-4, checkpoint_every=1000),
    ("imdb", "quick"): dict(num_positions=256, max_len=256, train_examples=1000,
                            test_examples=300, tokenizer_vocab=3000, seeds=3, d_model=32,
                            num_layers=2, num_heads=2, d_ff=64, pooling="cls", steps=100,
                            learning_rate=1e-3, batch_size=32, sens_repeats=1),
}
for _d in ("sst2", "imdb"):  # the paper-scale text runs fit one H200 as they are
    PRESETS[(_d, "gpu")] = PRESETS[(_d, "paper")]


def make_config(dataset: str, *, quick: bool = False, preset: str | None = None,
                **overrides: Any) -> StressConfig:
    """The preset ``(dataset, quick|gpu|paper)`` with ``overrides`` applied (``quick=True`` is
    ``preset="quick"``; the default is paper)."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    mode = preset or ("quick" if quick else "paper")
    if (dataset, mode) not in PRESETS:
        raise ValueError(f"unknown preset {mode!r}; choose quick, gpu or paper")
    fields = {f.name for f in dataclasses.fields(StressConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(sorted(fields))}")
    return StressConfig(dataset=dataset, mode=mode, **{**PRESETS[(dataset, mode)], **overrides})


def _salt(cfg: StressConfig, keys: Sequence[str] | None = None, path: str = "dense"
          ) -> dict[str, Any]:
    drop = _NOT_RESULTS + (_PATH_OPTIONS if path == "dense" else ())
    rec = {k: v for k, v in cfg.record().items() if k not in drop}
    if path != "dense":
        rec["geometry_path"] = path
    return rec if keys is None else {k: rec[k] for k in keys}


def _sensitivity(cfg: StressConfig, out_dir: str, log) -> list[dict]:
    store = CellStore(out_dir, {"part": "sensitivity", **_salt(cfg, (
        "metric", "mixing", "alpha", "data_seed", "sens_positions", "sens_vocab",
        "sinusoidal_dim", "rope_head_dim", "rope_mode", "alibi_scale", "alibi_heads"))})
    cells: dict[tuple, list[dict]] = {}
    settings, path_key = G.sensitivity_settings(cfg)
    for samples, debias in settings:
        reps = 1 if samples is None else cfg.sens_repeats
        cells[(samples, debias)] = [
            store.compute({"samples": samples, "debias": debias, "repeat": k, **path_key},
                          lambda s=samples, d=debias, k=k: G.sensitivity_cell(cfg, s, d, k))
            for k in range(reps)]
    log(f"sensitivity: {len(cells)} settings done"
        + (" (matrix-free: no split-half cells)" if path_key else ""))
    return G.summarise_sensitivity(cells)


def run(cfg: StressConfig, out_dir: str, *, log=print) -> dict[str, Any]:
    """Run the whole experiment into ``out_dir`` and return the results dict."""
    t_start, cpu_start = time.perf_counter(), time.process_time()
    os.makedirs(out_dir, exist_ok=True)
    timing: dict[str, float] = {}
    prep = prepare(cfg, out_dir)
    timing["data"] = time.perf_counter() - t_start

    t0 = time.perf_counter()
    with jax.enable_x64(True):
        path, variants, ginfo = G.geometry_variants(prep, cfg)
        n = ginfo["n"]
        summaries, arrays = {}, {}
        if path == "dense":
            fixed = G.fixed_distances(n, cfg)
            for name, v in variants.items():
                summaries[name], arrays[name] = G.analyse(v["D"], v["D_fr"], cfg, fixed)
        else:
            fixed = fixed_coordinates(n, cfg)
            for name, v in variants.items():
                summaries[name], arrays[name] = analyse_matrix_free(v["P"], cfg, fixed)
    timing["geometry"] = time.perf_counter() - t0
    log(f"geometry ({path}): n={n}, N_i min/median/max = {ginfo['N_i']['min']:.0f}/"
        f"{ginfo['N_i']['median']:.0f}/{ginfo['N_i']['max']:.0f}, "
        f"r_low={summaries['plugin']['r_low']} ({timing['geometry']:.1f} s)")

    t0 = time.perf_counter()
    store = CellStore(out_dir, {"part": "E4", **_salt(cfg, path=path)})
    targets = G.as_targets(variants, cfg)
    mds_coords = arrays[cfg.mds_variant]["coords_low"]
    e4_rows = []
    if prep.train is None:
        log(prep.info.get("E4_note") or "E4 skipped: no labels")
    for pe in (cfg.encodings if prep.train is not None else ()):
        for seed in range(cfg.seeds):
            found = store.get({"pe": pe, "seed": seed})
            row = found if found is not None else store.put(
                {"pe": pe, "seed": seed},
                train_cell(cfg, prep, pe, seed, mds_coords, targets, out_dir))
            e4_rows.append(row)
            how = "stored" if found is not None else f"{row['seconds']:.1f} s"
            log(f"E4 {pe:>10s} seed {seed}: test accuracy {row['test_accuracy']:.3f} ({how})")
    timing["E4"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sens_rows = _sensitivity(cfg, out_dir, log)
    timing["sensitivity"] = time.perf_counter() - t0

    trained = {key: [r["trained_stress"] for r in e4_rows
                     if r["pe"] == pe and r.get("trained_stress")]
               for key, pe in (("learned", "learned"), ("mds_trained", "mds"), ("t5", "t5"))}
    e1 = {v: R.e1_entries(summaries[v], trained, v) for v in variants}
    if path == "matrix_free":  # trained encoders whose stress needs distances: say so
        for key, pe in (("learned", "learned"), ("mds_trained", "mds"), ("t5", "t5")):
            for v in e1:
                if any(r["pe"] == pe for r in e4_rows) and key not in e1[v]:
                    e1[v][key] = {"raw": not_computed(n), "optimal": not_computed(n)}
    if cfg.pretrained:
        from experiments._stress_pretrained import pretrained_e1_rows
        with jax.enable_x64(True):
            for v, rows in pretrained_e1_rows(cfg, prep, targets).items():
                e1[v].update(rows)
    e4 = R.e4_summary(e4_rows)
    ceiling = prep.info.get("task", {}).get("bayes_accuracy")
    claim_list = R.claims(e1, summaries, e4, cfg, ceiling)
    files = R.plots(out_dir, variants, arrays, e1, e4, sens_rows)
    timing["total"] = time.perf_counter() - t_start
    timing["cpu_total"] = time.process_time() - cpu_start

    results = {
        "experiment": "stress_table", "paper": "arXiv 2604.05217",
        "dataset": cfg.dataset, "mode": cfg.mode,
        "interpretation": {
            "metric": cfg.metric, "stress": "Eq.(4) normalised raw stress, no square root",
            "stress_scale": {"mds_rows": "raw (primary) and optimal",
                             "other_rows": "optimal (primary) and raw"},
            "special_tokens": {"keep_special": cfg.keep_special,
                               "model_inputs": "[CLS] ... [SEP]" if cfg.dataset != "synthetic"
                               else "none (synthetic corpus has no specials)"},
            "pad_mode": cfg.pad_mode, "smoothing": cfg.smoothing, "top_k": cfg.top_k,
            "min_count": cfg.min_count,
            "rank_rule": {"full": ["threshold", cfg.tau], "low": ["energy", cfg.eps],
                          "low_alt": ["energy", cfg.eps_alt]},
            "geometry": ginfo["geometry"],
            "debias_variants": list(variants), "N_i": ginfo["N_i"],
            "N_i_per_half": ginfo["N_i_per_half"], "n": n,
            "adapters": {"sinusoidal_dim": cfg.sinusoidal_dim, "rope_head_dim": cfg.rope_head_dim,
                         "rope_mode": cfg.rope_mode, "alibi_scale": cfg.alibi_scale,
                         "learned": "raw rows (no LayerNorm) of the trained E4 table"},
            "mds_pe": {"variant": cfg.mds_variant, "rank_rule": ["energy", cfg.eps],
                       "scale": cfg.mds_scale, "trainable": cfg.mds_trainable,
                       "lift": cfg.mds_lift, "max_rank": cfg.mds_max_rank,
                       "rank_cap": "min(r_eps, d_model, mds_max_rank)", "fill": "nearest",
                       "registry": "pe='mds' (posjax.encodings.mds)"},
            "erank_on": "eig_B", "neg_eig": "clip",
        },
        "options": cfg.record(), "versions": versions(), "data": prep.info,
        "geometry": {"info": ginfo, "variants": summaries},
        "E1": e1, "E2": {v: s["E2"] for v, s in summaries.items()},
        "E3": {v: s["E3"] for v, s in summaries.items()},
        "E4": {"rows": e4_rows, "summary": {pe: {k: s[k] for k in ("mean", "sd", "seeds", "params")}
                                            for pe, s in e4.items()},
               "bayes_accuracy": ceiling},
        "sensitivity": {"rows": sens_rows, "geometry": G.geometry_path(cfg, cfg.sens_positions),
                        "spec_toy": {str(k): v for k, v in
                                     G.INTERPRETATIONS_TOY_STRESS.items()}},
        "claims": claim_list, "timing_s": timing, "files": files,
    }
    write_json(os.path.join(out_dir, "results.json"), results)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(R.report_markdown(results, cfg, e1, summaries, e4, ceiling, sens_rows, claim_list))
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser("Stress of positional encodings vs the Hellinger geometry of positional "
                          "statistics (arXiv 2604.05217)", default_out="runs/stress_table")
    p.add_argument("--dataset", default="synthetic", help="synthetic, sst2 or imdb")
    p.add_argument("--data-dir", default=None,
                   help="local <split>.parquet|csv|jsonl files "
                        "(default: $POSJAX_DATA_DIR, else the hub)")
    p.add_argument("--vocab-file", default=None, help="a bert-base-uncased vocab.txt")
    p.add_argument("--pretrained", default=None,
                   help="checkpoint dir or hub id: adds its learned position table to E1")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer.json, vocab.txt or checkpoint directory")
    p.add_argument("--progress", action="store_true", help="show training progress bars")
    args = p.parse_args(argv)
    overrides = config_overrides(StressConfig, args, ("data_dir", "vocab_file", "pretrained",
                                                      "tokenizer", "progress"))
    cfg = make_config(args.dataset, preset=preset_name(args), **overrides)
    results = run(cfg, args.out)
    print()
    print(R.compact_e1(results))
    print(f"\nreport:  {os.path.join(args.out, 'report.md')}")
    print(f"results: {os.path.join(args.out, 'results.json')}")
    plots = ", ".join(os.path.basename(f) for f in results["files"].values())
    print(f"plots:   {plots} in {args.out}")
    print(f"wall time: {results['timing_s']['total']:.1f} s "
          f"(process CPU time {results['timing_s']['cpu_total']:.1f} s)")
    return results


if __name__ == "__main__":
    run_cli(main)
