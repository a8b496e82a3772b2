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
                                             "use_cache", "exact_lengths"))
def _generate(graphdef, state, prompt, lengths, key, temperature, *, max_new_tokens: int,
              top_k: int | None, greedy: bool, use_cache: bool, exact_lengths: bool = False):
    model = nnx.merge(graphdef, state)
    batch, prompt_len = prompt.shape
    total = prompt_len + max_new_tokens
    rows = jnp.arange(batch)
    cols = jnp.arange(prompt_len)[None]
    buf = jnp.zeros((batch, total), jnp.int32).at[:, :prompt_len].set(
        jnp.where(cols < lengths[:, None], prompt, 0))
    sample = functools.partial(sample_logits, temperature=temperature, top_k=top_k,
                               greedy=greedy)

    if use_cache:
        # Rows are left-aligned in the cache: row b's prompt fills its last lengths[b] prompt
        # slots at positions 0.., and the slots before it (segment -1) are never attended.
        src = cols - (prompt_len - lengths)[:, None]
        real = src >= 0
        shifted = jnp.where(real, jnp.take_along_axis(prompt, jnp.maximum(src, 0), 1), 0)
        cache = model.init_cache(batch, total)
        logits, cache = model.decode(shifted, cache, positions=jnp.maximum(src, 0),
                                     segment_ids=jnp.where(real, 0, -1).astype(jnp.int32))

        def step(carry, i):
            cache, last, buf, key = carry
            key, sub = jax.random.split(key)
            tok = sample(last, sub)
            buf = buf.at[rows, lengths + i].set(tok)
            logits, cache = model.decode(tok[:, None], cache, positions=(lengths + i)[:, None])
            return (cache, logits[:, 0], buf, key), last

        carry = (cache, logits[:, -1], buf, key)
    elif exact_lengths:
        # PEs whose outputs depend on the sequence length (CAPE centring, dynamic NTK, a
        # convolution over the stream): step i runs on exactly prompt_len + i tokens, one
        # program per length, never on the zero-padded buffer.
        steps = []
        for i in range(max_new_tokens):
            last = model(buf[:, :prompt_len + i])[rows, lengths + i - 1]
            key, sub = jax.random.split(key)
            buf = buf.at[rows, lengths + i].set(sample(last, sub))
            steps.append(last)
        return buf, jnp.stack(steps, 1)
    else:
        def step(carry, i):
            buf, key = carry
            logits = model(buf)  # causal: the slots after lengths + i - 1 do not matter
            last = logits[rows, lengths + i - 1]
            key, sub = jax.random.split(key)
            tok = sample(last, sub)
            return (buf.at[rows, lengths + i].set(tok), key), last

        carry = (buf, key)
    carry, step_logits = jax.lax.scan(step, carry, jnp.arange(max_new_tokens))
    buf = carry[2] if use_cache else carry[0]
    return buf, jnp.moveaxis(step_logits, 0, 1)


def generate(model: LanguageModel, prompt, *, max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, rng: jax.Array | None = None, use_cache: bool = True,
             return_logits: bool = False, prompt_lengths=None):
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
        sequence every step (the reference; works with every causal PE): step k's logits are
        those of a plain forward pass over the prompt and the k tokens so far, whatever
        ``max_new_tokens`` (for a PE that cannot decode from a cache, e.g. CAPE with
        ``center=True`` or dynamic NTK, each step runs on exactly that many tokens).
      return_logits: also return the float32 logits ``[batch, max_new_tokens, vocab]`` each new
        token was chosen from.
      prompt_lengths: optional int ``[batch]``: row b's prompt is ``prompt[b, :prompt_lengths[b]]``
        (prompts of different lengths, right-padded; one compiled program for all of them).

    Returns:
      int32 tokens ``[batch, prompt_len + max_new_tokens]``: row b holds its prompt, then its
      new tokens, then zeros (with ``prompt_lengths``, the new tokens start at column
      ``prompt_lengths[b]``); and the logits when ``return_logits``.

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
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be finite and >= 0, got {temperature}")
    if 0 < temperature < np.finfo(np.float32).tiny:  # float32 flushes it: logits / T = inf
        raise ValueError(f"temperature {temperature} is below the smallest normal float32 "
                         f"({np.finfo(np.float32).tiny:.3g}); use temperature=0 for greedy")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer))):
        raise ValueError(f"top_k must be an integer or None, got {top_k!r}")
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
    length_dependent = [r for r in (pe.kv_cache_unsupported() for pe in model.transformer.pes)
                        if r]
    prompt = prompt.astype(jnp.int32)
    batch, prompt_len = prompt.shape
    if prompt_lengths is None:
        lengths = jnp.full((batch,), prompt_len, jnp.int32)
    else:
        lengths = np.asarray(prompt_lengths)
        if lengths.shape != (batch,) or not np.issubdtype(lengths.dtype, np.integer) \
                or lengths.min() < 1 or lengths.max() > prompt_len:
            raise ValueError(f"prompt_lengths must be {batch} integers in [1, {prompt_len}], "
                             f"got {prompt_lengths!r}")
        if length_dependent and lengths.min() < prompt_len:
            raise ValueError(f"prompt_lengths shorter than the prompt width need use_cache=True "
                             f"or a PE whose outputs do not depend on the sequence length; PE "
                             f"'{model.transformer.pe.name}': {length_dependent[0]} (generate "
                             f"rows of equal length together instead)")
        lengths = jnp.asarray(lengths, jnp.int32)
        prompt = jnp.where(jnp.arange(prompt_len)[None] < lengths[:, None], prompt, 0)
    low, high = int(prompt.min()), int(prompt.max())
    if low < 0 or high >= cfg.vocab_size:
        raise ValueError(f"prompt token ids span [{low}, {high}] outside the vocabulary "
                         f"[0, {cfg.vocab_size - 1}]")
    if max_new_tokens == 0:
        empty = jnp.zeros((prompt.shape[0], 0, cfg.vocab_size), jnp.float32)
        return (prompt, empty) if return_logits else prompt
    key = jax.random.key(0) if rng is None else rng
    graphdef, state = nnx.split(model)
    tokens, logits = _generate(graphdef, state, prompt, lengths, key,
                               jnp.float32(temperature or 1.0),
                               max_new_tokens=int(max_new_tokens), top_k=top_k, greedy=greedy,
                               use_cache=use_cache,
                               exact_lengths=not use_cache and bool(length_dependent))
    return (tokens, logits) if return_logits else tokens


def kv_cache_supported(model: LanguageModel) -> bool:
    """Whether every PE of ``model`` (every layer kind of its schedule) can decode from a
    key/value cache, i.e. whether :func:`generate` may run with ``use_cache=True``."""
    try:
        model.transformer.check_support("kv_cache")
    except ValueError:
        return False
    return True
