"""Token-chunked cross-entropy for the vocabulary projection: no ``[tokens, V]`` logits.

``loss_i = logsumexp_v(h_i W_v + b_v) - (h_i W_{y_i} + b_{y_i})``. The tokens are split into
chunks of ``c`` rows; the forward pass keeps only ``lse [N]``, and a custom VJP recomputes each
chunk's ``[c, V]`` logits in the backward pass, forms ``G = (softmax - onehot) * dloss`` and
accumulates ``dW += h_c^T G``, ``db += 1^T G`` and ``dh_c = G W^T``. Peak temporary memory is
``O(c V)`` instead of the ``O(N V)`` float32 logits (and their softmax gradient) of the dense
loss; the FLOPs are those of the dense loss plus one more ``[c, d] x [d, V]`` product per chunk
(the recomputation). The logits and the softmax are float32 whatever the dtype of ``hidden``.

Targets: ``IGNORE_INDEX`` (-100, the PyTorch convention) marks a token without a target: its loss
and its gradient are exactly 0 in both the dense and the chunked loss. Any other label outside
``[0, V)`` raises a ValueError for concrete labels; under ``jax.jit`` it is recorded through
:func:`posjax.input_checks.check_range` (reported by the training step) and its loss is NaN,
never a finite value scored against another row.
"""
from __future__ import annotations

import functools
import math

import jax
import numpy as np
import jax.numpy as jnp
from jax import lax

from posjax.input_checks import check_range

__all__ = ["chunked_cross_entropy", "dense_cross_entropy", "auto_chunk_size", "IGNORE_INDEX",
           "lm_targets", "masked_losses"]

#: LM target without a loss (zero loss, zero gradient), as in PyTorch's ``ignore_index``.
IGNORE_INDEX = -100

#: Default entries of one chunk's ``[c, V]`` float32 logits (2^25: 128 MiB).
CHUNK_ENTRIES = 1 << 25


