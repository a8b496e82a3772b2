"""``experiments.network_simulation``: the summary over seeds (with the cross-seed alignment),
the claims with their verdicts, the plots and report.md."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from experiments.common import (converged_cell, converged_claim, display_label, fmt_ci,
                                learned_label, loss_plateau, markdown_table, mean_ci, CI_METHOD,
                                PLATEAU_CRITERION)
from experiments.network_simulation.config import NetworkSimulationConfig


def cross_seed_alignment(label: str, seeds: Sequence[int], out_dir: str) -> float | None:
    """Mean pairwise Procrustes R² between the layer-0 tables of different seeds."""
    from posjax.analysis.similarity import procrustes_align

    tabs = []
    for s in seeds:
        path = os.path.join(out_dir, "tables", f"{label}_seed{s}.npy")
        if os.path.exists(path):
            tabs.append(np.load(path)[0])
    if len(tabs) < 2:
        return None
    vals = [procrustes_align(tabs[i], tabs[j])[1]
            for i in range(len(tabs)) for j in range(i + 1, len(tabs))]
    return float(np.mean(vals))


def make_plots(rows, sim, opts, out_dir, labels) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from posjax.analysis.similarity import cosine_rsm, embedding_2d

    files = []
    learned = [r for r in rows if r["sigma"] is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    sig = [r["sigma"] for r in learned]
    for key, name in (("layout_spearman", "PE-RSM vs layout (Spearman)"),
                      ("fc_spearman", "PE-RSM vs FC (Spearman)"),
                      ("procrustes_r2_layout", "Procrustes R² onto layout"),
                      ("segregation", "segregation"), ("cross_seed", "cross-seed Procrustes R²")):
        ys = [r[key] if key == "cross_seed" else r[key]["mean"] for r in learned]
        axes[0].plot(sig, ys, marker="o", label=name)
    axes[0].set(xscale="log", xlabel="σ", title="recovery of the ground truth vs σ")
    axes[0].legend(fontsize=7)
    for key, style in (("r2_train", "s-"), ("r2_test", "o-")):
        axes[1].errorbar(sig, [r[key]["mean"] for r in learned], [r[key]["half"] for r in learned],
                         fmt=style, label=key, capsize=2)
    axes[1].set(xscale="log", xlabel="σ", ylabel="masked-node R²", title="prediction vs σ")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    path = os.path.join(out_dir, "network_sweep.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    files.append(path)
    show = [lab for lab in labels if os.path.exists(
        os.path.join(out_dir, "tables", f"{lab}_seed0.npy"))]
    if show:
        fig, axes = plt.subplots(2, len(show) + 1, figsize=(2.4 * (len(show) + 1), 4.8),
                                 squeeze=False)
        axes[0, 0].scatter(*sim["coords"].T, c=sim["modules"], cmap="tab10", s=12)
        axes[0, 0].set_title("true layout", fontsize=8)
        axes[1, 0].imshow(sim["fc"], cmap="RdBu_r", vmin=-1, vmax=1)
        axes[1, 0].set_title("FC", fontsize=8)
        for i, lab in enumerate(show, 1):
            tab = np.load(os.path.join(out_dir, "tables", f"{lab}_seed0.npy"))[0]
            xy = embedding_2d(tab, "pca")
            axes[0, i].scatter(*xy.T, c=sim["modules"], cmap="tab10", s=12)
            axes[0, i].set_title(f"{display_label(lab)} PE PCA", fontsize=8)
            axes[1, i].imshow(cosine_rsm(tab), cmap="RdBu_r", vmin=-1, vmax=1)
            axes[1, i].set_title("PE RSM", fontsize=8)
        for ax in axes.ravel():
            ax.set_xticks([])
            ax.set_yticks([])
        fig.tight_layout()
        path = os.path.join(out_dir, "network_pe.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        files.append(path)
    return files


def claims(cells: list[dict], cfg: NetworkSimulationConfig) -> list[dict]:
    """Claims with a threshold fixed in advance; verdicts decided by the 95 % CI over seeds.
    All are about trained models: each carries the training-loss plateau of the runs it reads
    and is "untested at this scale" when one has not converged."""
    out = []
    sig = sorted(cfg.sigmas)
    if len(sig) >= 2:
        lo, hi = learned_label(sig[0]), learned_label(sig[-1])
        by = {(c["label"], c["seed"]): c for c in cells}
        seeds = sorted({s for (lab, s) in by if lab == lo} & {s for (lab, s) in by if lab == hi})

        def conv(*labels):
            return [loss_plateau(by[(lab, s)].get("loss_curve"), f"{lab}/seed{s}")
                    for lab in labels for s in seeds]

        d = mean_ci(by[(lo, s)]["pe_vs_layout"]["spearman"]
                    - by[(hi, s)]["pe_vs_layout"]["spearman"] for s in seeds)
        out.append(converged_claim(
            {"claim": f"small init recovers the layout better: PE-RSM vs layout Spearman "
                      f"σ={sig[0]:g} − σ={sig[-1]:g} > 0", "ci": d, "threshold": 0.0},
            conv(lo, hi)))
        d = mean_ci(by[(lo, s)]["r2_test"] - by[(hi, s)]["r2_test"] for s in seeds)
        out.append(converged_claim(
            {"claim": f"small init predicts held-out activity better: R² test σ={sig[0]:g} − "
                      f"σ={sig[-1]:g} > 0", "ci": d, "threshold": 0.0}, conv(lo, hi)))
        v = mean_ci(by[(lo, s)]["pe_vs_layout"]["spearman"] for s in seeds)
        out.append(converged_claim(
            {"claim": f"the learned PE (σ={sig[0]:g}) mirrors the layout: PE-RSM vs layout "
                      "Spearman > 0", "ci": v, "threshold": 0.0}, conv(lo)))
    return out


def summarise(cells: list[dict], labels: Sequence[str], seeds: Sequence[int], out_dir: str
              ) -> list[dict]:
    """Per label: mean ± 95 % CI over seeds of the R² and of every recovery score, and the
    cross-seed alignment of the stored tables."""
    rows = []
    for lab in labels:
        cs = [c for c in cells if c["label"] == lab]
        row = {"label": lab, "sigma": cs[0]["sigma"], "n": len(cs), "seeds": seeds,
               "r2_train": mean_ci(c["r2_train"] for c in cs),
               "r2_test": mean_ci(c["r2_test"] for c in cs)}
        for name, get in (("layout_spearman", lambda c: c["pe_vs_layout"]["spearman"]),
                          ("layout_pearson", lambda c: c["pe_vs_layout"]["pearson"]),
                          ("fc_spearman", lambda c: c["pe_vs_fc"]["spearman"]),
                          ("procrustes_r2_layout", lambda c: c["procrustes_r2_layout"]),
                          ("modularity", lambda c: c["modularity"]),
                          ("segregation", lambda c: c["segregation"])):
            row[name] = mean_ci(get(c) for c in cs if "pe_vs_layout" in c)
        cs_align = cross_seed_alignment(lab, seeds, out_dir)
        row["cross_seed"] = cs_align if cs_align is not None else float("nan")
        rows.append(row)
    return rows


def write_report(rows: list[dict], found: list[dict], cfg: NetworkSimulationConfig, sim_opts,
                 sizes: tuple[int, int], seeds: Sequence[int], layout_vs_fc: dict, preset: str
                 ) -> str:
    """The text of report.md: the summary table over seeds and the claims with their verdicts
    (``sizes``: train / test windows)."""
    fmt = lambda ci: fmt_ci(ci, 1, 3)
    headers = ["PE", "seeds", "R² train", "R² test", "PE~layout ρ", "PE~FC ρ", "Procrustes R²",
               "modularity Q", "segregation", "cross-seed R²"]
    table = [[display_label(r["label"], "learned σ="), r["n"], fmt(r["r2_train"]),
              fmt(r["r2_test"]), fmt(r["layout_spearman"]), fmt(r["fc_spearman"]),
              fmt(r["procrustes_r2_layout"]), fmt(r["modularity"]), fmt(r["segregation"]),
              "n/a" if np.isnan(r["cross_seed"]) else f"{r['cross_seed']:.3f}"]
             for r in rows]
    return "\n".join([
        "# Network simulation: learned-PE recovery of a known layout (arXiv 2406.08272 stand-in)",
        "", f"Preset: {preset}; layout {sim_opts.layout}, "
        f"{sim_opts.num_nodes} nodes, {sizes[0]}/{sizes[1]} train/test windows "
        f"of {sim_opts.window} steps; d={cfg.model.d_model}, {cfg.model.num_layers} layers, "
        f"{cfg.train.steps} steps, lr {cfg.train.learning_rate}, seeds {seeds}.",
        f"Uncertainty: {CI_METHOD}.",
        f"True layout vs FC (Spearman of RSMs): {layout_vs_fc['spearman']:.3f} (the FC mirrors "
        "the layout, so recovering either is recovering the geometry).", "",
        markdown_table(headers, table), "",
        "ρ: Spearman between the PE cosine-RSM and the negative distance (layout) or the FC "
        "(upper triangles, mean over layers). Procrustes R²: the learned table onto the 2-D "
        "coordinates. Modularity/segregation of the PE RSM under the known modules (grid "
        "quadrants for grid2d). Cross-seed: mean pairwise Procrustes R² of layer-0 tables.", "",
        "## Claims (differences paired by seed)", "",
        markdown_table(["claim", "mean ± 95 % CI", "seeds", "converged runs", "verdict"],
                       [[c["claim"], fmt(c["ci"]), c["ci"]["n"], converged_cell(c), c["verdict"]]
                        for c in found]), "",
        f"Converged: {PLATEAU_CRITERION}.",
        "", "Plots: network_sweep.png, network_pe.png."])
