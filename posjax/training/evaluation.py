"""Evaluation shared by the experiments: fixed-shape batched inference (``map_in_batches`` maps
any function of arrays, ``apply_in_batches`` applies a model through a shared compiled program),
classifier accuracy and loss, class predictions and per-group accuracy, and teacher-forced exact
match.

Every batched function pads the last batch to the batch size (repeating its first row) so a
dataset of any size compiles one program, and drops the padded rows from the result.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from posjax.input_checks import check_range, collect, first_error, stack_rows
from posjax.training.data import iterate
from posjax.training.step_cache import BoundedCache, StructuralStep


def map_in_batches(fn: Callable[..., Any], arrays: Mapping[str, np.ndarray], *,
                  batch: int = 256) -> np.ndarray:
    """Host-side map of ``fn(**batch_of_arrays) -> [b, ...]`` over fixed-size batches of
    ``arrays``, results concatenated ``[n, ...]`` as NumPy (no model involved; see
    :func:`apply_in_batches` for a model).

    Args:
      fn: a (jitted) function of keyword arrays with a leading batch axis.
      arrays: equally long arrays ``[n, ...]``; ``n`` must be positive.
      batch: batch size; the last batch is padded with copies of its first row.
    """
    sizes = {k: len(v) for k, v in arrays.items()}
    if not sizes or len(set(sizes.values())) != 1:
        raise ValueError(f"map_in_batches needs equally long arrays, got lengths {sizes}")
    n = next(iter(sizes.values()))
    if n == 0:
        raise ValueError("map_in_batches got an empty dataset")
    if batch <= 0:
        raise ValueError(f"batch must be positive, got {batch}")
    batch = min(batch, n)
    out = []
    for start in range(0, n, batch):
        chunk = {k: np.asarray(v[start:start + batch]) for k, v in arrays.items()}
        short = batch - len(next(iter(chunk.values())))
        if short:
            chunk = {k: np.concatenate([v, np.repeat(v[:1], short, 0)]) for k, v in chunk.items()}
        res = np.asarray(fn(**{k: jnp.asarray(v) for k, v in chunk.items()}))
        out.append(res[:batch - short])
    return np.concatenate(out)


def apply_in_batches(model: nnx.Module, fn: Callable[..., jax.Array],
                  arrays: Mapping[str, np.ndarray], *, batch: int = 256) -> np.ndarray:
    """Apply ``model`` through ``fn(model, **arrays) -> [b, ...]`` over fixed-size batches
    (:func:`map_in_batches`), concatenated ``[n, ...]``.

    The jitted program is shared, through the structural step cache, by every model of the same
    computation (e.g. all members of an ensemble): evaluating M such models compiles once.
    """
    graphdef, state = nnx.split(model)
    run = _program(graphdef, fn)
    return map_in_batches(lambda **kw: run(state, kw), arrays, batch=batch)


# logits_fn -> its argmax function, one object per logits_fn so the program cache below hits
_ARGMAX = BoundedCache(64)


def predict_classes(model: nnx.Module, logits_fn: Callable[..., jax.Array],
                    arrays: Mapping[str, np.ndarray], *, batch: int = 512) -> np.ndarray:
    """Argmax class per example ``[n]`` of ``logits_fn(model, **arrays) -> [b, classes]``
    (deterministic mode is the caller's ``logits_fn``'s business); see :func:`apply_in_batches`."""
    argmax = _ARGMAX.get(logits_fn, lambda: lambda m, **kw: jnp.argmax(logits_fn(m, **kw), -1))
    return apply_in_batches(model, argmax, arrays, batch=batch)


_PROGRAMS = BoundedCache(64)


def _program(graphdef, fn):
    """``(state, arrays) -> fn(merge(graphdef, state), **arrays)``, jitted and shared through the
    structural step cache."""
    def run(state, arrays):
        return fn(nnx.merge(graphdef, state), **arrays)

    return _PROGRAMS.get((graphdef, fn), lambda: StructuralStep(jax.jit(run)))


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


def group_accuracy(predictions: np.ndarray, labels: np.ndarray,
                   groups: np.ndarray | None = None) -> dict[str, float]:
    """``{"all": accuracy}`` plus one accuracy per distinct value of ``groups`` (keyed by
    ``str(value)``); an empty group is never reported (no NaN)."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    if predictions.shape != labels.shape or predictions.size == 0:
        raise ValueError(f"predictions {predictions.shape} and labels {labels.shape} must have "
                         "the same non-empty shape")
    hit = predictions == labels
    out = {"all": float(hit.mean())}
    if groups is not None:
        groups = np.asarray(groups)
        for g in np.unique(groups):
            out[str(g)] = float(hit[groups == g].mean())
    return out


