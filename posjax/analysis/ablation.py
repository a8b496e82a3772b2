"""Head ablation and the "single-head deposit" metrics of arXiv 2505.13027 (*Deconstructing
Positional Information: From Attention Logits to Training Biases*).

``head_ablation`` zeroes one head at a time through the model's ``head_mask`` argument (the mask
multiplies the head's output before W_O, equivalent to zeroing that head's rows of W_V and b_V)
and returns the accuracy ``[layers, heads]``. The forward pass is jitted once per model and the
masks are data, so the ``L * H`` ablations never recompile. ``deposit_metrics`` turns the
accuracy drops into scalar summaries, an interpretation (docs/interpretations.md) of the paper's
plots (concentration, dominance, deposit flag).
"""
from __future__ import annotations

import functools
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


def _shape(model: nnx.Module) -> tuple[int, int]:
    body = getattr(model, "transformer", model)
    cfg = getattr(body, "config", None)
    if cfg is None or not hasattr(cfg, "num_heads"):
        raise ValueError("head ablation needs a posjax Transformer or a model with .transformer")
    return cfg.num_layers, cfg.num_heads


FIELDS = ("tokens", "labels", "padding_mask", "positions")


def _padded_batches(dataset: Mapping[str, Any], batch_size: int, fields=FIELDS):
    """Fixed-size batches (the last one padded by repetition) and their valid-row masks."""
    if "tokens" not in dataset or "labels" not in dataset:
        raise ValueError(f"dataset needs 'tokens' and 'labels', got keys {sorted(dataset)}")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    arrays = {k: np.asarray(v) for k, v in dataset.items() if k in fields}
    n = len(arrays["labels"])
    if n == 0:
        raise ValueError("head ablation got an empty dataset")
    size = min(batch_size, n)
    for start in range(0, n, size):
        idx = np.arange(start, start + size)
        valid = idx < n
        idx = np.where(valid, idx, n - 1)
        yield {k: jnp.asarray(v[idx]) for k, v in arrays.items()}, jnp.asarray(valid)


def _hits(graphdef, state, batch, valid, masks):
    """Correct predictions ``[M]`` of one batch under each head mask (the masks are data)."""
    m = nnx.merge(graphdef, state)

    def one(mask):
        logits = m(batch["tokens"], positions=batch.get("positions"),
                   padding_mask=batch.get("padding_mask"), deterministic=True, head_mask=mask)
        return jnp.sum((jnp.argmax(logits, -1) == batch["labels"]) & valid)

    return jax.lax.map(one, masks)


def _mass(graphdef, state, batch, keys, valid):
    """Attention mass ``[L, H]`` on ``keys [B, k]`` summed over the batch's valid samples."""
    m = nnx.merge(graphdef, state)
    _, w = m(batch["tokens"], positions=batch.get("positions"),
             padding_mask=batch.get("padding_mask"), deterministic=True,
             return_attention=True)  # [L, B, H, T, T]
    on_keys = jnp.take_along_axis(w, keys[None, :, None, None, :], axis=-1).sum(-1)
    pad = batch.get("padding_mask")
    real = jnp.ones(w.shape[1:2] + w.shape[-1:], bool) if pad is None else jnp.asarray(pad, bool)
    q_w = (real & valid[:, None]).astype(jnp.float32)  # [B, T] real queries of valid samples
    per_sample = (on_keys * q_w[None, :, None, :]).sum(-1)
    per_sample = per_sample / jnp.maximum(q_w.sum(-1), 1.0)[None, :, None]
    return per_sample.sum(1)


