"""The figures of a stress analysis (arXiv 2604.05217): the Hellinger distance matrix, the
2-D MDS configuration, the spectrum of ``B``, stress per encoding, accuracy against PE
parameters and stress against samples per position, written as PNG files."""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from posjax.analysis.stress_report import ENCODING_LABELS, VARIANT_LABELS


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else float("nan")


def stress_figures(out_dir: str, variants: dict[str, dict], arrays: dict[str, dict],
                   stress: dict[str, dict], accuracy: dict[str, dict] | None = None,
                   sens_rows: list[dict] | None = None) -> dict[str, str]:
    """Write the PNG figures of a stress analysis into ``out_dir``; returns ``{name: path}``.

    ``hellinger_heatmap`` (``variants[v]["D"] [n, n]``; left out on the matrix-free path, which
    has no such array), ``mds_2d`` (``arrays[v]["coords_2d"]``), ``spectrum`` (``eigenvalues``
    over ``trace``, or their sum), ``stress_bars`` (``stress[v]``: σ_raw for MDS rows, σ*
    otherwise), and when given ``accuracy_vs_params`` (``{pe: {"params", "mean", "sd"}}``) and
    ``sensitivity`` (rows of :func:`~posjax.analysis.stress_geometry.summarise_sensitivity`).
    ``arrays``: as :func:`~posjax.analysis.stress_tables.dense_tables` returns them.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = {}

    def save(fig, name):
        path = os.path.join(out_dir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files[name.removesuffix(".png")] = path

    names = list(variants)
    if all("D" in variants[v] for v in names):  # no [n, n] array on the matrix-free path
        fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
        for ax, v in zip(axes[0], names):
            im = ax.imshow(variants[v]["D"], cmap="viridis", vmin=0)
            ax.set_title(f"Hellinger D ({VARIANT_LABELS[v]})")
            ax.set_xlabel("position j"), ax.set_ylabel("position i")
            fig.colorbar(im, ax=ax, fraction=0.046)
        save(fig, "hellinger_heatmap.png")

    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8), squeeze=False)
    for ax, v in zip(axes[0], names):
        X = arrays[v]["coords_2d"]
        y = X[:, 1] if X.shape[1] > 1 else np.zeros(len(X))
        sc = ax.scatter(X[:, 0], y, c=np.arange(len(X)), cmap="plasma", s=14)
        ax.plot(X[:, 0], y, lw=0.4, c="grey")
        ax.set_title(f"2-D MDS ({VARIANT_LABELS[v]})")
        fig.colorbar(sc, ax=ax, fraction=0.046, label="position")
    save(fig, "mds_2d.png")

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for v in names:
        lam = np.clip(arrays[v]["eigenvalues"], 0, None)
        lam = lam / arrays[v].get("trace", lam.sum())  # top k only: the trace is the total
        k = np.arange(1, len(lam) + 1)
        ax.semilogy(k[lam > 0], lam[lam > 0], marker=".", label=VARIANT_LABELS[v])
    ax.set_xlabel("k"), ax.set_ylabel("λ_k / Σλ+"), ax.set_title("Spectrum of B")
    ax.legend()
    save(fig, "spectrum.png")

    keys = [k for k in ENCODING_LABELS if k in stress[names[0]]]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(keys) + 2), 4))
    width = 0.8 / len(names)
    for i, v in enumerate(names):
        vals = [_number(stress[v].get(k, {}).get("raw" if k.startswith("mds") else "optimal"))
                for k in keys]
        ax.bar(np.arange(len(keys)) + i * width, vals, width, label=VARIANT_LABELS[v])
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2)
    ax.set_xticklabels([k for k in keys], rotation=35, ha="right")
    ax.set_ylabel("stress (σ_raw for MDS rows, σ* otherwise)"), ax.set_yscale("symlog",
                                                                                linthresh=1e-3)
    ax.legend(), ax.set_title("Stress per encoding")
    save(fig, "stress_bars.png")

    if accuracy:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for pe, s in accuracy.items():
            ax.errorbar(max(s["params"], 0), s["mean"], yerr=s["sd"], fmt="o", capsize=3)
            ax.annotate(pe, (max(s["params"], 0), s["mean"]), textcoords="offset points",
                        xytext=(4, 4), fontsize=8)
        ax.set_xscale("symlog", linthresh=10)
        ax.set_xlabel("PE parameters"), ax.set_ylabel("test accuracy")
        ax.set_title("Accuracy vs PE parameter count")
        save(fig, "accuracy_vs_params.png")

    if sens_rows:
        fig, ax = plt.subplots(figsize=(5.5, 3.8))
        for debias, ls in (("none", "-"), ("split_half", "--")):
            rows = [r for r in sens_rows if r["samples_per_position"] and r["debias"] == debias]
            rows.sort(key=lambda r: r["samples_per_position"])
            xs = [r["samples_per_position"] for r in rows]
            for key, c in (("alibi", "C0"), ("sinusoidal", "C1"), ("rope", "C2")):
                ax.semilogx(xs, [r[f"{key}/optimal"] for r in rows], ls, c=c, marker="o",
                            label=f"{key} ({debias})")
        ax.set_xlabel("samples per position"), ax.set_ylabel("σ*")
        ax.set_title("Sensitivity to samples per position"), ax.legend(fontsize=7)
        save(fig, "sensitivity.png")
    return files
