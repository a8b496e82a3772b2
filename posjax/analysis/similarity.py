"""Similarity of a learned positional-encoding table to a ground truth (arXiv 2406.08272;
docs/interpretations.md), plus data-agnostic network metrics and a 2-D view of a table.

All scores are rotation invariant or alignment based, because any rotation of a valid code is
an equally valid code:

* RSM cosine: S[i, j] = cos(p_i, p_j) for both tables; the score is the cosine between the
  vectorised strict upper triangles of the two similarity matrices;
* Spearman: rank correlation between the same two vectors;
* Procrustes R^2: centre P (n x d) and G (n x d'), find the orthogonal Q (semi-orthogonal when
  d != d') and scale s minimising ||s P Q - G||_F^2; R^2 = 1 - min / ||G||_F^2, which equals
  (sum of singular values of P^T G)^2 / (||P||_F^2 ||G||_F^2).

Tables of shape ``[L, n, d]`` (one per layer) are scored per layer and averaged.
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _as_np(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def cosine_rsm(table) -> np.ndarray:
    """Cosine-similarity matrix ``[n, n]`` of the rows of ``table [n, d]``."""
    t = _as_np(table)
    if t.ndim != 2:
        raise ValueError(f"table must be [n, d], got shape {t.shape}")
    norms = np.linalg.norm(t, axis=1, keepdims=True)
    unit = t / np.where(norms > 0, norms, 1.0)
    return unit @ unit.T


def upper(matrix) -> np.ndarray:
    """Strict upper triangle of a square matrix, vectorised."""
    m = _as_np(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"expected a square matrix, got shape {m.shape}")
    return m[np.triu_indices(len(m), k=1)]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else float("nan")


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr  # lazy

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    # round off float noise so that exact ties of a symmetric code (e.g. the 2-D sinusoid) stay
    # ties after a rotation
    return float(spearmanr(np.round(a, 10), np.round(b, 10)).statistic)


def compare_rsms(rsm_a, rsm_b) -> dict[str, float]:
    """Cosine, Pearson and Spearman between the strict upper triangles of two ``[n, n]`` RSMs."""
    a, b = upper(rsm_a), upper(rsm_b)
    if a.shape != b.shape:
        raise ValueError(f"RSMs differ in size: {np.shape(rsm_a)} vs {np.shape(rsm_b)}")
    return {"rsm_cosine": _cos(a, b), "pearson": _cos(a - a.mean(), b - b.mean()),
            "spearman": _spearman(a, b)}


def procrustes(source, target, *, scale: bool = True) -> dict[str, Any]:
    """Orthogonal Procrustes of ``source [n, d]`` onto ``target [n, d']`` after centring both.

    Returns:
      dict with ``r2`` (1 - residual / ||G||^2), ``rotation`` Q ``[d, d']`` (orthonormal columns
      or rows), ``scale`` s and ``aligned`` = s (P - mean) Q + mean(G) ``[n, d']``.
    """
    p, g = _as_np(source), _as_np(target)
    if p.ndim != 2 or g.ndim != 2 or len(p) != len(g):
        raise ValueError(f"procrustes needs [n, d] and [n, d'] with the same n, got {p.shape} "
                         f"and {g.shape}")
    pc, gc = p - p.mean(0), g - g.mean(0)
    u, sv, vt = np.linalg.svd(pc.T @ gc, full_matrices=False)
    q = u @ vt
    pp, gg = float(np.sum(pc**2)), float(np.sum(gc**2))
    if gg == 0:
        raise ValueError("the target is constant after centring; Procrustes R^2 is undefined")
    if pp == 0:
        return {"r2": 0.0, "rotation": q, "scale": 0.0, "aligned": np.broadcast_to(g.mean(0), g.shape)}
    s = float(sv.sum()) / pp if scale else 1.0
    resid = float(np.sum((s * pc @ q - gc) ** 2))
    return {"r2": 1.0 - resid / gg, "rotation": q, "scale": s, "aligned": s * pc @ q + g.mean(0)}


def procrustes_align(source, target, *, scale: bool = True) -> tuple[np.ndarray, float]:
    """Align ``source`` onto ``target`` (e.g. learned PEs across seeds): ``(aligned, R^2)``."""
    out = procrustes(source, target, scale=scale)
    return out["aligned"], out["r2"]


def _layers(table) -> np.ndarray:
    t = _as_np(table)
    if t.ndim == 2:
        return t[None]
    if t.ndim == 3:
        return t
    raise ValueError(f"a PE table must be [n, d] or [L, n, d], got shape {t.shape}")


def pe_similarity(learned_table, reference_table) -> dict[str, Any]:
    """Similarity of a learned PE to a reference (ground-truth) PE (arXiv 2406.08272).

    Args:
      learned_table: ``[n, d]`` or ``[L, n, d]`` (one table per layer).
      reference_table: ``[n, d']`` ground-truth code (e.g. the 2-D sinusoid of the grid).

    Returns:
      ``{"rsm_cosine", "spearman", "procrustes_r2"}`` averaged over layers, plus ``"per_layer"``:
      a list of the same three scores per layer.
    """
    ref = _as_np(reference_table)
    if ref.ndim != 2:
        raise ValueError(f"reference_table must be [n, d], got shape {ref.shape}")
    layers = _layers(learned_table)
    if layers.shape[1] != ref.shape[0]:
        raise ValueError(f"learned table has {layers.shape[1]} positions, reference {ref.shape[0]}")
    ref_rsm = cosine_rsm(ref)
    per_layer = []
    for t in layers:
        rs = compare_rsms(cosine_rsm(t), ref_rsm)
        per_layer.append({"rsm_cosine": rs["rsm_cosine"], "spearman": rs["spearman"],
                          "procrustes_r2": procrustes(t, ref)["r2"]})
    keys = ("rsm_cosine", "spearman", "procrustes_r2")
    return {**{k: float(np.mean([row[k] for row in per_layer])) for k in keys},
            "per_layer": per_layer}


def layout_rsm(coords) -> np.ndarray:
    """Similarity of node positions ``[n, k]`` as negative Euclidean distance ``[n, n]``."""
    c = _as_np(coords)
    return -np.linalg.norm(c[:, None, :] - c[None, :, :], axis=-1)


def pe_vs_fc(pe_table, fc) -> dict[str, float]:
    """Compare the PE similarity structure with a functional-connectivity matrix ``[n, n]``.

    ``pe_table`` is ``[n, d]`` or ``[L, n, d]`` (layers averaged). Returns rsm_cosine, pearson and
    spearman between the upper triangles of the PE cosine RSM and ``fc``.
    """
    scores = [compare_rsms(cosine_rsm(t), fc) for t in _layers(pe_table)]
    return {k: float(np.mean([s[k] for s in scores])) for k in scores[0]}


def _partition(labels, n: int) -> np.ndarray:
    lab = np.asarray(labels)
    if lab.shape != (n,):
        raise ValueError(f"partition must be [{n}] labels, got shape {lab.shape}")
    return lab[:, None] == lab[None, :]


def modularity(similarity, partition, *, negative: str = "clip") -> float:
    """Newman modularity Q of the weighted graph ``similarity [n, n]`` under ``partition [n]``.

    Q = (1 / 2m) sum_ij [A_ij - k_i k_j / 2m] delta(c_i, c_j), with A the similarity with a zero
    diagonal; negative weights are clipped to 0 (``negative="clip"``) or made absolute ("abs").
    """
    a = _as_np(similarity).copy()
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"similarity must be square, got shape {a.shape}")
    if negative == "clip":
        a = np.maximum(a, 0.0)
    elif negative == "abs":
        a = np.abs(a)
    else:
        raise ValueError(f"negative must be 'clip' or 'abs', got {negative!r}")
    np.fill_diagonal(a, 0.0)
    same = _partition(partition, len(a))
    k = a.sum(1)
    two_m = k.sum()
    if two_m == 0:
        return 0.0
    return float(((a - np.outer(k, k) / two_m) * same).sum() / two_m)


def segregation(similarity, partition) -> float:
    """(mean within-module similarity - mean between) / mean within, off the diagonal."""
    s = _as_np(similarity)
    same = _partition(partition, len(s))
    off = ~np.eye(len(s), dtype=bool)
    within, between = s[same & off].mean(), s[~same].mean()
    return float((within - between) / within)


def embedding_2d(table, method: str = "pca") -> np.ndarray:
    """A 2-D view ``[n, 2]`` of ``table [n, d]``: "pca" (top-2 principal components) or "mds"
    (classical MDS of the cosine distances 1 - cos)."""
    t = _as_np(table)
    if method == "pca":
        tc = t - t.mean(0)
        u, s, _ = np.linalg.svd(tc, full_matrices=False)
        return u[:, :2] * s[:2]
    if method == "mds":
        d2 = np.clip(1.0 - cosine_rsm(t), 0.0, None) ** 2
        n = len(d2)
        j = np.eye(n) - 1.0 / n
        b = -0.5 * j @ d2 @ j
        w, v = np.linalg.eigh(b)
        top = np.argsort(w)[::-1][:2]
        return v[:, top] * np.sqrt(np.maximum(w[top], 0.0))
    raise ValueError(f"method must be 'pca' or 'mds', got {method!r}")


def plot_grid_embedding(ax, table, grid_width: int, *, method: str = "pca", title: str = ""):
    """Draw the 2-D view of a grid PE: points coloured by row, grid neighbours joined.

    A recovered 4x4 grid shows up as a lattice; a lazy (random) code as a tangle.
    """
    xy = embedding_2d(table, method)
    n = len(xy)
    rows, cols = np.divmod(np.arange(n), grid_width)
    for i in range(n):
        for j in (i + 1, i + grid_width):
            if j < n and (j == i + grid_width or rows[j] == rows[i]):
                ax.plot(*xy[[i, j]].T, color="0.7", lw=0.8, zorder=1)
    ax.scatter(xy[:, 0], xy[:, 1], c=rows, cmap="viridis", s=30, zorder=2)
    for i in range(n):
        ax.annotate(f"{rows[i]},{cols[i]}", xy[i], fontsize=6, ha="center", va="bottom")
    ax.set_title(title, fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def pe_tables(model, positions) -> np.ndarray | None:
    """The additive PE table of every layer of ``model``, ``[L, n, d]`` at ``positions [n]``.

    ``model`` holds a ``Transformer`` as ``model.transformer``; ``L`` is the number of PE
    modules it holds (one per block with ``pe_every_layer``, else one). None when its PE has no
    table (``table`` raises ValueError: a rotary, bias or logits PE). Used to compare learned
    tables with a layout (arXiv 2406.08272)."""
    pes = model.transformer.pes
    try:
        return np.stack([np.asarray(pe.table(positions)) for pe in pes])
    except ValueError:
        return None
