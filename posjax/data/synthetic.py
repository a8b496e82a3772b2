"""Synthetic corpora with known positional distributions (docs/interpretations.md).

* :func:`three_regime_corpus` -- beginning / middle / end regimes, each with its own
  Dirichlet(alpha) token distribution, hard or linearly blended across the regime boundaries;
  returns the exact ``P [n, V]`` and, optionally, sampled token sequences.
* :func:`linear_drift_distributions` -- positions drifting linearly between two Dirichlet
  distributions (the split-half debiasing toy, docs/interpretations.md).
* :func:`sample_tokens` / :func:`sample_distributions` -- vectorised sampling of sequences (one
  independent draw per position) or of per-position empirical distributions.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (synthetic corpus with three positional distributions; the design details
here are an interpretation, exposed as parameters).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["ThreeRegimeCorpus", "three_regime_corpus", "regime_weights",
           "linear_drift_distributions", "sample_tokens", "sample_distributions"]


@dataclasses.dataclass(frozen=True)
class ThreeRegimeCorpus:
    """A three-regime corpus.

    Attributes:
      P: ``[n, V]`` exact positional distributions (float64 numpy, rows sum to one).
      regimes: ``[3, V]`` token distributions of the beginning, middle and end regimes.
      weights: ``[n, 3]`` mixture weights, ``P = weights @ regimes``.
      tokens: ``[num_samples, n]`` int32 sequences (one draw per position), or None.
      config: every option, for results files.
    """

    P: np.ndarray
    regimes: np.ndarray
    weights: np.ndarray
    tokens: np.ndarray | None
    config: dict[str, Any]


def regime_weights(num_positions: int, *, mixing: str = "hard",
                   anchors: tuple[float, float, float] = (0.0, 0.5, 1.0)) -> np.ndarray:
    """Mixture weights ``[n, 3]`` of the beginning / middle / end regimes.

    ``"hard"``: one-hot weights, position ``i`` in regime ``floor(3 (i + 1/2) / n)`` (thirds).
    ``"linear"``: with ``t_i = i / (n - 1)``, the weights interpolate linearly between one-hot
    weights placed at the regime ``anchors`` (default ``t = 0, 1/2, 1``: hat functions, so every
    position blends its neighbouring regimes and the path from the first to the last position
    is piecewise linear in distribution space); before the first and after the last anchor a
    regime is pure. ``anchors=(1/6, 1/2, 5/6)`` blends across the thirds' boundaries only
    between regime centres.
    """
    if num_positions <= 0:
        raise ValueError(f"num_positions must be positive, got {num_positions}")
    if mixing == "hard":
        t = (np.arange(num_positions) + 0.5) / num_positions
        return np.eye(3)[np.minimum((t * 3).astype(int), 2)]
    if mixing != "linear":
        raise ValueError(f"mixing must be 'hard' or 'linear', got {mixing!r}")
    a = np.asarray(anchors, np.float64)
    if a.shape != (3,) or not np.all(np.diff(a) > 0):
        raise ValueError(f"anchors must be 3 increasing numbers, got {anchors}")
    t = np.arange(num_positions) / max(num_positions - 1, 1)
    return np.stack([np.interp(t, a, np.eye(3)[k]) for k in range(3)], axis=1)


def three_regime_corpus(num_positions: int, vocab_size: int,
                        samples_per_position: int | None = None, *, mixing: str = "hard",
                        alpha: float = 0.1,
                        anchors: tuple[float, float, float] = (0.0, 0.5, 1.0), seed: int = 0
                        ) -> ThreeRegimeCorpus:
    """Three-regime synthetic corpus with exact positional distributions.

    Args:
      num_positions: ``n``.
      vocab_size: ``V``.
      samples_per_position: number of sampled sequences (each holds one independent draw per
        position, so every position gets this many samples); None samples nothing.
      mixing: ``"hard"`` or ``"linear"`` (see :func:`regime_weights`).
      alpha: Dirichlet concentration ``alpha_tok`` of each regime's token distribution.
      anchors: regime anchors of ``"linear"`` mixing (see :func:`regime_weights`).
      seed: seed of the regime distributions and of the samples.

    Returns:
      :class:`ThreeRegimeCorpus` with ``P [n, V]`` and ``tokens [samples, n]`` (or None).
    """
    if vocab_size <= 1:
        raise ValueError(f"vocab_size must be > 1, got {vocab_size}")
    if alpha <= 0:
        raise ValueError(f"alpha must be positive, got {alpha}")
    rng = np.random.default_rng(seed)
    regimes = rng.dirichlet(np.full(vocab_size, alpha), size=3)
    regimes = regimes / regimes.sum(axis=1, keepdims=True)
    weights = regime_weights(num_positions, mixing=mixing, anchors=anchors)
    P = weights @ regimes
    P = P / P.sum(axis=1, keepdims=True)
    tokens = None
    if samples_per_position is not None:
        tokens = np.asarray(sample_tokens(P, samples_per_position, seed=seed + 1))
    config = {"generator": "three_regime_corpus", "num_positions": num_positions,
              "vocab_size": vocab_size, "samples_per_position": samples_per_position,
              "mixing": mixing, "alpha": alpha, "anchors": list(map(float, anchors)),
              "seed": seed}
    return ThreeRegimeCorpus(P, regimes, weights, tokens, config)


def linear_drift_distributions(num_positions: int, vocab_size: int, *, alpha: float = 0.05,
                               seed: int = 0) -> np.ndarray:
    """``P_i = (1 - t_i) Q_0 + t_i Q_1``, ``t_i = i / (n - 1)``, with ``Q_0, Q_1 ~
    Dirichlet(alpha)`` (the debiasing toy of docs/interpretations.md: ``V = 2000``, ``n = 6``, ``alpha = 0.05``).

    Returns:
      ``[n, V]`` float64 numpy array.
    """
    rng = np.random.default_rng(seed)
    Q = rng.dirichlet(np.full(vocab_size, alpha), size=2)
    t = np.linspace(0.0, 1.0, num_positions)[:, None]
    P = (1.0 - t) * Q[0] + t * Q[1]
    return P / P.sum(axis=1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("num",))
def _draw(key, cdf, *, num):
    u = jax.random.uniform(key, (cdf.shape[0], num), cdf.dtype) * cdf[:, -1:]
    tok = jax.vmap(lambda c, x: jnp.searchsorted(c, x, side="right"))(cdf, u)
    return jnp.minimum(tok, cdf.shape[1] - 1).T.astype(jnp.int32)


def sample_tokens(P: Any, num_samples: int, *, seed: int = 0, chunk: int = 8192) -> jax.Array:
    """Sample ``num_samples`` sequences with token ``i`` drawn independently from ``P_i``.

    Inverse-CDF sampling, vectorised over positions and samples (``jnp.searchsorted`` per
    position under ``vmap``); zero-probability tokens are never drawn.

    Args:
      P: ``[n, V]`` distributions (rows are renormalised).
      num_samples: number of sequences.
      seed: PRNG seed.
      chunk: sequences per device call (bounds memory to ``chunk * n`` draws).

    Returns:
      ``[num_samples, n]`` int32 token ids.
    """
    if num_samples < 0:
        raise ValueError(f"num_samples must be >= 0, got {num_samples}")
    P = np.asarray(P, np.float64)
    cdf = jnp.asarray(np.cumsum(P / P.sum(axis=1, keepdims=True), axis=1))
    key = jax.random.key(seed)
    num = min(chunk, num_samples)  # one compiled shape; the last block is sliced
    out = [_draw(jax.random.fold_in(key, start), cdf, num=num)[: num_samples - start]
           for start in range(0, num_samples, max(num, 1))]
    if not out:
        return jnp.zeros((0, P.shape[0]), jnp.int32)
    return out[0] if len(out) == 1 else jnp.concatenate(out, axis=0)


def sample_distributions(P: Any, samples_per_position: int, *, seed: int = 0,
                         split_half: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Empirical per-position distributions from ``samples_per_position`` draws of each ``P_i``.

    Multinomial counts are drawn for all positions at once (no loop over positions).

    Args:
      P: ``[n, V]`` distributions.
      samples_per_position: ``N`` draws per position.
      seed: numpy seed.
      split_half: draw two independent halves of ``N // 2`` samples each (for split-half
        debiasing); the outputs gain a leading axis of size 2.

    Returns:
      ``(P_hat [n, V], counts [n, V])`` float64 / int64 numpy arrays (``[2, n, V]`` when
      ``split_half``).
    """
    if samples_per_position <= 0:
        raise ValueError(f"samples_per_position must be positive, got {samples_per_position}")
    P = np.asarray(P, np.float64)
    P = P / P.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    if split_half:
        half = samples_per_position // 2
        if half == 0:
            raise ValueError("split_half needs samples_per_position >= 2")
        counts = rng.multinomial(half, np.broadcast_to(P, (2,) + P.shape))
    else:
        counts = rng.multinomial(samples_per_position, P)
    return counts / counts.sum(axis=-1, keepdims=True), counts
