"""Sums over the keys between a query and a key, restricted to the visible keys.

Contextual PEs (CoPE, the Forgetting Transformer) sum a per-(query, key) quantity over the keys
that lie between key ``j`` and query ``i``. Written through the attention mask (the causal,
padding, segment and cache-fill masks combined), the same code serves full passes, packed rows
(segments are contiguous, so the keys between two tokens of one segment are all visible and no
other key is) and key/value-cache decoding (keys in sequence order, unwritten slots masked).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def span_sums(values: jax.Array, mask: jax.Array | None, *, causal: bool,
              include_key: bool) -> jax.Array:
    """Sums of ``values [B, H, Tq, Tk]`` over the visible keys between each key and query.

    Causal (the visible keys of query i are at or before it): entry ``(i, j)`` is the sum of
    ``values[i, l]`` over visible keys ``l > j`` (``l >= j`` with ``include_key``). Bidirectional
    (``Tq == Tk``, query i is key i): over visible ``l`` in ``(min(i, j), max(i, j)]`` (or the
    closed interval ``[min, max]`` with ``include_key``).

    Args:
      values: float ``[B, H, Tq, Tk]``.
      mask: boolean ``[B or 1, 1 or H, Tq, Tk]`` (True: visible) or None (all visible).
      causal: which of the two definitions above.
      include_key: whether key ``j``'s own value is part of its span.

    Returns:
      ``[B, H, Tq, Tk]`` float sums.
    """
    v = values if mask is None else jnp.where(mask, values, 0.0)
    csum = jnp.cumsum(v, axis=-1)  # csum[i, l] = sum_{l' <= l} v[i, l']
    if causal:
        total = csum[..., -1:]
        return total - csum + (v if include_key else 0.0)
    tq, tk = v.shape[-2], v.shape[-1]
    if tq != tk:
        raise ValueError(f"bidirectional span sums need Tq == Tk, got {tq} and {tk}")
    own = jnp.diagonal(csum, axis1=-2, axis2=-1)[..., :, None]  # csum[i, i]
    i = jnp.arange(tq)[:, None]
    j = jnp.arange(tk)[None, :]
    before = own - csum + (v if include_key else 0.0)  # j <= i: keys in (j, i] (or [j, i])
    own_v = jnp.diagonal(v, axis1=-2, axis2=-1)[..., :, None]
    after = csum - own + (own_v if include_key else 0.0)  # j > i: keys in (i, j] (or [i, j])
    return jnp.where(j <= i, before, after)
