"""Corpora of the Monotonicity-Conjecture check (arXiv 2604.05217): exact positional
distributions ``P [n, V]`` from named generator families.

A corpus is named by a spec string ``"family:arg:seed"``:

* ``"three_regime:MIXING:SEED"`` - :func:`posjax.data.synthetic.three_regime_corpus` with
  ``mixing`` ``"linear"`` (a smooth path through three Dirichlet regimes: its Hellinger
  geometry is close to the ``|i - j|`` line) or ``"hard"`` (three blocks of identical rows).
* ``"cyclic:CYCLES:SEED"`` - :func:`cyclic_mixture`: positions travel ``CYCLES`` times around a
  ring of four Dirichlet anchors, so distant positions can have equal distributions (a closed
  loop in Hellinger geometry, far from the line).

Every ``P`` is smoothed towards uniform, ``(1 - eps) P + eps / V`` (``eps`` =
``ConjectureConfig.smoothing``), so that the log-ratio (clr) geometry is finite.
"""
from __future__ import annotations

import numpy as np

__all__ = ["FAMILIES", "cyclic_mixture", "make_corpus", "parse_spec"]

FAMILIES = ("three_regime", "cyclic")


def cyclic_mixture(num_positions: int, vocab_size: int, *, cycles: int = 1,
                   anchors: int = 4, kappa: float = 2.0, alpha: float = 0.1,
                   seed: int = 0) -> np.ndarray:
    """Positions on a ring of ``anchors`` Dirichlet(``alpha``) distributions ``Q [A, V]``.

    Position ``i`` sits at angle ``theta_i = 2 pi cycles i / n`` and mixes the anchors with
    von Mises weights ``w_ia ~ exp(kappa cos(theta_i - 2 pi a / A))``: ``P = w Q``.

    Returns:
      ``[n, V]`` float64 rows summing to one.
    """
    if num_positions < 2 or vocab_size < 2 or cycles < 1 or anchors < 2:
        raise ValueError("cyclic_mixture needs num_positions >= 2, vocab_size >= 2, "
                         f"cycles >= 1 and anchors >= 2, got {num_positions}, {vocab_size}, "
                         f"{cycles}, {anchors}")
    rng = np.random.default_rng(seed)
    Q = rng.dirichlet(np.full(vocab_size, alpha), size=anchors)
    theta = 2 * np.pi * cycles * np.arange(num_positions) / num_positions
    w = np.exp(kappa * np.cos(theta[:, None] - 2 * np.pi * np.arange(anchors) / anchors))
    w = w / w.sum(axis=1, keepdims=True)
    P = w @ Q
    return P / P.sum(axis=1, keepdims=True)


def parse_spec(spec: str) -> tuple[str, str, int]:
    """``"family:arg:seed"`` -> ``(family, arg, seed)`` (ValueError naming the spec)."""
    parts = str(spec).split(":")
    if len(parts) != 3 or parts[0] not in FAMILIES:
        raise ValueError(f"corpus spec {spec!r} must be 'family:arg:seed' with family in "
                         f"{FAMILIES}")
    family, arg, seed = parts
    try:
        seed_i = int(seed)
    except ValueError:
        raise ValueError(f"corpus spec {spec!r}: seed {seed!r} is not an integer") from None
    if family == "three_regime" and arg not in ("linear", "hard"):
        raise ValueError(f"corpus spec {spec!r}: three_regime mixing must be linear or hard")
    if family == "cyclic" and not arg.isdigit():
        raise ValueError(f"corpus spec {spec!r}: cyclic needs an integer number of cycles")
    return family, arg, seed_i


def make_corpus(spec: str, num_positions: int, vocab_size: int, *, alpha: float,
                smoothing: float) -> np.ndarray:
    """The smoothed ``P [n, V]`` (float64) of the corpus named by ``spec``."""
    family, arg, seed = parse_spec(spec)
    if not 0 < smoothing < 1:
        raise ValueError(f"ConjectureConfig.smoothing must be in (0, 1), got {smoothing}")
    if family == "three_regime":
        from posjax.data.synthetic import three_regime_corpus
        P = np.asarray(three_regime_corpus(num_positions, vocab_size, mixing=arg, alpha=alpha,
                                           seed=seed).P, np.float64)
    else:
        P = cyclic_mixture(num_positions, vocab_size, cycles=int(arg), alpha=alpha, seed=seed)
    P = (1 - smoothing) * P + smoothing / vocab_size
    return P / P.sum(axis=1, keepdims=True)