def auto_chunk_size(num_tokens: int, vocab_size: int) -> int:
    """Tokens per chunk: ``CHUNK_ENTRIES / V`` rounded down to a multiple of 8 (at least 8),
    at most ``num_tokens``."""
    c = max(8, (CHUNK_ENTRIES // max(vocab_size, 1)) // 8 * 8)
    return int(min(c, num_tokens))


def _logits(h, W, b):
    return jnp.dot(h, W.astype(h.dtype), preferred_element_type=jnp.float32) + b.astype(
        jnp.float32)


def lm_targets(labels: jax.Array, vocab_size: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(safe [N] int32, ignored [N] bool, bad [N] bool)`` of integer targets ``labels``.

    ``safe`` is 0 where a label is ``IGNORE_INDEX`` or out of ``[0, vocab_size)`` (so a gather
    never clamps), ``labels`` elsewhere. Concrete out-of-range labels raise; traced ones are
    recorded by :func:`posjax.input_checks.check_range`.

    Raises:
      ValueError: a concrete label outside ``[0, vocab_size)`` other than ``IGNORE_INDEX``.
    """
    xp = jnp if isinstance(labels, jax.core.Tracer) else np  # concrete labels: check now
    host = xp.asarray(labels)
    try:
        check_range(xp.where(host == IGNORE_INDEX, 0, host), vocab_size, what="target",
                    limit_name="vocab_size")
    except ValueError as e:
        raise ValueError(f"labels must be in [0, {vocab_size}) or {IGNORE_INDEX} (ignored): {e}"
                         ) from None
    labels = jnp.asarray(labels).astype(jnp.int32)
    ignored = labels == IGNORE_INDEX
    bad = ~ignored & ((labels < 0) | (labels >= vocab_size))
    return jnp.where(ignored | bad, 0, labels), ignored, bad


def masked_losses(losses: jax.Array, ignored: jax.Array, bad: jax.Array) -> jax.Array:
    """Per-token losses with 0 (no gradient) on ignored targets and NaN on bad ones."""
    return jnp.where(bad, jnp.nan, jnp.where(ignored, 0.0, losses))


def dense_cross_entropy(hidden: jax.Array, weight: jax.Array, labels: jax.Array, *,
                        bias: jax.Array | None = None) -> jax.Array:
    """The dense reference: ``[N, V]`` float32 logits, then ``logsumexp - logit[label]``
    (targets as :func:`lm_targets`: 0 for ``IGNORE_INDEX``, NaN for a traced bad label)."""
    b = jnp.zeros((weight.shape[1],), jnp.float32) if bias is None else bias
    z = _logits(hidden, weight, b)
    safe, ignored, bad = lm_targets(labels, weight.shape[1])
    picked = jnp.take_along_axis(z, safe[:, None], axis=-1)[:, 0]
    return masked_losses(jax.nn.logsumexp(z, axis=-1) - picked, ignored, bad)


def _chunks(x, c, nc):
    pad = nc * c - x.shape[0]
    if pad:
        x = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
    return x.reshape(nc, c, *x.shape[1:])


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _ce(hidden, weight, bias, labels, c):
    return _ce_fwd(hidden, weight, bias, labels, c)[0]


def _ce_fwd(hidden, weight, bias, labels, c):
    N = hidden.shape[0]
    nc = math.ceil(N / c)
    hs, ys = _chunks(hidden, c, nc), _chunks(labels, c, nc)

    def one(args):
        h, y = args
        z = _logits(h, weight, bias)
        lse = jax.nn.logsumexp(z, axis=-1)
        return lse, lse - jnp.take_along_axis(z, y[:, None], axis=-1)[:, 0]

    lse, loss = lax.map(one, (hs, ys))
    return loss.reshape(-1)[:N], (hidden, weight, bias, labels, lse.reshape(-1)[:N])


def _ce_bwd(c, res, g):
    hidden, weight, bias, labels, lse = res
    N, V = hidden.shape[0], weight.shape[1]
    nc = math.ceil(N / c)
    hs, ys = _chunks(hidden, c, nc), _chunks(labels, c, nc)
    ls, gs = _chunks(lse, c, nc), _chunks(g.astype(jnp.float32), c, nc)  # padded rows: g = 0

    def step(carry, args):
        dW, db = carry
        h, y, l, gi = args
        p = jnp.exp(_logits(h, weight, bias) - l[:, None])
        G = (p - jax.nn.one_hot(y, V, dtype=jnp.float32)) * gi[:, None]
        dh = jnp.dot(G.astype(h.dtype), weight.astype(h.dtype).T,
                     preferred_element_type=jnp.float32)
        dW = dW + jnp.dot(h.T, G.astype(h.dtype), preferred_element_type=jnp.float32)
        return (dW, db + G.sum(0)), dh

    zeros = (jnp.zeros(weight.shape, jnp.float32), jnp.zeros((V,), jnp.float32))
    (dW, db), dh = lax.scan(step, zeros, (hs, ys, ls, gs))
    dh = dh.reshape(-1, hidden.shape[1])[:N]
    return (dh.astype(hidden.dtype), dW.astype(weight.dtype), db.astype(bias.dtype), None)


_ce.defvjp(_ce_fwd, _ce_bwd)


def chunked_cross_entropy(hidden: jax.Array, weight: jax.Array, labels: jax.Array, *,
                          bias: jax.Array | None = None, chunk_size: int | None = None
                          ) -> jax.Array:
    """Per-token softmax cross-entropy of ``hidden @ weight (+ bias)`` without ``[N, V]`` logits.

    Args:
      hidden: ``[N, d]`` final hidden states (any float dtype; the product accumulates in
        float32).
      weight: ``[d, V]`` output projection (a tied embedding table is ``table.T``).
      labels: ``[N]`` integer targets in ``[0, V)``, or ``IGNORE_INDEX`` (loss and gradient 0).
      bias: optional ``[V]``.
      chunk_size: tokens per chunk (default :func:`auto_chunk_size`: about 128 MiB of float32
        logits per chunk).

    Returns:
      ``losses [N]`` float32, equal to :func:`dense_cross_entropy`; gradients with respect to
      ``hidden``, ``weight`` and ``bias`` come from a custom VJP that recomputes each chunk.

    Raises:
      ValueError: mismatched shapes, a non-integer ``labels``, ``chunk_size < 1``, or (for
        concrete labels) a label outside ``[0, V)`` other than ``IGNORE_INDEX``; a traced one
        gives a NaN loss and a :func:`posjax.input_checks.check_range` row.
    """
    if hidden.ndim != 2 or weight.ndim != 2 or hidden.shape[1] != weight.shape[0]:
        raise ValueError(f"need hidden [N, d] and weight [d, V], got {hidden.shape} and "
                         f"{weight.shape}")
    if labels.shape != hidden.shape[:1]:
        raise ValueError(f"labels must have shape [N] = {hidden.shape[:1]}, got {labels.shape}")
    if not jnp.issubdtype(labels.dtype, jnp.integer):
        raise ValueError(f"labels must be integers, got {labels.dtype}")
    V = weight.shape[1]
    if bias is not None and bias.shape != (V,):
        raise ValueError(f"bias must have shape [V] = ({V},), got {bias.shape}")
    safe, ignored, bad = lm_targets(labels, V)
    c = auto_chunk_size(hidden.shape[0], V) if chunk_size is None else int(chunk_size)
    if c < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    c = min(c, max(hidden.shape[0], 1))
    b = jnp.zeros((V,), jnp.float32) if bias is None else bias
    return masked_losses(_ce(hidden, weight, b, safe, c), ignored, bad)
