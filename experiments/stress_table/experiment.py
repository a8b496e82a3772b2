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
from posjax.data.synthetic import sample_distributions, three_regime_corpus

from experiments.common import (CellStore, config_overrides, experiment_parser, preset_name,
                                versions, write_json)
from experiments.stress_table import report as R
from experiments.stress_table.config import (_PATH_OPTIONS, StressConfig, StressPlan,
                                             make_config)
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


def _sensitivity(store: CellStore, spec: dict[str, Any], *, log) -> list[dict]:
    """The sample-size rows (``spec``: :attr:`StressPlan.sensitivity`): every ``(samples,
    debias)`` setting (no split-half on the matrix-free path, whose cells are keyed by its
    options), ``spec["repeats"]`` draws each."""
    matrix_free, pairs = spec["matrix_free"], spec["pair_options"]
    settings = [(s, d) for s in spec["samples"]
                for d in (("none",) if s is None or matrix_free else ("none", "split_half"))]
    path_key = ({"path": "matrix_free", "k": 3, "stress_exact_max": pairs["exact_max"],
                 "stress_pairs": pairs["pairs"]} if matrix_free else {})
    cells = {(s, d): [store.compute({"samples": s, "debias": d, "repeat": k, **path_key},
                                    lambda s=s, d=d, k=k: _sensitivity_cell(
                                        spec["n"], spec["vocab"], s, d, k,
                                        matrix_free=matrix_free, pair_options=pairs,
                                        mixing=spec["mixing"], alpha=spec["alpha"],
                                        data_seed=spec["data_seed"],
                                        encodings=spec["encodings"]))
                      for k in range(1 if s is None else spec["repeats"])]
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


@dataclasses.dataclass
class Geometry:
    """The geometry step: its ``path``, the estimator ``variants`` and their ``info``
    (:func:`G.geometry_variants`), tables (:func:`G.variant_tables`) and stress ``targets``."""

    path: str
    variants: dict[str, dict]
    info: dict[str, Any]
    summaries: dict[str, dict]
    arrays: dict[str, dict]
    targets: dict[str, Any]


def _geometry(prep, plan: StressPlan) -> Geometry:
    """The geometry of the corpus ``prep`` and its tables, in float64 (full-rank MDS stress is
    compared with zero below 1e-6)."""
    with jax.enable_x64(True):
        path, variants, info = G.geometry_variants(prep, **plan.geometry)
        if plan.required_n and info["n"] < plan.required_n:
            raise ValueError(f"only n = {info['n']} positions could be analysed, fewer than the "
                             f"num_positions = {plan.required_n} requested (require_n)")
        summaries, arrays = G.variant_tables(
            path, variants, plan.encodings, k=plan.matrix_free_k, pairs=plan.pairs,
            smacof_max_iter=plan.smacof_max_iter, smacof_tol=plan.smacof_tol, **plan.tables)
    return Geometry(path, variants, info, summaries, arrays, G.as_targets(variants, plan.pairs))


def _accuracy(store: CellStore, prep, geometry: Geometry, out_dir: str, *, encodings, seeds,
              mds_variant: str, log, **train: Any) -> list[dict]:
    """One trained encoder per PE and seed (finished cells reused from ``store``); ``train``:
    the keyword arguments of :func:`train_cell`."""
    if prep.train is None:
        log(prep.info.get("accuracy_note") or "accuracy table skipped: no labels")
        return []
    rows, mds_coords = [], geometry.arrays[mds_variant]["coords_low"]
    for pe in encodings:
        for seed in range(seeds):
            found = store.get({"pe": pe, "seed": seed})
            row = found if found is not None else store.put(
                {"pe": pe, "seed": seed},
                train_cell(prep, pe, seed, targets=geometry.targets, mds_coords=mds_coords,
                           run_dir=os.path.join(out_dir, "train", f"{pe}-seed{seed}"), **train))
            rows.append(row)
            how = "stored" if found is not None else f"{row['seconds']:.1f} s"
            log(f"accuracy {pe:>10s} seed {seed}: test accuracy {row['test_accuracy']:.3f} ({how})")
    return rows


def run(cfg: StressConfig, out_dir: str, *, log=print) -> dict[str, Any]:
    """Run the whole experiment into ``out_dir`` and return the results dict: the options are
    resolved once (:meth:`StressConfig.plan`), then the corpus, the geometry, the accuracy
    rows, the sample-size analysis and the report."""
    refuse_old_layout(out_dir)
    plan = cfg.plan()
    t_start, cpu_start = time.perf_counter(), time.process_time()
    os.makedirs(out_dir, exist_ok=True)
    prep = prepare(cfg, out_dir)
    timing = {"data": time.perf_counter() - t_start}

    t0 = time.perf_counter()
    geometry = _geometry(prep, plan)
    ginfo, n, summaries = geometry.info, geometry.info["n"], geometry.summaries
    ginfo["geometry"] = {"path": geometry.path, "option": cfg.geometry,
                         **{k: getattr(cfg, k) for k in _PATH_OPTIONS[1:]}}
    timing["geometry"] = time.perf_counter() - t0
    log(f"geometry ({geometry.path}): n={n}, N_i min/median/max = {ginfo['N_i']['min']:.0f}/"
        f"{ginfo['N_i']['median']:.0f}/{ginfo['N_i']['max']:.0f}, "
        f"r_low={summaries['plugin']['r_low']} ({timing['geometry']:.1f} s)")

    t0 = time.perf_counter()
    # "E4" in the salt: the on-disk key of the accuracy cells, kept so finished cells stay valid
    accuracy_rows = _accuracy(CellStore(out_dir, plan.accuracy_salt[geometry.path]), prep,
                              geometry, out_dir, log=log, **plan.accuracy)
    timing["accuracy"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    sens_rows = _sensitivity(CellStore(out_dir, plan.sensitivity_salt), plan.sensitivity,
                             log=log)
    timing["sensitivity"] = time.perf_counter() - t0

    trained = {key: [r.get("trained_stress") for r in accuracy_rows if r["pe"] == pe]
               for key, pe in (("learned", "learned"), ("mds_trained", "mds"), ("t5", "t5"))}
    stress = {v: stress_rows(summaries[v], trained, v) for v in geometry.variants}
    if plan.pretrained:
        from posjax.pretrained import position_table
        checkpoint = plan.pretrained["checkpoint"]
        with jax.enable_x64(True):
            tables = {key: position_table(checkpoint, post_layernorm=ln) for key, ln in
                      (("pretrained", False), ("pretrained_ln", True))
                      if not ln or plan.pretrained["layernorm"]}
            for v, rows in G.pretrained_stress_rows(
                    tables, prep.model_offset, geometry.targets, checkpoint=checkpoint,
                    required=plan.pretrained["required"]).items():
                stress[v].update(rows)
    accuracy = R.accuracy_summary(accuracy_rows)
    ceiling = prep.info.get("task", {}).get("bayes_accuracy")
    claim_list = geometry_claims(stress, summaries) + R.accuracy_claims(
        accuracy, ceiling, chance_claim=cfg.dataset == "synthetic")
    files = stress_figures(out_dir, geometry.variants, geometry.arrays, stress, accuracy,
                           sens_rows)
    timing["total"] = time.perf_counter() - t_start
    timing["cpu_total"] = time.process_time() - cpu_start

    options = dataclasses.asdict(cfg)
    results = {
        "experiment": "stress_table", "paper": "arXiv 2604.05217",
        "dataset": cfg.dataset, "mode": cfg.mode,
        "interpretation": R.interpretation(options, ginfo, list(geometry.variants)),
        "options": options, "versions": versions(), "data": prep.info,
        "geometry": {"info": ginfo, "variants": summaries},
        "stress": stress, "spectrum": {v: s["spectrum"] for v, s in summaries.items()},
        "parameters": {v: s["parameters"] for v, s in summaries.items()},
        "accuracy": {"rows": accuracy_rows, "bayes_accuracy": ceiling,
                     "summary": {pe: {k: s[k] for k in ("mean", "sd", "seeds", "params")}
                                 for pe, s in accuracy.items()}},
        "sensitivity": {"rows": sens_rows,
                        "geometry": "matrix_free" if plan.sensitivity["matrix_free"] else "dense",
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

