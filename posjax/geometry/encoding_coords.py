"""Coordinates whose Euclidean distances are the fixed-encoding distances of
:func:`posjax.geometry.encoding_distances`, for stress without an ``[n, n]`` array.

A configuration ``X [n, k]`` with ``||x_i - x_j|| = E_ij`` lets
:func:`posjax.geometry.stress_from_distributions` stream the stress of an encoding against the
Hellinger geometry of ``P``. With ``a_k = p w_k``:

* sinusoidal: ``x = [sin a_k, cos a_k]_k`` (the PE table itself, ``d`` columns), since
  ``(sin a - sin b)^2 + (cos a - cos b)^2 = 4 sin^2((a - b) / 2)``
  (Vaswani et al., arXiv 1706.03762);
* RoPE (``"kernel"`` mode): ``x = sqrt(2 / d_h) [cos p theta_k, sin p theta_k]_k`` over the
  rotated planes: the orbit ``R_p u`` of a unit ``u`` with energy ``2 / d_h`` per plane (Su et
  al., arXiv 2104.09864); the ``"random_u"`` mode averages distances and has no such form;
* ALiBi: ``x = s p`` (one column; ``s`` from :func:`posjax.geometry.adapters.alibi_scale`, as in
  :func:`posjax.geometry.dist_alibi`);
* NoPE: one zero column (``E = 0``).

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (stress of sinusoidal and relative encodings).
"""
from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from posjax.geometry.adapters import _frequencies, alibi_scale

__all__ = ["encoding_coordinates", "COORDINATE_ENCODINGS"]

#: Encodings with a coordinate form (the closed forms of ``encoding_distances``).
COORDINATE_ENCODINGS = ("sinusoidal", "rope", "alibi", "nope", "none")


def _positions(n: int, positions: Any) -> jnp.ndarray:
    if n <= 0:
        raise ValueError(f"num_positions must be positive, got {n}")
    if positions is None:
        return jnp.arange(n, dtype=jnp.result_type(float))
    pos = jnp.asarray(positions, jnp.result_type(float))
    if pos.shape != (n,):
        raise ValueError(f"positions must have shape ({n},), got {pos.shape}")
    return pos


def _sinusoidal(pos, dim: int = 768, base: float = 10000.0, freq_spacing: str = "2k/d"):
    if dim <= 0 or dim % 2:
        raise ValueError(f"dim must be a positive even integer, got {dim}")
    if freq_spacing not in ("2k/d", "k/(d/2-1)"):
        raise ValueError(f"freq_spacing must be '2k/d' or 'k/(d/2-1)', got {freq_spacing!r}")
    return _orbit(pos, dim=dim, base=float(base), spacing=freq_spacing, sin_first=True, gain=1.0)


@functools.partial(jax.jit, static_argnames=("dim", "base", "spacing", "sin_first", "gain"))
def _orbit(pos, *, dim, base, spacing, sin_first, gain):
    """``gain [sin a, cos a]`` (or ``[cos a, sin a]``) with ``a = p w_k``, ``k < dim / 2``."""
    a = pos[:, None] * _frequencies(dim, base, spacing)[None, :]
    parts = [jnp.sin(a), jnp.cos(a)] if sin_first else [jnp.cos(a), jnp.sin(a)]
    return gain * jnp.concatenate(parts, axis=1)


def _rope(pos, head_dim: int = 64, base: float = 10000.0, mode: str = "kernel",
          rotary_dim: int | None = None):
    d_rot = head_dim if rotary_dim is None else rotary_dim
    if head_dim <= 0 or head_dim % 2 or not 0 < d_rot <= head_dim:
        raise ValueError(f"need an even head_dim > 0 and 0 < rotary_dim <= head_dim, got "
                         f"head_dim={head_dim}, rotary_dim={d_rot}")
    if mode != "kernel":
        raise ValueError(f"RoPE mode {mode!r} has no coordinate form (the 'random_u' distance "
                         "is a mean of orbit distances); use mode='kernel'")
    return _orbit(pos, dim=d_rot, base=float(base), spacing="2k/d", sin_first=False,
                  gain=math.sqrt(2.0 / head_dim))


def _alibi(pos, scale: Any = None, num_heads: int | None = None):
    return alibi_scale(scale, num_heads) * pos[:, None]


def encoding_coordinates(name: str, num_positions: int, *, positions: Any = None,
                         **options: Any) -> np.ndarray:
    """Coordinates ``X [n, k]`` with ``||x_i - x_j|| = encoding_distances(name, n, ...)_ij``.

    Args:
      name: ``"sinusoidal"`` (options ``dim``/``d_model``, ``base``, ``freq_spacing``;
        ``k = dim``), ``"rope"`` (``head_dim``, ``base``, ``mode="kernel"``, ``rotary_dim``;
        ``k = rotary_dim``), ``"alibi"`` (``scale``, ``num_heads``; ``k = 1``) or
        ``"nope"``/``"none"`` (``k = 1``, all zero).
      num_positions: ``n``.
      positions: optional ``[n]`` positions (default ``0..n-1``).
      **options: the options of the matching closed form of ``encoding_distances``.

    Returns:
      ``X [n, k]`` as a NumPy array (float64 under ``jax.enable_x64``).

    Raises:
      ValueError: an encoding without a coordinate form (bias PEs such as T5, RoPE
        ``"random_u"``), or bad options.
    """
    n = int(num_positions)
    pos = _positions(n, positions)
    opts = dict(options)
    if name == "sinusoidal" and "d_model" in opts:
        opts["dim"] = opts.pop("d_model")
    forms = {"sinusoidal": _sinusoidal, "rope": _rope, "alibi": _alibi,
             "nope": lambda p: jnp.zeros((n, 1), p.dtype),
             "none": lambda p: jnp.zeros((n, 1), p.dtype)}
    if name not in forms:
        raise ValueError(f"encoding {name!r} has no coordinate form; choose one of "
                         f"{', '.join(COORDINATE_ENCODINGS)} (use encoding_distances for the "
                         "others)")
    try:
        return np.asarray(forms[name](pos, **opts))
    except TypeError as exc:
        raise ValueError(f"bad options for encoding '{name}': {exc}") from None
