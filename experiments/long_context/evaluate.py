"""The four evaluations of ``experiments.long_context`` for one seed, from :mod:`posjax.evals`:
perplexity (non-overlapping windows of the held-out stream rows), passkey and needle exact
match of greedy decoding on the length x depth grid (the evaluated length counts the answer:
prompt length l - key_length), and
the attention diagnostics (mean over layers and heads)."""
from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from experiments.long_context.config import LongContextConfig


@functools.partial(jax.jit, static_argnames=("graphdef",))
def _logits(graphdef, state, tokens):
    return nnx.merge(graphdef, state)(tokens)


def greedy_answers(model, prompts: np.ndarray, k: int) -> np.ndarray:
    """``k`` greedy tokens after each prompt ``[B, P]`` -> ``[B, k]``.

    For a model whose PEs all decode from a key/value cache (each token's logits depend only on
    the tokens up to it) the sequence is recomputed at the fixed width ``P + k`` (the zeros after
    the current token do not change its logits: one compiled program per width, identical to
    ``posjax.models.generate(use_cache=False)``); any other model goes through ``generate``
    without a cache."""
    from posjax.models import generate

    try:
        model.transformer.check_support("kv_cache")
    except ValueError:
        out = generate(model, prompts, max_new_tokens=k, temperature=0.0, use_cache=False)
        return np.asarray(out)[:, prompts.shape[1]:]
    P = prompts.shape[1]
    tokens = np.concatenate([prompts, np.zeros((len(prompts), k), prompts.dtype)], 1)
    graphdef, state = nnx.split(model)
    for j in range(k):
        logits = _logits(graphdef, state, jnp.asarray(tokens, jnp.int32))
        tokens[:, P + j] = np.asarray(jnp.argmax(logits[:, P - 1 + j], -1))
    return tokens[:, P:]


def lengths(cfg: LongContextConfig) -> list[int]:
    return sorted({f * cfg.train_length for f in cfg.eval_factors})


def evaluate(models_at, cfg: LongContextConfig, corpus: dict, seed: int) -> dict[str, Any]:
    """The four evaluations of one seed; ``models_at(l)`` is the model evaluated at length l."""
    from posjax.evals import (attention_diagnostics, needle_retrieval, passkey_retrieval,
                              perplexity_by_length)

    vocab, k, rows = corpus["vocab"], cfg.key_length, corpus["eval"]
    out: dict[str, Any] = {"nll": {}, "passkey": [], "needle": [], "attention": {}}
    for l in lengths(cfg):
        model = models_at(l)
        out["nll"][l] = perplexity_by_length(model, rows, [l])["nll"][0]
        answer = lambda p, m=model: greedy_answers(m, p, k)                   # noqa: E731
        for task, fn in (("passkey", passkey_retrieval), ("needle", needle_retrieval)):
            rng = np.random.default_rng((cfg.data_seed, seed, l, len(task)))
            extra = {"num_needles": cfg.num_needles} if task == "needle" else {}
            got = fn(answer, vocab, [l - k], list(cfg.depths), cfg.trials, rng, **extra)
            out[task].append(got["accuracy"][0])
        try:
            att = attention_diagnostics(model, rows[:cfg.attention_rows, :l])[l]
            out["attention"][l] = {key: float(np.mean(v)) for key, v in att.items()}
        except (ValueError, TypeError, NotImplementedError) as e:
            out["attention"][l] = {"error": f"{type(e).__name__}: {e}"[:200]}
    out["chance"] = got["chance"]
    return out
