"""Driver of the stress experiment (see the package docstring): :func:`run` and the command
line :func:`main`."""
from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Sequence

import jax

from posjax.analysis import stress_geometry as G
from posjax.analysis.stress_plots import stress_figures
from posjax.analysis.stress_report import geometry_claims, stress_rows
from posjax.analysis.stress_tables import dense_tables, matrix_free_tables
from posjax.data.synthetic import sample_distributions, three_regime_corpus

from experiments.common import (CellStore, config_overrides, experiment_parser, preset_name,
                                versions, write_json)
from experiments.stress_table import report as R
from experiments.stress_table.config import (_PATH_OPTIONS, SENSITIVITY_ENCODINGS,
                                             StressConfig, make_config)
from experiments.stress_table.data import prepare
from experiments.stress_table.train import train_cell


def _sensitivity_cell(n: int, vocab: int, samples: int | None, debias: str, repeat: int, *,
                      mixing: str, alpha: float, data_seed: int, **stress) -> dict[str, Any]:
    """One cell of the sample-size analysis: :func:`G.sensitivity_stress` of the ``n``-position
    three-regime corpus' exact ``P`` (``samples`` None) or of ``samples`` draws per position
    (split halves for ``debias="split_half"``)."""
    corpus = three_regime_corpus(n, vocab, mixing=mixing, alpha=alpha, seed=data_seed)
    P = corpus.P if samples is None else sample_distributions(
        corpus.P, samples, seed=data_seed + 1000 * repeat + 17,
        split_half=debias == "split_half")[0]
    return G.sensitivity_stress(P, debias=debias, mds_seed=data_seed, **stress)


def _sensitivity(store: CellStore, n: int, vocab: int, samples: tuple[int | None, ...],
                 repeats: int, *, matrix_free: bool, pair_options: dict[str, Any], log,
                 **cell: Any) -> list[dict]:
    """The sample-size rows: every ``(samples, debias)`` setting (no split-half on the
    matrix-free path, whose cells are keyed by its options), ``repeats`` draws each."""
    settings = [(s, d) for s in samples
                for d in (("none",) if s is None or matrix_free else ("none", "split_half"))]
    path_key = ({"path": "matrix_free", "k": 3, "stress_exact_max": pair_options["exact_max"],
                 "stress_pairs": pair_options["pairs"]} if matrix_free else {})
    cells = {(s, d): [store.compute({"samples": s, "debias": d, "repeat": k, **path_key},
                                    lambda s=s, d=d, k=k: _sensitivity_cell(
                                        n, vocab, s, d, k, matrix_free=matrix_free,
                                        pair_options=pair_options, **cell))
                      for k in range(1 if s is None else repeats)]
             for s, d in settings}
    log(f"sensitivity: {len(cells)} settings done"
        + (" (matrix-free: no split-half cells)" if path_key else ""))
    return G.summarise_sensitivity(cells)


def refuse_old_layout(out_dir: str) -> None:
    """ValueError when ``out_dir`` holds a results.json whose tables are keyed E1-E4 (the
    layout before the tables were named stress, spectrum, parameters, accuracy)."""
    path = os.path.join(out_dir, "results.json")
    if os.path.exists(path):
        with open(path) as f:
            old = sorted({"E1", "E2", "E3", "E4"} & set(json.load(f)))
        if old:
            raise ValueError(
                f"{out_dir} holds a stress_table run of the old layout (results.json tables "
                f"{', '.join(old)}; now 'stress', 'spectrum', 'parameters', 'accuracy', see "
                "docs/stress_table.md): choose a new --out, or delete its results.json to rerun "
                "there (its finished cells are reused)")


