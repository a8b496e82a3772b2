"""Multi-head self-attention with the three PE hooks (embed happens outside; rotate and bias here).

The default path (``attention_impl`` None or "xla") is :func:`xla_attention`: the function of
``jax.nn.dot_product_attention``'s XLA implementation (float32 logits and softmax), written as
two einsums without that implementation's grouped-query ``vmap``, whose layouts cost transposes
of every ``[B, H, T, T]`` tensor on XLA:CPU. ``attention_impl="cudnn"`` goes through
:func:`dot_product_attention`, which falls back to ``jax.nn.dot_product_attention``'s XLA path,
with a one-time warning, wherever the fused kernel cannot take the operands (no GPU, float32, an
unsupported head dim or bias layout). An explicit softmax path is used when attention weights are
requested or when dropout on the attention weights is active. All compute the same function.

The projections run through :func:`dense`, which applies an ``nnx.Linear`` to the ``[B * T, d]``
matrix rather than the ``[B, T, d]`` array (same parameters, same function): the weight gradient
is then one plain matrix product, which XLA:CPU runs about twice as fast as the two-axis
contraction it otherwise builds (with a transposed copy of the output gradient).
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import jax
import jax.numpy as jnp
from flax import nnx

from posjax.encodings.base import PositionalEncoding


def dense(layer: nnx.Module, x: jax.Array) -> jax.Array:
    """Apply a Linear ``layer`` to ``x [..., d_in]`` as one ``[prod(...), d_in]`` matrix product.

    The same function and parameters as ``layer(x)``; flattening the leading axes first makes the
    backward pass's weight gradient a single-axis contraction, which XLA:CPU runs as one fast
    matrix product (with ``[B, T, d]`` inputs it contracts two axes and materialises a transposed
    copy of the output gradient first; measured 2x slower per product on one CPU thread).
    """
    if x.ndim <= 2:
        return layer(x)
    return layer(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], -1)


def xla_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, bias: jax.Array | None,
                  mask: jax.Array | None, scale: float,
                  logits_fn: Callable[[jax.Array], jax.Array] | None = None) -> jax.Array:
    """Softmax attention ``[B, Tq, H, D]`` from ``q [B, Tq, H, D]``, ``k, v [B, Tk, H, D]``.

    The function of ``jax.nn.dot_product_attention(..., implementation="xla")``: logits in
    (at least) float32, ``bias`` added in float32, masked entries set to ``-0.7 * max(float32)``,
    the softmax in float32 (float64 for float64 inputs, so x64 runs stay float64 end to end),
    the probabilities cast to ``v.dtype`` for the value product. It is
    written as two einsums without jax's grouped-query ``vmap`` (a size-1 group axis whose
    layouts XLA:CPU resolves with transposed copies of the ``[B, H, Tq, Tk]`` tensors).
    ``logits_fn`` (a PE's contextual ``logits`` hook) maps the float32 ``[B, H, Tq, Tk]`` logits
    after the bias and before the mask.
    """
    logits_dtype = jnp.promote_types(q.dtype, jnp.float32)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=logits_dtype)
    logits = logits * jnp.asarray(scale, logits_dtype)
    if bias is not None:
        logits = (logits + bias).astype(logits_dtype)
    if logits_fn is not None:
        logits = logits_fn(logits).astype(logits_dtype)
    if mask is not None:
        large_negative = -0.7 * min(float(jnp.finfo(logits_dtype).max),
                                    float(jnp.finfo(jnp.float32).max))
        logits = jnp.where(mask, logits, jnp.asarray(large_negative, logits_dtype))
    probs = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", probs, v)


def attention_weights(q: jax.Array, k: jax.Array, *, scale: float, bias: jax.Array | None,
                      mask: jax.Array | None,
                      logits_fn: Callable[[jax.Array], jax.Array] | None = None) -> jax.Array:
    """Softmax attention weights ``[B, H, Tq, Tk]`` from ``q [B, Tq, H, D]``, ``k [B, Tk, H, D]``
    (``logits_fn`` as in :func:`xla_attention`; float32, float64 for float64 inputs)."""
    dtype = jnp.promote_types(q.dtype, jnp.float32)
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(dtype) * scale
    if bias is not None:
        logits = logits + bias.astype(dtype)
    if logits_fn is not None:
        logits = logits_fn(logits).astype(dtype)
    if mask is not None:
        logits = jnp.where(mask, logits, jnp.finfo(dtype).min)
    return jax.nn.softmax(logits, axis=-1)


def broadcast_bias(bias: jax.Array | None) -> jax.Array | None:
    """Bring a PE bias ``[H, Tq, Tk]`` or ``[B, H, Tq, Tk]`` to rank 4."""
    if bias is None or bias.ndim == 4:
        return bias
    if bias.ndim == 3:
        return bias[None]
    raise ValueError(f"a PE bias must be [H, Tq, Tk] or [B, H, Tq, Tk], got shape {bias.shape}")


_FALLBACK_WARNED: set[str] = set()
_CUDNN_ERRORS = (RuntimeError, NotImplementedError, ValueError, TypeError)


def _warn_fallback(reason: str) -> None:
    if reason not in _FALLBACK_WARNED:
        _FALLBACK_WARNED.add(reason)
        warnings.warn(f"attention_impl='cudnn' unavailable ({reason}); falling back to "
                      "'xla' (this warning is shown once)", RuntimeWarning, stacklevel=3)


@functools.lru_cache(maxsize=64)
def _cudnn_compiles(q_shape, dtype, bias_shape, mask_shape, scale) -> str | None:
    """Compile fused forward + backward for these operands once (on GPU): cuDNN rejects some
    shapes only when the kernel is built, which a trace-time try/except cannot see."""
    spec = lambda shape, dt: None if shape is None else jax.ShapeDtypeStruct(shape, dt)
    args = (spec(q_shape, dtype), spec(bias_shape, dtype), spec(mask_shape, jnp.bool_))

    def loss(q, bias, mask):
        out = jax.nn.dot_product_attention(q, q, q, bias=bias, mask=mask, scale=scale,
                                           implementation="cudnn")
        return out.astype(jnp.float32).sum()

    try:
        jax.jit(jax.grad(loss, argnums=(0, 1) if bias_shape else 0)).lower(*args).compile()
    except Exception as e:  # noqa: BLE001 - any failure to build the kernel means "fall back"
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return None


def cudnn_unsupported(q: jax.Array, k: jax.Array, bias: jax.Array | None,
                      mask: jax.Array | None, scale: float) -> str | None:
    """Why cuDNN fused attention cannot run these operands, or None when it can.

    Checked: a GPU backend, bfloat16/float16 inputs, a head dim that is a multiple of 8 and at
    most 256, self-attention shapes, a ``[.., Tq, Tk]`` bias; then (GPU only) the fused forward
    and backward are compiled once per shape, since cuDNN refuses some bias/mask layouts only
    when the kernel is built.
    """
    if jax.default_backend() != "gpu":
        return f"no GPU backend (platform {jax.default_backend()})"
    if q.dtype not in (jnp.bfloat16, jnp.float16):
        return f"dtype {q.dtype} (cuDNN takes bfloat16/float16: set dtype='bfloat16')"
    if q.shape[-1] % 8 or q.shape[-1] > 256:
        return f"head dim {q.shape[-1]} (cuDNN needs a multiple of 8, at most 256)"
    if q.shape != k.shape:
        return "query and key shapes differ"
    if bias is not None and bias.shape[-2:] != (q.shape[1], k.shape[1]):
        return f"bias shape {bias.shape}"
    return _cudnn_compiles(tuple(q.shape), q.dtype, None if bias is None else tuple(bias.shape),
                           None if mask is None else tuple(mask.shape), float(scale))


def dot_product_attention(q: jax.Array, k: jax.Array, v: jax.Array, *, bias: jax.Array | None,
                          mask: jax.Array | None, scale: float,
                          implementation: str | None = None) -> jax.Array:
    """``jax.nn.dot_product_attention`` with a checked cuDNN path.

    ``implementation="cudnn"`` uses cuDNN's fused kernel (bias cast to the input dtype, as cuDNN
    requires) when :func:`cudnn_unsupported` finds no obstacle and the call traces; otherwise it
    falls back to ``"xla"`` with a one-time RuntimeWarning naming the reason. On the XLA path a
    bias stays in float32 (the logits are float32 there), which keeps ALiBi/T5 exact in bf16.
    """
    if implementation == "cudnn":
        reason = cudnn_unsupported(q, k, bias, mask, scale)
        if reason is None:
            try:
                return jax.nn.dot_product_attention(
                    q, k, v, bias=None if bias is None else bias.astype(q.dtype), mask=mask,
                    scale=scale, implementation="cudnn")
            except _CUDNN_ERRORS as e:
                reason = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        _warn_fallback(reason)
        implementation = "xla"
    return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, scale=scale,
                                        implementation=implementation)


def has_logits_hook(pe: PositionalEncoding) -> bool:
    """Whether ``pe`` overrides the contextual ``logits`` hook (it then needs explicit logits, so
    the fused cuDNN kernel is not used)."""
    return type(pe).logits is not PositionalEncoding.logits


class SelfAttention(nnx.Module):
    """Multi-head self-attention ``[B, T, d] -> [B, T, d]`` with PE hooks and a head mask."""

    def __init__(self, d_model: int, num_heads: int, *, attn_dropout: float = 0.0,
                 dtype=jnp.float32, implementation: str | None = None, rngs: nnx.Rngs):
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dtype = dtype
        self.implementation = implementation
        self.query = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.key = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.value = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.out = nnx.Linear(d_model, d_model, dtype=dtype, rngs=rngs)
        self.dropout = nnx.Dropout(attn_dropout)
        self.attn_dropout = attn_dropout

    def _heads(self, x: jax.Array) -> jax.Array:
        return x.reshape(*x.shape[:-1], self.num_heads, self.head_dim)

    def __call__(self, x: jax.Array, *, pe: PositionalEncoding, positions: jax.Array,
                 bias: jax.Array | None = None, mask: jax.Array | None = None,
                 head_mask: jax.Array | None = None, kv: jax.Array | None = None,
                 deterministic: bool = True, rngs: nnx.Rngs | None = None,
                 return_weights: bool = False, qk: jax.Array | None = None,
                 cache: dict[str, Any] | None = None, cache_index: jax.Array | None = None,
                 k_positions: jax.Array | None = None, prepared: Any = None,
                 q_scale: jax.Array | None = None, ring_slots: jax.Array | None = None):
        """Args:
          x: ``[B, T, d]`` inputs (queries; also keys/values unless ``kv`` is given).
          pe: the layer's PE; its ``rotate`` hook is applied to q and k.
          positions: ``[B or 1, T]`` positions.
          bias: ``[B or 1, H, T, T]`` additive logit bias (from the PE's ``bias`` hook).
          mask: boolean ``[B or 1, 1, T, T]``; False entries are not attended.
          head_mask: ``[H]`` multipliers of each head's output before the output projection.
          kv: optional ``[B, T, d]`` source of keys and values.
          return_weights: also return the ``[B, H, T, T]`` attention weights.
          qk: optional ``[B, T, d]`` input of the q (and, unless ``kv`` is given, k) projection
            (from the PE's ``attention_input`` hook); default ``x``.
          cache: this layer's key/value cache ``{"key": [B, S, H, Dk], "value": [B, S, H, Dv]}``
            (keys after ``rotate``); the new keys and values are written at slots
            ``cache_index .. cache_index + T - 1`` and attention runs over all S slots (``bias``
            and ``mask`` are then ``[.., T, S]``). Returns ``(out, new_cache)``.
          k_positions: ``[B or 1, Tk]`` positions of the keys attended (the cache slots' while
            decoding); default ``positions``. Only the ``logits`` hook reads them.
          prepared: ``pe.prepare(positions, positions)``, computed once per forward by the
            model (None: computed here).
          q_scale: optional ``[B or 1, T]`` multipliers of the queries after ``rotate`` (Llama 4's
            attention temperature, ``posjax.models.schedules.attention_temperature``).
          ring_slots: with ``cache``, marks it a ring buffer of a windowed layer (``[B, R, ..]``):
            attention runs over its R slots followed by the T new keys (``mask`` and ``bias``
            are then ``[.., T, R + T]``), and the last ``len(ring_slots)`` new keys/values are
            written at those slots (``(index + t) % R``; the ring wraps by design).
        """
        src = x if kv is None else kv
        q_src = x if qk is None else qk
        k_src = src if (qk is None or kv is not None) else qk
        q = self._heads(dense(self.query, q_src))
        k = self._heads(dense(self.key, k_src))
        v = self._heads(dense(self.value, src))
        if "rotate" in pe.hooks:
            if prepared is None:
                prepared = pe.prepare(positions, positions)
            q, k = pe.rotate_prepared(q, k, positions, positions, prepared)
        if q_scale is not None:
            q = q * q_scale[:, :, None, None].astype(q.dtype)
        new_cache = None
        if cache is not None and ring_slots is not None:
            m = ring_slots.shape[0]
            k = k.astype(cache["key"].dtype)
            v = v.astype(cache["value"].dtype)
            new_cache = {"key": cache["key"].at[:, ring_slots].set(k[:, k.shape[1] - m:]),
                         "value": cache["value"].at[:, ring_slots].set(v[:, v.shape[1] - m:])}
            k = jnp.concatenate([cache["key"], k], axis=1)
            v = jnp.concatenate([cache["value"], v], axis=1)
        elif cache is not None:
            start = (0, cache_index, 0, 0)
            k = jax.lax.dynamic_update_slice(cache["key"], k.astype(cache["key"].dtype), start)
            v = jax.lax.dynamic_update_slice(cache["value"], v.astype(cache["value"].dtype),
                                             start)
            new_cache = {"key": k, "value": v}
        scale = pe.attention_scale(q.shape[-1])
        width = v.shape[-1]  # a rotate hook may widen q, k (decoupled RoPE): zero-pad v to match
        if q.shape[-1] > width:
            v = jnp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, q.shape[-1] - width)])
        logits_fn = None
        if has_logits_hook(pe):
            k_pos = positions if k_positions is None else k_positions
            logits_fn = lambda logits: pe.logits(logits, q, k, positions, k_pos, mask)
        use_dropout = self.attn_dropout > 0.0 and not deterministic
        weights = None
        if return_weights or use_dropout:
            weights = attention_weights(q, k, scale=scale, bias=bias, mask=mask,
                                        logits_fn=logits_fn)
            probs = self.dropout(weights, deterministic=deterministic, rngs=rngs)
            out = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v)
        elif self.implementation == "cudnn" and logits_fn is None:
            out = dot_product_attention(q, k, v, bias=bias, mask=mask, scale=scale,
                                        implementation="cudnn")
        else:
            out = xla_attention(q, k, v, bias=bias, mask=mask, scale=scale, logits_fn=logits_fn)
        out = out[..., :width]
        if head_mask is not None:
            out = out * head_mask.astype(out.dtype)[:, None]
        out = dense(self.out, out.reshape(*out.shape[:-2], -1))
        if cache is not None:
            return out, new_cache
        return (out, weights) if return_weights else out
