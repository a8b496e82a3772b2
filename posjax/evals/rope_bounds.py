"""Closed-form limits of rotary PEs: the smallest RoPE base for a context length, and the
wavelengths of every rotary PE's frequencies against a target length.

* :func:`rope_base_bound` - Men et al., "Base of RoPE Bounds Context Length" (arXiv 2405.14591,
  Sec. 3): with frequencies ``theta_i = b^(-2i/d)``, the long-term-decay property of token
  discrimination holds up to distance ``L`` when
  ``B_m(b) = sum_{i < d/2} cos(m theta_i) >= 0`` for every ``0 <= m <= L``. ``B_m`` is not
  monotone in ``b``, so the bound is found by search (as in the paper), not in closed form.
* :func:`rope_wavelengths` - ``2 pi / theta_i`` of a registered rotary PE's frequencies (scalings
  included), and how many of them exceed a target length (the dimensions that never complete a
  turn within the context).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["rope_discrimination", "rope_base_bound", "rotary_pe_names", "rope_wavelengths"]


def _min_over_distances(bases: np.ndarray, context_length: int, head_dim: int) -> np.ndarray:
    """``min_{0 <= m <= L} B_m(b)`` for each base in ``bases [K]`` (float64), over distance
    blocks of 4096 so the ``[K, block, d/2]`` cosine table stays small."""
    i = np.arange(head_dim // 2, dtype=np.float64)
    theta = np.asarray(bases, np.float64)[:, None] ** (-2.0 * i[None] / head_dim)   # [K, d/2]
    best = np.full(len(theta), np.inf)
    for start in range(0, context_length + 1, 4096):
        m = np.arange(start, min(start + 4096, context_length + 1), dtype=np.float64)
        best = np.minimum(best, np.cos(m[None, :, None] * theta[:, None, :]).sum(-1).min(1))
    return best


def rope_discrimination(base: float, context_length: int, head_dim: int) -> np.ndarray:
    """``B_m(b) = sum_{i < d/2} cos(m b^(-2i/d))`` for ``m = 0..L`` ``[L + 1]`` (float64;
    arXiv 2405.14591, Eq. for the token-discrimination bound)."""
    _check(context_length, head_dim)
    i = np.arange(head_dim // 2)
    theta = float(base) ** (-2.0 * i / head_dim)
    m = np.arange(context_length + 1)[:, None]
    return np.cos(m * theta).sum(-1)


def _check(context_length, head_dim):
    if isinstance(context_length, bool) or int(context_length) != context_length \
            or context_length < 1:
        raise ValueError(f"context_length must be an integer >= 1, got {context_length!r}")
    if isinstance(head_dim, bool) or int(head_dim) != head_dim or head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be an even integer >= 2, got {head_dim!r}")


def rope_base_bound(context_length: int, head_dim: int, *, lo: float = 2.0,
                    hi: float = 1e12, per_decade: int = 400, rtol: float = 1e-4) -> float:
    """The smallest RoPE base ``b`` with ``B_m(b) >= 0`` for every ``m <= context_length``.

    Search (arXiv 2405.14591 finds the bound numerically): a geometric grid of ``per_decade``
    bases per decade from ``lo`` to ``hi``; the first grid base that satisfies the condition,
    refined by bisection against the grid point below it to relative width ``rtol``. ``B_m`` is
    not monotone in ``b``: a satisfying window narrower than the grid spacing below the
    returned value can be missed (the paper's values are quoted to two significant digits).

    Args:
      context_length: ``L``, the largest relative distance.
      head_dim: ``d`` (even), the rotary dimension of one head.

    Returns:
      the bound ``b`` (float).

    Raises:
      ValueError: bad arguments, or no base up to ``hi`` satisfies the condition.
    """
    _check(context_length, head_dim)
    if not (0 < lo < hi) or per_decade < 1 or not (0 < rtol < 1):
        raise ValueError(f"need 0 < lo < hi, per_decade >= 1 and 0 < rtol < 1, got lo={lo}, "
                         f"hi={hi}, per_decade={per_decade}, rtol={rtol}")
    L, d = int(context_length), int(head_dim)
    grid = np.geomspace(lo, hi, int(math.log10(hi / lo) * per_decade) + 1)
    first = None
    for start in range(0, len(grid), 64):          # scan in blocks, stop at the first hit
        ok = _min_over_distances(grid[start:start + 64], L, d) >= 0
        if ok.any():
            first = start + int(np.argmax(ok))
            break
    if first is None:
        raise ValueError(f"no RoPE base in [{lo:g}, {hi:g}] keeps B_m >= 0 up to m = {L} "
                         f"for head_dim {d}")
    if first == 0:
        return float(grid[0])
    a, b = float(grid[first - 1]), float(grid[first])
    while b / a - 1 > rtol:
        mid = math.sqrt(a * b)
        if _min_over_distances(np.asarray([mid]), L, d)[0] >= 0:
            b = mid
        else:
            a = mid
    return b


def rotary_pe_names() -> list[str]:
    """Registered PEs whose module exposes rotary ``frequencies()`` (RoPE and its scalings)."""
    import posjax.encodings as pe_lib
    return [n for n in pe_lib.names() if callable(getattr(pe_lib.info(n).module, "frequencies",
                                                          None))]


def rope_wavelengths(name: str, options: dict | None = None, *, head_dim: int,
                     target_length: int | None = None) -> dict:
    """Wavelengths ``2 pi / theta_i`` of a registered rotary PE's frequencies.

    The PE is built through the registry (``posjax.encodings.make``) with ``head_dim`` and
    ``max_len = target_length`` and must expose ``frequencies()`` (:func:`rotary_pe_names`;
    scalings such as linear, NTK, YaRN or llama3 are options of those PEs).

    Returns:
      ``{"frequencies" [k], "wavelengths" [k], "beyond_target": int | None}``, the last the
      number of wavelengths longer than ``target_length`` (dimensions that never complete a turn
      within the context).

    Raises:
      ValueError: an unknown PE, or one without rotary frequencies.
    """
    import posjax.encodings as pe_lib
    if name not in rotary_pe_names():
        raise ValueError(f"PE {name!r} is not a registered rotary PE with frequencies(); "
                         f"choose from {rotary_pe_names()}")
    pe = pe_lib.make(name, d_model=head_dim, num_heads=1, head_dim=head_dim,
                     max_len=target_length or 2048, causal=True, **(options or {}))
    theta = np.asarray(pe.frequencies(), np.float64).reshape(-1)
    with np.errstate(divide="ignore"):
        wavelengths = 2 * np.pi / theta           # a zero frequency never turns: inf
    return {"frequencies": theta, "wavelengths": wavelengths,
            "beyond_target": None if target_length is None
            else int(np.sum(wavelengths > target_length))}
