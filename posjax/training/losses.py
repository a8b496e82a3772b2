"""Standard losses and evaluation helpers for the heads in :mod:`posjax.models`."""
from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from posjax.training.data import iterate


def classification_loss(model: nnx.Module, batch: Mapping[str, jax.Array], key: jax.Array,
                        *, deterministic: bool = False):
    """Cross-entropy of a :class:`posjax.models.Classifier` on ``batch``.

    ``batch`` holds ``tokens [B, T]``, ``labels [B]`` and optionally ``padding_mask [B, T]`` and
    ``positions``. Returns ``(loss, {"accuracy": ...})``.
    """
    logits = model(batch["tokens"], positions=batch.get("positions"),
                   padding_mask=batch.get("padding_mask"), deterministic=deterministic,
                   rngs=nnx.Rngs(dropout=key))
    labels = batch["labels"]
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    return loss, {"accuracy": accuracy(logits, labels)}


def accuracy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Fraction of argmax predictions equal to the labels."""
    return jnp.mean(jnp.argmax(logits, -1) == labels)


def evaluate_classifier(model: nnx.Module, arrays: Mapping[str, Any], *, batch_size: int = 256
                        ) -> dict[str, float]:
    """Accuracy and mean loss of a classifier over a dataset dict (deterministic mode)."""
    graphdef, state = nnx.split(model)

    @jax.jit
    def scores(state, batch):
        m = nnx.merge(graphdef, state)
        logits = m(batch["tokens"], positions=batch.get("positions"),
                   padding_mask=batch.get("padding_mask"), deterministic=True)
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"])
        return losses.sum(), (jnp.argmax(logits, -1) == batch["labels"]).sum()

    total_loss, correct, count = 0.0, 0, 0
    for batch in iterate(arrays, batch_size):
        loss, hits = scores(state, jax.tree.map(jnp.asarray, batch))
        total_loss += float(loss)
        correct += int(hits)
        count += len(batch["labels"])
    if count == 0:
        raise ValueError("evaluate_classifier got an empty dataset")
    return {"accuracy": correct / count, "loss": total_loss / count}