def masked_accuracies(model: nnx.Module, dataset: Mapping[str, Any], head_masks: jax.Array, *,
                      batch_size: int = 256) -> np.ndarray:
    """Accuracy of ``model`` on ``dataset`` under each head mask.

    Args:
      model: a classifier taking ``head_mask [layers, heads]`` (e.g. ``posjax.models.Classifier``).
      dataset: dict with ``tokens``, ``labels`` and optionally ``padding_mask``, ``positions``.
      head_masks: ``[M, layers, heads]`` multipliers (1 keeps a head, 0 removes it).
      batch_size: evaluation batch size (the last batch is padded, so one compilation).

    Returns:
      ``[M]`` accuracies in [0, 1] (deterministic mode, no dropout).
    """
    layers, heads = _shape(model)
    head_masks = jnp.asarray(head_masks, jnp.float32)
    if head_masks.ndim != 3 or head_masks.shape[1:] != (layers, heads):
        raise ValueError(f"head_masks must be [M, {layers}, {heads}], got {head_masks.shape}")
    graphdef, state = nnx.split(model)
    hits = jax.jit(functools.partial(_hits, graphdef))  # compiled once per call
    correct = np.zeros(head_masks.shape[0], np.int64)
    total = 0
    for batch, valid in _padded_batches(dataset, batch_size):
        correct += np.asarray(hits(state, batch, valid, head_masks))
        total += int(valid.sum())
    return correct / total


def single_head_masks(layers: int, heads: int) -> np.ndarray:
    """``[1 + L*H, L, H]``: the all-ones mask, then one mask per (layer, head) with it zeroed."""
    n = layers * heads
    one_off = (1.0 - np.eye(n, dtype=np.float32)).reshape(n, layers, heads)
    return np.concatenate([np.ones((1, layers, heads), np.float32), one_off])


def head_ablation(model: nnx.Module, dataset: Mapping[str, Any], *, batch_size: int = 256,
                  return_baseline: bool = False):
    """Accuracy with each single head removed (arXiv 2505.13027, ablation step 2).

    Args:
      model: classifier with a ``head_mask`` argument.
      dataset: evaluation split (default ``ablation_split="test"``).
      batch_size: evaluation batch size.
      return_baseline: also return the unablated accuracy A₀ (all-ones mask, same pass).

    Returns:
      ``A [layers, heads]`` with ``A[l, h]`` the accuracy when head h of layer l is zeroed, or
      ``(A, A₀)`` when ``return_baseline``.
    """
    layers, heads = _shape(model)
    acc = masked_accuracies(model, dataset, single_head_masks(layers, heads),
                            batch_size=batch_size)
    ablated = acc[1:].reshape(layers, heads)
    return (ablated, float(acc[0])) if return_baseline else ablated


def _top_two(row: np.ndarray) -> tuple[float, float]:
    top = np.sort(row)[::-1]
    return float(top[0]), float(top[1]) if len(top) > 1 else float("nan")


def deposit_metrics(ablated: np.ndarray, baseline: float, *, drop_threshold: float = 30.0,
                    dominance_threshold: float = 5.0, deposit_layer: int = 0
                    ) -> dict[str, Any]:
    """Scalar deposit summaries of a head-ablation result (ablation step 3; docs/interpretations.md).

    With ``Δ[l, h] = 100 (A₀ - A[l, h])`` in accuracy points:

    * concentration ``D_l = max_h Δ[l, h] / Σ_h max(Δ[l, h], 0)`` ∈ [1/H, 1] (NaN when no head's
      removal lowers accuracy);
    * dominance ``R_l = largest Δ[l, ·] / second largest`` (inf when only one drop is positive,
      NaN when none is);
    * deposit flag: ``max_h Δ[deposit_layer, h] >= drop_threshold`` and
      ``R_deposit_layer >= dominance_threshold``.

    Args:
      ablated: ``[layers, heads]`` accuracies in [0, 1] from :func:`head_ablation`.
      baseline: the unablated accuracy A₀ in [0, 1].
      drop_threshold: minimum largest drop, in points (default 30).
      dominance_threshold: minimum dominance ratio (default 5).
      deposit_layer: the layer tested for a deposit (default 0, the paper's "layer 1").

    Returns:
      dict with ``drops [L, H]``, per-layer lists ``max_drop``, ``argmax_head``,
      ``concentration``, ``dominance``, and ``deposit`` (bool) plus the thresholds used.
    """
    ablated = np.asarray(ablated, float)
    if ablated.ndim != 2:
        raise ValueError(f"ablated accuracies must be [layers, heads], got shape {ablated.shape}")
    if not 0 <= deposit_layer < ablated.shape[0]:
        raise ValueError(f"deposit_layer={deposit_layer} is outside [0, {ablated.shape[0]})")
    drops = 100.0 * (float(baseline) - ablated)
    concentration, dominance, max_drop, argmax = [], [], [], []
    for row in drops:
        first, second = _top_two(row)
        positive = float(np.clip(row, 0.0, None).sum())
        concentration.append(first / positive if positive > 0 and first > 0 else float("nan"))
        if first <= 0:
            dominance.append(float("nan"))
        elif not second > 0:
            dominance.append(float("inf"))
        else:
            dominance.append(first / second)
        max_drop.append(first)
        argmax.append(int(np.argmax(row)))
    r0 = dominance[deposit_layer]
    deposit = bool(max_drop[deposit_layer] >= drop_threshold and not np.isnan(r0)
                   and r0 >= dominance_threshold)
    return {"drops": drops, "max_drop": max_drop, "argmax_head": argmax,
            "concentration": concentration, "dominance": dominance, "deposit": deposit,
            "drop_threshold": drop_threshold, "dominance_threshold": dominance_threshold,
            "deposit_layer": deposit_layer}