def run(cfg: StressConfig, out_dir: str, *, log=print) -> dict[str, Any]:
    """Run the whole experiment into ``out_dir`` and return the results dict."""
    refuse_old_layout(out_dir)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    os.makedirs(out_dir, exist_ok=True)
    timing: dict[str, float] = {}
    pairs, tables, encodings = cfg.pair_options(), cfg.table_options(), cfg.encoding_options()
    prep = prepare(cfg, out_dir)
    timing["data"] = time.perf_counter() - t_start

    t0 = time.perf_counter()
    with jax.enable_x64(True):
        path, variants, ginfo = G.geometry_variants(
            prep, metric=cfg.metric, path_of=cfg.geometry_path,
            estimator=cfg.estimator_options(), split_half_ok=cfg.mds_variant != "split_half")
        n = ginfo["n"]
        if cfg.require_n and n < cfg.num_positions:
            raise ValueError(f"only n = {n} positions could be analysed, fewer than the "
                             f"num_positions = {cfg.num_positions} requested (require_n)")
        ginfo["geometry"] = {"path": path, "option": cfg.geometry,
                             **{k: getattr(cfg, k) for k in _PATH_OPTIONS[1:]}}
        summaries, arrays = {}, {}
        if path == "dense":
            fixed = G.fixed_distances(n, encodings)
            for name, v in variants.items():
                summaries[name], arrays[name] = dense_tables(
                    v["D"], v["D_fr"], fixed, smacof_max_iter=cfg.smacof_max_iter,
                    smacof_tol=cfg.smacof_tol, **tables)
        else:
            fixed = G.fixed_coordinates(n, encodings)
            for name, v in variants.items():
                summaries[name], arrays[name] = matrix_free_tables(
                    v["P"], fixed, k=cfg.matrix_free_k, **pairs, **tables)
    timing["geometry"] = time.perf_counter() - t0
    log(f"geometry ({path}): n={n}, N_i min/median/max = {ginfo['N_i']['min']:.0f}/"
        f"{ginfo['N_i']['median']:.0f}/{ginfo['N_i']['max']:.0f}, "
        f"r_low={summaries['plugin']['r_low']} ({timing['geometry']:.1f} s)")

    t0 = time.perf_counter()
    # "E4": the on-disk key of the accuracy cells, kept so that finished cells stay valid
    store = CellStore(out_dir, {"part": "E4", **cfg.salt(path=path)})
    targets = G.as_targets(variants, pairs)
    mds_coords = arrays[cfg.mds_variant]["coords_low"]
    mds = {"scale": cfg.mds_scale, "max_rank": cfg.mds_max_rank,
           "trainable": cfg.mds_trainable, "lift": cfg.mds_lift}
    accuracy_rows = []
    if prep.train is None:
        log(prep.info.get("accuracy_note") or "accuracy table skipped: no labels")
    for pe in (cfg.encodings if prep.train is not None else ()):
        for seed in range(cfg.seeds):
            found = store.get({"pe": pe, "seed": seed})
            row = found if found is not None else store.put(
                {"pe": pe, "seed": seed},
                train_cell(prep, pe, seed, model=cfg.model, train=cfg.train,
                           pooling=cfg.pooling, targets=targets, mds_coords=mds_coords,
                           mds=mds, run_dir=os.path.join(out_dir, "train", f"{pe}-seed{seed}"),
                           run_config={"dataset": cfg.dataset}))
            accuracy_rows.append(row)
            how = "stored" if found is not None else f"{row['seconds']:.1f} s"
            log(f"accuracy {pe:>10s} seed {seed}: test accuracy {row['test_accuracy']:.3f} ({how})")
    timing["accuracy"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sens_store = CellStore(out_dir, {"part": "sensitivity", **cfg.salt((
        "metric", "mixing", "alpha", "data_seed", "sens_positions", "sens_vocab",
        "sinusoidal_dim", "rope_head_dim", "rope_mode", "alibi_scale", "alibi_heads"))})
    sens_rows = _sensitivity(
        sens_store, cfg.sens_positions, cfg.sens_vocab, cfg.sens_samples, cfg.sens_repeats,
        matrix_free=cfg.geometry_path(cfg.sens_positions) == "matrix_free",
        pair_options=pairs, log=log, mixing=cfg.mixing, alpha=cfg.alpha,
        data_seed=cfg.data_seed, encodings=cfg.encoding_options(SENSITIVITY_ENCODINGS))
    timing["sensitivity"] = time.perf_counter() - t0

    trained = {key: [r.get("trained_stress") for r in accuracy_rows if r["pe"] == pe]
               for key, pe in (("learned", "learned"), ("mds_trained", "mds"), ("t5", "t5"))}
    stress = {v: stress_rows(summaries[v], trained, v) for v in variants}
    if cfg.pretrained:
        from posjax.pretrained import position_table
        with jax.enable_x64(True):
            tables = {key: position_table(cfg.pretrained, post_layernorm=ln) for key, ln in
                      (("pretrained", False), ("pretrained_ln", True))
                      if not ln or cfg.pretrained_layernorm}
            for v, rows in G.pretrained_stress_rows(
                    tables, prep.model_offset, targets, checkpoint=cfg.pretrained,
                    required=cfg.num_positions if cfg.require_n else None).items():
                stress[v].update(rows)
    accuracy = R.accuracy_summary(accuracy_rows)
    ceiling = prep.info.get("task", {}).get("bayes_accuracy")
    claim_list = geometry_claims(stress, summaries) + R.accuracy_claims(
        accuracy, ceiling, chance_claim=cfg.dataset == "synthetic")
    files = stress_figures(out_dir, variants, arrays, stress, accuracy, sens_rows)
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
                         "learned": "raw rows (no LayerNorm) of the trained encoders' tables"},
            "mds_pe": {"variant": cfg.mds_variant, "rank_rule": ["energy", cfg.eps],
                       "scale": cfg.mds_scale, "trainable": cfg.mds_trainable,
                       "lift": cfg.mds_lift, "max_rank": cfg.mds_max_rank,
                       "rank_cap": "min(r_eps, d_model, mds_max_rank)", "fill": "nearest",
                       "registry": "pe='mds' (posjax.encodings.mds)"},
            "erank_on": "eig_B", "neg_eig": "clip",
        },
        "options": dataclasses.asdict(cfg), "versions": versions(), "data": prep.info,
        "geometry": {"info": ginfo, "variants": summaries},
        "stress": stress, "spectrum": {v: s["spectrum"] for v, s in summaries.items()},
        "parameters": {v: s["parameters"] for v, s in summaries.items()},
        "accuracy": {"rows": accuracy_rows, "summary": {pe: {k: s[k] for k in ("mean", "sd", "seeds", "params")}
                                            for pe, s in accuracy.items()},
               "bayes_accuracy": ceiling},
        "sensitivity": {"rows": sens_rows, "geometry": cfg.geometry_path(cfg.sens_positions),
                        "spec_toy": {str(k): v for k, v in
                                     R.INTERPRETATIONS_TOY_STRESS.items()}},
        "claims": claim_list, "timing_s": timing, "files": files,
    }
    write_json(os.path.join(out_dir, "results.json"), results)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(R.report_markdown(results, accuracy))
    return results


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser("Stress of positional encodings vs the Hellinger geometry of positional "
                          "statistics (arXiv 2604.05217)", default_out="runs/stress_table")
    p.add_argument("--dataset", default="synthetic",
                   help="synthetic, sst2, imdb, text (--data-dir) or stdlib (docstrings)")
    p.add_argument("--data-dir", default=None,
                   help="local <split>.parquet|csv|jsonl files "
                        "(default: $POSJAX_DATA_DIR, else the hub)")
    p.add_argument("--vocab-file", default=None, help="a bert-base-uncased vocab.txt")
    p.add_argument("--pretrained", default=None,
                   help="checkpoint dir or hub id: adds its learned position table to the stress table")
    p.add_argument("--tokenizer", default=None,
                   help="tokenizer.json, vocab.txt or checkpoint directory")
    p.add_argument("--progress", action="store_true", help="show training progress bars")
    args = p.parse_args(argv)
    overrides = config_overrides(StressConfig, args, ("data_dir", "vocab_file", "pretrained",
                                                      "tokenizer"))
    if args.progress:
        overrides.setdefault("train", {})["progress"] = True
    dataset = overrides.pop("dataset", args.dataset)  # --set dataset= is --dataset
    cfg = make_config(dataset, preset=preset_name(args), **overrides)
    results = run(cfg, args.out)
    print()
    print(R.compact_stress_table(results))
    print(f"\nreport:  {os.path.join(args.out, 'report.md')}")
    print(f"results: {os.path.join(args.out, 'results.json')}")
    plots = ", ".join(os.path.basename(f) for f in results["files"].values())
    print(f"plots:   {plots} in {args.out}")
    print(f"wall time: {results['timing_s']['total']:.1f} s "
          f"(process CPU time {results['timing_s']['cpu_total']:.1f} s)")
    return results

