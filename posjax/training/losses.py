"""Standard losses for the heads in :mod:`posjax.models`: classification (packed rows
included) and masked next-token cross-entropy."""
from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from posjax.input_checks import check_range
from posjax.models.packing import segment_runs


def classification_loss(model: nnx.Module, batch: Mapping[str, jax.Array], key: jax.Array,
                        *, deterministic: bool = False):
    """Cross-entropy of a :class:`posjax.models.Classifier` on ``batch``.

    ``batch`` holds ``tokens [B, T]``, ``labels [B]`` and optionally ``padding_mask [B, T]`` and
    ``positions``. Packed rows (:func:`posjax.training.pack_sequences`) hold ``segment_ids
    [B, T]`` and ``labels [B, S]``: the loss is the mean over the segments present in each row
    (slots past a row's last segment are skipped whatever their label). Returns
    ``(loss, {"accuracy": ...})``.

    Raises:
      ValueError: ``labels`` of the wrong rank for the batch (``[B]``, or ``[B, S]`` with
        ``segment_ids``), or concrete labels out of range.
    """
    labels = jnp.asarray(batch["labels"])
    segment_ids = batch.get("segment_ids")
    want = 1 if segment_ids is None else 2
    if labels.ndim != want:
        raise ValueError(f"classification_loss needs labels [B{', S' if want == 2 else ''}] "
                         f"{'with' if want == 2 else 'without'} segment_ids (packed rows), got "
                         f"labels of shape {labels.shape}")
    extras = {} if segment_ids is None else dict(segment_ids=segment_ids,
                                                 num_segments=labels.shape[1])
    logits = model(batch["tokens"], positions=batch.get("positions"),
                   padding_mask=batch.get("padding_mask"), deterministic=deterministic,
                   rngs=nnx.Rngs(dropout=key), **extras)
    present = (jnp.ones(labels.shape, bool) if segment_ids is None
               else segments_present(segment_ids, batch.get("padding_mask"), labels.shape[1]))
    safe = jnp.where(present, labels, 0)
    check_range(safe, logits.shape[-1], what="label", limit_name="num_classes")
    weight = present.astype(jnp.float32)
    count = jnp.maximum(weight.sum(), 1.0)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, safe)
    hits = (jnp.argmax(logits, -1) == safe).astype(jnp.float32)
    return (losses * weight).sum() / count, {"accuracy": (hits * weight).sum() / count}


def segments_present(segment_ids, padding_mask, num_segments: int) -> jax.Array:
    """Bool ``[B, num_segments]``: True where row b has a segment s holding a real token."""
    runs = segment_runs(jnp.asarray(segment_ids))
    real = (jnp.ones(runs.shape, bool) if padding_mask is None
            else jnp.asarray(padding_mask, bool))
    count = jnp.max(jnp.where(real, runs + 1, 0), axis=1)
    return jnp.arange(num_segments)[None, :] < count[:, None]


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of argmax predictions equal to the labels."""
    return jnp.mean(jnp.argmax(logits, -1) == labels)


def masked_lm_loss(model: nnx.Module, batch: Mapping[str, jax.Array], key: jax.Array):
    """Next-token cross-entropy of a :class:`posjax.models.LanguageModel` on the positions
    marked by ``batch["loss_mask"]`` (the mask marks the tokens to predict).

    Args:
      batch: ``tokens [B, T]`` and ``loss_mask [B, T]`` (bool or 0/1; default: the
        ``padding_mask``, else every token); optionally ``positions``, ``padding_mask`` and
        ``segment_ids`` (packed rows from :func:`posjax.training.pack_sequences`), passed to the
        model. With segment ids a token is never a target of the previous segment's last token,
        and padding (``padding_mask`` False) is never a target.
      key: dropout key.

    Returns:
      ``(mean loss over masked targets, {"token_accuracy": ...})``.
    """
    tokens = batch["tokens"]
    extras = {k: batch[k] for k in ("positions", "padding_mask", "segment_ids") if k in batch}
    logits = model(tokens, deterministic=False, rngs=nnx.Rngs(dropout=key), **extras)[:, :-1]
    mask = batch.get("loss_mask", batch.get("padding_mask"))
    mask = jnp.ones(tokens.shape, bool) if mask is None else jnp.asarray(mask).astype(bool)
    mask = mask[:, 1:]
    if "padding_mask" in batch:
        mask = mask & jnp.asarray(batch["padding_mask"], bool)[:, 1:]
    if "segment_ids" in batch:
        seg = jnp.asarray(batch["segment_ids"])
        mask = mask & (seg[:, 1:] == seg[:, :-1])  # same segment as the predicting token
    targets, mask = tokens[:, 1:], mask.astype(jnp.float32)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    count = jnp.maximum(mask.sum(), 1.0)
    hits = (jnp.argmax(logits, -1) == targets).astype(jnp.float32) * mask
    return (ce * mask).sum() / count, {"token_accuracy": hits.sum() / count}
