"""Autoregressive generation for causal language models, with or without a key/value cache.

The whole generation -- the prompt pass and every new token -- is one jitted program: the cache
(``Transformer.init_cache``) is a fixed-size buffer with a write index, so steps never
recompile, and positions are explicit offsets (slot ``index + t``). See
docs/decoding_and_packing.md for what a PE must satisfy to decode from the cache.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.models.heads import LanguageModel


def sample_logits(logits: jax.Array, key: jax.Array, *, temperature: jax.Array | float,
                  top_k: int | None, greedy: bool) -> jax.Array:
    """Next tokens ``[B]`` from float logits ``[B, V]``: argmax when ``greedy``, otherwise a
    draw from ``softmax(logits / temperature)`` restricted to the ``top_k`` largest logits."""
    if greedy:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    logits = logits / temperature
    if top_k is not None:
        kth = jax.lax.top_k(logits, top_k)[0][..., -1:]
        logits = jnp.where(logits < kth, -jnp.inf, logits)
    return jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("graphdef", "max_new_tokens", "top_k", "greedy",
                                             "use_cache"))
def _generate(graphdef, state, prompt, key, temperature, *, max_new_tokens: int,
              top_k: int | None, greedy: bool, use_cache: bool):
    model = nnx.merge(graphdef, state)
    batch, prompt_len = prompt.shape
    total = prompt_len + max_new_tokens
    buf = jnp.zeros((batch, total), jnp.int32).at[:, :prompt_len].set(prompt)
    sample = functools.partial(sample_logits, temperature=temperature, top_k=top_k,
                               greedy=greedy)

    if use_cache:
        cache = model.init_cache(batch, total)
        logits, cache = model.decode(prompt, cache)

        def step(carry, i):
            cache, last, buf, key = carry
            key, sub = jax.random.split(key)
            tok = sample(last, sub)
            buf = jax.lax.dynamic_update_slice(buf, tok[:, None], (0, prompt_len + i))
            logits, cache = model.decode(tok[:, None], cache)
            return (cache, logits[:, 0], buf, key), last

        carry = (cache, logits[:, -1], buf, key)
    else:
        def step(carry, i):
            buf, key = carry
            logits = model(buf)  # causal: the slots after prompt_len + i do not matter
            last = jax.lax.dynamic_index_in_dim(logits, prompt_len + i - 1, axis=1,
                                                keepdims=False)
            key, sub = jax.random.split(key)
            tok = sample(last, sub)
            buf = jax.lax.dynamic_update_slice(buf, tok[:, None], (0, prompt_len + i))
            return (buf, key), last

        carry = (buf, key)
    carry, step_logits = jax.lax.scan(step, carry, jnp.arange(max_new_tokens))
    buf = carry[2] if use_cache else carry[0]
    return buf, jnp.moveaxis(step_logits, 0, 1)


def generate(model: LanguageModel, prompt, *, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, rng: jax.Array | None = None, use_cache: bool = True,
             return_logits: bool = False):
    """Continue ``prompt`` with ``max_new_tokens`` tokens from a causal :class:`LanguageModel`.

    Args:
      model: a ``LanguageModel`` built with ``causal=True``.
      prompt: int ``[batch, prompt_len]`` token ids (``prompt_len >= 1``); every row starts at
        position 0.
      max_new_tokens: tokens to generate (>= 0).
      temperature: 0 for greedy decoding (argmax); > 0 samples from ``softmax(logits / T)``.
      top_k: sample only among the ``top_k`` largest logits (None: all).
      rng: PRNG key, required when ``temperature > 0``.
      use_cache: decode from a key/value cache (one new token per step); False recomputes the
        whole buffer every step (the reference; works with every causal PE).
      return_logits: also return the float32 logits ``[batch, max_new_tokens, vocab]`` each new
        token was chosen from.

    Returns:
      int32 tokens ``[batch, prompt_len + max_new_tokens]`` (the prompt, then the new tokens),
      and the logits when ``return_logits``.

    Raises:
      ValueError: a model that is not a causal LanguageModel, a malformed prompt or option, a
        length beyond a table-based PE, or (with ``use_cache``) a PE that cannot decode from a
        cache, with its reason.
    """
    if not isinstance(model, LanguageModel):
        raise ValueError(f"generate needs a posjax LanguageModel, got {type(model).__name__}")
    cfg = model.config
    if not cfg.causal:
        raise ValueError("generate needs a causal LanguageModel (config.causal=True)")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) \
            or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    prompt = jnp.asarray(prompt)
    if prompt.ndim != 2 or prompt.shape[1] < 1 or prompt.shape[0] < 1:
        raise ValueError(f"prompt must be [batch, prompt_len] with both >= 1, got shape "
                         f"{prompt.shape}")
    if not jnp.issubdtype(prompt.dtype, jnp.integer):
        raise ValueError(f"prompt must hold integer token ids, got dtype {prompt.dtype}")
    low, high = int(prompt.min()), int(prompt.max())
    if low < 0 or high >= cfg.vocab_size:
        raise ValueError(f"prompt token ids span [{low}, {high}] outside the vocabulary "
                         f"[0, {cfg.vocab_size - 1}]")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")
    if top_k is not None and not 1 <= top_k <= cfg.vocab_size:
        raise ValueError(f"top_k must be in [1, vocab_size={cfg.vocab_size}], got {top_k}")
    greedy = temperature == 0
    if not greedy and rng is None:
        raise ValueError("sampling (temperature > 0) needs a PRNG key: pass rng=jax.random.key(s)")
    total = prompt.shape[1] + max_new_tokens
    for pe in model.transformer.pes:
        if pe.max_positions is not None and total > pe.max_positions:
            raise ValueError(f"prompt_len + max_new_tokens = {total} exceeds the "
                             f"{pe.max_positions} positions of PE '{pe.name}'")
    if use_cache:
        model.transformer.check_support("kv_cache")
    prompt = prompt.astype(jnp.int32)
    if max_new_tokens == 0:
        empty = jnp.zeros((prompt.shape[0], 0, cfg.vocab_size), jnp.float32)
        return (prompt, empty) if return_logits else prompt
    key = jax.random.key(0) if rng is None else rng
    graphdef, state = nnx.split(model)
    tokens, logits = _generate(graphdef, state, prompt, key, jnp.float32(temperature or 1.0),
                               max_new_tokens=int(max_new_tokens), top_k=top_k, greedy=greedy,
                               use_cache=use_cache)
    return (tokens, logits) if return_logits else tokens
