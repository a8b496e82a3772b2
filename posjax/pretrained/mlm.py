"""A pretrained encoder with a new masked-LM head, and what training that head needs.

:func:`mlm_encoder` loads a BERT-family checkpoint (:func:`posjax.pretrained.load_hf`) and puts
:class:`~posjax.pretrained.MaskedLMHead` on it (BERT's transform, dense + activation +
LayerNorm, then a decoder tied to the word embeddings plus a new bias; Devlin et al., arXiv
1810.04805), for checkpoints that ship without one (e.g. all-MiniLM-L6-v2).
:func:`masked_position_loss` is the loss at the masked positions only; :data:`HEAD_PARAMS`,
:func:`head_arrays` / :func:`set_head` save and restore the head's own parameters (never the
tied embeddings) and :func:`head_only` is the NNX filter that trains the head with the body
frozen.
"""
from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from posjax.models import Transformer, TransformerConfig
from posjax.pretrained.convert import MaskedLMHead, load_hf

HEAD_PARAMS = (("dense", "kernel"), ("dense", "bias"), ("norm", "scale"), ("norm", "bias"),
               ("bias",))


class MaskedLMEncoder(nnx.Module):
    """An encoder body (``transformer``: tokens ``[B, n]`` -> hidden ``[B, n, d]``) and an MLM
    head (``head``: ``[N, d]`` -> logits ``[N, V]``), kept apart so that the loss applies the
    head to the masked positions only."""

    def __init__(self, transformer: Transformer, head: MaskedLMHead):
        self.transformer = transformer
        self.head = head


def mlm_encoder(path_or_id: str | Path, *, dtype: str = "float32", seed: int = 0,
                head_seed: int | None = None) -> tuple[MaskedLMEncoder, TransformerConfig]:
    """``(MaskedLMEncoder, TransformerConfig)``: the checkpoint's encoder (its own position
    table) with a freshly initialised MLM head (``nnx.Rngs(head_seed)``, default
    ``1000 + seed``) tied to its word embeddings."""
    body, cfg = load_hf(path_or_id, dtype=dtype, seed=seed)
    head = MaskedLMHead(body.embed, cfg.d_model, activation=cfg.activation, eps=cfg.norm_eps,
                        rngs=nnx.Rngs(1000 + seed if head_seed is None else head_seed))
    return MaskedLMEncoder(body, head), cfg


def masked_position_loss(model: MaskedLMEncoder, batch: dict) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(mean cross-entropy, accuracy)`` over the masked positions.

    ``batch``: ``tokens [B, n]`` (the masked input), ``where [B, k]`` (target positions) and
    ``targets [B, k]`` (their original ids), as :func:`posjax.data.mlm_masking.mask_windows`
    returns. The head sees only the ``B * k`` gathered hidden states (logits in float32).
    """
    h = model.transformer(batch["tokens"])
    g = jnp.take_along_axis(h, batch["where"][..., None], axis=1)
    logits = model.head(g.reshape(-1, g.shape[-1])).astype(jnp.float32)
    targets = batch["targets"].reshape(-1)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    return ce.mean(), (jnp.argmax(logits, -1) == targets).mean()


def head_only() -> nnx.All:
    """The head's own parameters (not the tied word embeddings): train these with
    ``nnx.split(model, head_only(), ...)`` and the body stays frozen."""
    return nnx.All(nnx.Param, nnx.PathContains("head"), nnx.Not(nnx.PathContains("embed")))


def head_arrays(model: MaskedLMEncoder) -> dict[str, np.ndarray]:
    """The MLM head's own parameters as ``{"dense.kernel": array, ...}`` (:data:`HEAD_PARAMS`)."""
    out = {}
    for path in HEAD_PARAMS:
        v = model.head
        for p in path:
            v = getattr(v, p)
        out[".".join(path)] = np.asarray(v[...])
    return out


def set_head(model: MaskedLMEncoder, arrays: dict[str, np.ndarray]) -> None:
    """Load :func:`head_arrays` output into ``model``'s head (in place); a missing name or a
    shape that differs is a ValueError."""
    for path in HEAD_PARAMS:
        name = ".".join(path)
        v = model.head
        for p in path:
            v = getattr(v, p)
        if name not in arrays:
            raise ValueError(f"set_head: no array for the head parameter {name!r}")
        if np.shape(arrays[name]) != np.shape(v[...]):
            raise ValueError(f"set_head: {name} has shape {np.shape(arrays[name])}, the head's "
                             f"is {np.shape(v[...])}")
        v.value = jnp.asarray(arrays[name])