def lm_exact_match(model: nnx.Module, tokens: np.ndarray, loss_mask: np.ndarray, *,
                   batch: int = 256) -> np.ndarray:
    """Per sequence ``[n]`` (bool): every masked next token is the model's argmax given the gold
    prefix, in one causal forward pass. For a causal model this equals greedy-decoding exact
    match of the masked span: greedy reproduces the span exactly when each of its tokens is the
    argmax after the gold (= so far generated) prefix."""
    return apply_in_batches(model, _exact_match, {"tokens": tokens, "loss_mask": loss_mask},
                         batch=batch)


def _exact_match(model, tokens, loss_mask):
    logits = model(tokens)[:, :-1]
    ok = (jnp.argmax(logits, -1) == tokens[:, 1:]) | ~loss_mask[:, 1:].astype(bool)
    return ok.all(-1)


# --- greedy decoding exact match (cross-check of lm_exact_match) -------------------------------
def greedy_exact_match(model: nnx.Module, tokens: np.ndarray, prefix_len: np.ndarray,
                       target_len: np.ndarray, *, use_cache: bool | None = None
                       ) -> tuple[np.ndarray, bool]:
    """Exact match ``[n]`` (bool) of greedy decoding with :func:`posjax.models.generate`, and
    whether it decoded from a key/value cache.

    Args:
      model: a causal ``LanguageModel``.
      tokens: int ``[n, T]`` gold sequences ``<bos> input <sep> target <eos> <pad>...``.
      prefix_len: int ``[n]``: row i's prompt is ``tokens[i, :prefix_len[i]]``.
      target_len: int ``[n]``: row i is exact when its first ``target_len[i] + 1`` generated
        tokens are ``tokens[i, prefix_len[i]:prefix_len[i] + target_len[i] + 1]`` (the target
        and ``<eos>``).
      use_cache: decode from a key/value cache; None: when every PE of the model supports one
        (:func:`posjax.models.kv_cache_supported`), else recompute the sequence each step.

    For a causal model this equals :func:`lm_exact_match` of the target span (the protocol of
    arXiv 2305.19466, Sec. 3). Raises ValueError when the longest prompt plus the decoded steps
    exceed the width ``T``.
    """
    from posjax.models import generate, kv_cache_supported

    tokens, prefix_len, target_len = (np.asarray(tokens), np.asarray(prefix_len),
                                      np.asarray(target_len))
    width = tokens.shape[1]
    prompt_len, steps = int(np.max(prefix_len)), int(np.max(target_len)) + 1
    if prompt_len + steps > width:
        raise ValueError(f"greedy_exact_match: prompt {prompt_len} + {steps} steps exceeds the "
                         f"sequence width {width}")
    if use_cache is None:
        use_cache = kv_cache_supported(model)
    out = np.asarray(generate(model, tokens[:, :prompt_len], max_new_tokens=steps,
                              temperature=0.0, use_cache=use_cache,
                              prompt_lengths=prefix_len.astype(np.int32)))
    cols = prefix_len[:, None] + np.arange(steps)[None]  # the new tokens of each row
    want = np.take_along_axis(tokens, np.minimum(cols, width - 1), axis=1)
    got = np.take_along_axis(out, cols, axis=1)
    scored = np.arange(steps)[None] <= target_len[:, None]  # target and <eos>
    return ((got == want) | ~scored).all(axis=1), bool(use_cache)
