"""Standard losses and evaluation helpers for the heads in :mod:`posjax.models`."""
from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from posjax.input_checks import check_range, collect, first_error, stack_rows
from posjax.models.packing import segment_runs
from posjax.training.data import iterate


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


def evaluate_classifier(model: nnx.Module, arrays: Mapping[str, Any], *, batch_size: int = 256
                        ) -> dict[str, float]:
    """Accuracy and mean loss of a classifier over a dataset dict (deterministic mode).

    Raises:
      ValueError: a token id, position or label out of range, named with its batch, e.g.
        ``token id 99 >= vocab_size 16 in evaluation batch 0 (examples 0..255)``.
    """
    graphdef, state = nnx.split(model)

    @jax.jit
    def scores(state, batch):
        m = nnx.merge(graphdef, state)
        with collect() as rows:
            logits = m(batch["tokens"], positions=batch.get("positions"),
                       padding_mask=batch.get("padding_mask"), deterministic=True)
            check_range(batch["labels"], logits.shape[-1], what="label", limit_name="num_classes")
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"])
        return losses.sum(), (jnp.argmax(logits, -1) == batch["labels"]).sum(), stack_rows(rows)

    total_loss, correct, count = 0.0, 0, 0
    for index, batch in enumerate(iterate(arrays, batch_size)):
        loss, hits, checks = scores(state, jax.tree.map(jnp.asarray, batch))
        error = first_error(checks)
        if error is not None:
            raise ValueError(f"{error} in evaluation batch {index} (examples {count}.."
                             f"{count + len(batch['labels']) - 1})")
        total_loss += float(loss)
        correct += int(hits)
        count += len(batch["labels"])
    if count == 0:
        raise ValueError("evaluate_classifier got an empty dataset")
    return {"accuracy": correct / count, "loss": total_loss / count}
