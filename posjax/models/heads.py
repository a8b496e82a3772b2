"""Task heads on top of :class:`Transformer`: sequence classification and language modelling."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.models.attention import dense
from posjax.models.chunked_ce import chunked_cross_entropy, lm_targets, masked_losses
from posjax.models.config import CHUNKED_LM_LOSS_MIN_VOCAB, TransformerConfig
from posjax.models.packing import count_segments, segment_pool, segment_runs
from posjax.models.transformer import Transformer

POOLINGS = ("cls", "mean", "last")


def pool(hidden: jax.Array, pooling: str, padding_mask: jax.Array | None = None) -> jax.Array:
    """Pool ``[B, T, d] -> [B, d]``.

    ``cls``: position 0; ``mean``: mean over real tokens (``padding_mask`` True); ``last``: the
    last real token.
    """
    if pooling == "cls":
        return hidden[:, 0]
    mask = (jnp.ones(hidden.shape[:2], bool) if padding_mask is None
            else jnp.asarray(padding_mask, bool))
    if pooling == "mean":
        w = mask.astype(hidden.dtype)[..., None]
        return (hidden * w).sum(1) / jnp.maximum(w.sum(1), 1.0)
    if pooling == "last":
        idx = jnp.maximum(mask.sum(1) - 1, 0)
        return jnp.take_along_axis(hidden, idx[:, None, None], axis=1)[:, 0]
    raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")


def _with_head(model: nnx.Module, head, tokens, *, return_attention: bool,
               hidden_dtype=jnp.float32, **kwargs):
    """Run ``model.transformer``, apply ``head`` to its hidden states cast to ``hidden_dtype``;
    the logits are at least float32 (bfloat16 head outputs are cast up for the loss)."""
    out = model.transformer(tokens, return_attention=return_attention, **kwargs)
    hidden, weights = out if return_attention else (out, None)
    logits = head(hidden.astype(hidden_dtype))
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
    return (logits, weights) if return_attention else logits


class Classifier(nnx.Module):
    """Sequence classifier: Transformer -> pooling -> Linear ``-> logits [B, num_classes]``."""

    def __init__(self, config: TransformerConfig, num_classes: int, pooling: str = "cls", *,
                 rngs: nnx.Rngs):
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        self.config = config
        self.pooling = pooling
        self.num_classes = num_classes
        self.transformer = Transformer(config, rngs=rngs)
        self.head = nnx.Linear(config.d_model, num_classes, rngs=rngs)

    def __call__(self, tokens, *, positions=None, padding_mask=None, deterministic=True,
                 rngs=None, head_mask=None, return_attention=False, segment_ids=None,
                 num_segments=None):
        """Logits ``[B, num_classes]`` (and attention weights); arguments as ``Transformer``.

        With ``segment_ids`` (packed rows) pooling is per segment and the logits are
        ``[B, num_segments, num_classes]``, segment s being the s-th run of equal ids in the row
        (rows with fewer segments get the logits of a zero vector there). ``num_segments``
        defaults to the largest count in the batch (concrete ids only; pass it under jit).
        """
        if segment_ids is None:
            pooled = lambda h: pool(h, self.pooling, padding_mask)
        else:
            if num_segments is None:
                num_segments = count_segments(segment_ids, padding_mask)
            pooled = lambda h: segment_pool(h, segment_runs(jnp.asarray(segment_ids)),
                                            self.pooling, num_segments, padding_mask)
        return _with_head(self, lambda h: self.head(pooled(h)), tokens,
                          positions=positions, padding_mask=padding_mask,
                          deterministic=deterministic, rngs=rngs, head_mask=head_mask,
                          return_attention=return_attention, segment_ids=segment_ids)


class LanguageModel(nnx.Module):
    """Masked-LM (bidirectional config) or causal-LM (``causal=True``) head: logits ``[B, T, V]``."""

    def __init__(self, config: TransformerConfig, *, tie_embeddings: bool = False, rngs: nnx.Rngs):
        if config.input_dim is not None:
            raise ValueError("LanguageModel needs token inputs (config.input_dim must be None)")
        self.config = config
        self.transformer = Transformer(config, rngs=rngs)
        self.tie_embeddings = tie_embeddings
        self.head_dtype = (config.jnp_dtype if config.lm_head_dtype == "compute"
                           else jnp.dtype(jnp.float32))
        self.head = None if tie_embeddings else nnx.Linear(
            config.d_model, config.vocab_size, dtype=self.head_dtype, rngs=rngs)

    def _logits(self, hidden: jax.Array) -> jax.Array:
        if self.tie_embeddings:
            flat = hidden.reshape(-1, hidden.shape[-1])  # one matrix product (see `dense`)
            table = self.transformer.embed.embedding[...].astype(self.head_dtype)
            return (flat @ table.T).reshape(*hidden.shape[:-1], -1)
        return dense(self.head, hidden)

    def __call__(self, tokens, *, positions=None, padding_mask=None, deterministic=True,
                 rngs=None, head_mask=None, return_attention=False, segment_ids=None):
        """Logits ``[B, T, V]`` (and attention weights); arguments as ``Transformer``."""
        return _with_head(self, self._logits, tokens, positions=positions,
                          padding_mask=padding_mask, deterministic=deterministic, rngs=rngs,
                          head_mask=head_mask, return_attention=return_attention,
                          hidden_dtype=self.head_dtype, segment_ids=segment_ids)

    def loss(self, tokens, targets, *, positions=None, padding_mask=None, deterministic=True,
             rngs=None, head_mask=None, chunk_size=None, segment_ids=None):
        """Per-token cross-entropy ``[B, T]`` (float32) of ``targets [B, T]``.

        A target ``-100`` (``posjax.models.chunked_ce.IGNORE_INDEX``) has loss 0 and no
        gradient; any other target outside ``[0, vocab_size)`` raises (concrete targets) or, under
        jit, gives a NaN loss and a ``check_range`` row that the training step reports.

        With ``config.chunked_lm_loss`` (or, when None, ``vocab_size >= 8192``) the vocabulary
        projection and the loss run through :func:`posjax.training.chunked_cross_entropy`, so the
        ``[B * T, V]`` logits are never materialised; otherwise the logits of ``__call__`` are
        used. Both give the same values and gradients (to float32 round-off).
        """
        chunked = self.config.chunked_lm_loss
        if chunked is None:
            chunked = self.config.vocab_size >= CHUNKED_LM_LOSS_MIN_VOCAB
        targets = jnp.asarray(targets)
        safe, ignored, bad = lm_targets(targets.reshape(-1), self.config.vocab_size)  # fail fast
        if not chunked:
            logits = self(tokens, positions=positions, padding_mask=padding_mask,
                          deterministic=deterministic, rngs=rngs, head_mask=head_mask,
                          segment_ids=segment_ids)
            z = logits.reshape(-1, logits.shape[-1])
            lse = jax.nn.logsumexp(z, axis=-1)
            picked = jnp.take_along_axis(z, safe[:, None], -1)[:, 0]
            return masked_losses(lse - picked, ignored, bad).reshape(targets.shape)

        hidden = self.transformer(tokens, positions=positions, padding_mask=padding_mask,
                                  deterministic=deterministic, rngs=rngs, head_mask=head_mask,
                                  segment_ids=segment_ids)
        flat = hidden.reshape(-1, hidden.shape[-1]).astype(self.head_dtype)
        if self.tie_embeddings:
            weight, bias = self.transformer.embed.embedding[...].astype(self.head_dtype).T, None
        else:
            weight = self.head.kernel[...].astype(self.head_dtype)
            bias = None if self.head.bias is None else self.head.bias[...]
        losses = chunked_cross_entropy(flat, weight, targets.reshape(-1), bias=bias,
                                       chunk_size=chunk_size)
        return losses.reshape(targets.shape)

    def init_cache(self, batch: int, size: int) -> dict:
        """An empty key/value cache (see ``Transformer.init_cache``)."""
        return self.transformer.init_cache(batch, size)

    def decode(self, tokens, cache, *, positions=None, segment_ids=None):
        """Float32 logits ``[B, T, V]`` of new tokens run against ``cache`` and the updated
        cache (see ``Transformer.decode``)."""
        hidden, cache = self.transformer.decode(tokens, cache, positions=positions,
                                                segment_ids=segment_ids)
        logits = self._logits(hidden.astype(self.head_dtype))
        return logits.astype(jnp.promote_types(logits.dtype, jnp.float32)), cache


class TokenRegressor(nnx.Module):
    """A Transformer encoder with a per-token linear regression head.

    ``x [B, T, input_dim]`` (float features; ``cfg.input_dim`` set) or ``tokens [B, T]`` ->
    ``[B, T, out_dim]``: one prediction per token, e.g. each node's masked activity in the
    network simulation of the learned-PE initialisation study (arXiv 2406.08272).

    Args:
      cfg: the encoder's configuration.
      out_dim: size of each token's prediction (>= 1).
      rngs: parameter initialisation (the encoder, then the head).
    """

    def __init__(self, cfg: TransformerConfig, out_dim: int, *, rngs: nnx.Rngs):
        if out_dim < 1:
            raise ValueError(f"TokenRegressor: out_dim must be >= 1, got {out_dim}")
        self.transformer = Transformer(cfg, rngs=rngs)
        self.head = nnx.Linear(cfg.d_model, out_dim, rngs=rngs)

    def __call__(self, x: jax.Array, positions: jax.Array | None = None) -> jax.Array:
        """``[B, T, out_dim]``; ``positions [T]`` or ``[B, T]`` (default ``arange(T)``)."""
        return self.head(self.transformer(x, positions=positions))