def attention_mass(model: nnx.Module, dataset: Mapping[str, Any], key_positions: np.ndarray, *,
                   batch_size: int = 64) -> np.ndarray:
    """Mean attention weight that real queries put on given keys, per layer and head.

    Used to check that the deposit head h* "peaks on triggers" (ablation step 4).

    Args:
      model: classifier accepting ``return_attention=True``.
      dataset: dict with ``tokens``, ``labels``, optionally ``padding_mask`` / ``positions``.
      key_positions: int ``[N, k]`` key positions per sample (e.g. ``trigger_positions``).
      batch_size: evaluation batch size.

    Returns:
      ``[layers, heads]``: the attention mass on those keys, averaged over real queries and
      samples (uniform attention over T real tokens would give k / T).
    """
    key_positions = np.asarray(key_positions)
    n = len(np.asarray(dataset["labels"]))
    if key_positions.ndim != 2 or len(key_positions) != n:
        raise ValueError(f"key_positions must be [N={n}, k], got shape {key_positions.shape}")
    graphdef, state = nnx.split(model)
    mass = jax.jit(functools.partial(_mass, graphdef))
    data = {**dataset, "key_positions": key_positions}
    total, count = 0.0, 0
    for batch, valid in _padded_batches(data, batch_size, FIELDS + ("key_positions",)):
        keys = batch.pop("key_positions")
        total = total + np.asarray(mass(state, batch, keys, valid))
        count += int(valid.sum())
    return total / count


def plot_drops(path: str, drops: Mapping[str, np.ndarray], title: str) -> None:
    """Save a PNG with one heatmap per entry: Δ accuracy (points) per ablated (layer, head)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(drops)
    if not names:
        raise ValueError("plot_drops needs at least one heatmap")
    cols = min(4, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.9 * rows), squeeze=False,
                             constrained_layout=True)
    vmax = max(5.0, max(float(np.nanmax(np.abs(np.asarray(v, float)))) for v in drops.values()))
    for ax, name in zip(axes.flat, names):
        grid = np.asarray(drops[name], float)
        im = ax.imshow(grid, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(grid.shape[1]))
        ax.set_yticks(range(grid.shape[0]))
        ax.set_xlabel("head", fontsize=8)
        ax.set_ylabel("layer", fontsize=8)
        ax.tick_params(labelsize=7)
        if grid.size <= 64:
            for (l, h), val in np.ndenumerate(grid):
                ax.text(h, l, f"{val:.0f}", ha="center", va="center", fontsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.colorbar(im, ax=axes.ravel().tolist(), label="Δ accuracy (points)", shrink=0.8)
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
