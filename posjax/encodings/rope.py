"""Rotary position embedding (Su et al., "RoFormer", arXiv 2104.09864).

Each pair of coordinates of q and k is rotated by the angle ``p * theta_k``, so that
``<R_i q, R_j k> = q^T R_{j-i} k`` depends on positions only through ``j - i``.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.encodings.base import PEContext, PositionalEncoding
from posjax.encodings.registry import register


def rotary_dim(head_dim: int, rotary_fraction: float = 1.0) -> int:
    """Number of rotated dims: ``2 * floor(f * d_h / 2)`` (GPT-NeoX ``rotary_pct``)."""
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"RoPE needs a positive even head_dim, got {head_dim}")
    if not 0.0 < rotary_fraction <= 1.0:
        raise ValueError(f"rotary_fraction must be in (0, 1], got {rotary_fraction}")
    rot = 2 * int(rotary_fraction * head_dim // 2)
    if rot == 0:
        raise ValueError(f"rotary_fraction={rotary_fraction} rotates no dims of head_dim={head_dim}")
    return rot


def rope_frequencies(rot_dim: int, base: float = 10000.0, dtype=jnp.float32) -> jax.Array:
    """theta_k = base^(-2k/rot_dim), k = 0..rot_dim/2 - 1, as ``[rot_dim // 2]``.

    Computed in float64 and rounded once to ``dtype`` when ``base`` is a concrete number (a
    float32 power would be off by several ulps); a traced ``base`` is computed in ``dtype``.
    ``dtype=np.float64`` returns the exact NumPy float64 values, which :func:`rope_angles` uses
    to keep the angles accurate to float64 frequencies (not just to their float32 rounding).
    """
    if isinstance(base, jax.core.Tracer):
        k = jnp.arange(rot_dim // 2, dtype=dtype)
        return jnp.asarray(base, dtype) ** (-2.0 * k / rot_dim)
    k = np.arange(rot_dim // 2, dtype=np.float64)
    theta = np.float64(base) ** (-2.0 * k / rot_dim)
    return theta if dtype is np.float64 else jnp.asarray(theta, dtype)


def _two_pi_parts() -> tuple[float, ...]:
    """2 pi as C1 + C2 + C3 + C4: three float32 parts of 6 significant bits (so that n * C_i is
    exact for integers |n| < 2^18) and a float32 rest."""
    rest, parts = 2.0 * np.pi, []
    for _ in range(3):
        quantum = 2.0 ** (np.floor(np.log2(rest)) - 5)
        part = np.floor(rest / quantum) * quantum
        parts.append(float(np.float32(part)))
        rest -= part
    parts.append(float(np.float32(rest)))
    return tuple(parts)


_TWO_PI = _two_pi_parts()


def _split12(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """float32 ``x = hi + lo`` exactly, ``hi`` keeping 12 significant bits (``lo`` has <= 12)."""
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32) & jnp.uint32(0xFFFFF000)
    hi = jax.lax.bitcast_convert_type(bits, jnp.float32)
    return hi, x - hi


def _split_host(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 ``theta ~= hi + mid + rest`` as float32 arrays, ``hi`` and ``mid`` with 12
    significant bits, ``rest`` the float32 rounding of what remains (about 2^-24 theta)."""
    def trunc12(v):
        return (np.asarray(v, np.float32).view(np.uint32) & np.uint32(0xFFFFF000)).view(np.float32)

    hi = trunc12(theta)
    mid = trunc12(theta - hi.astype(np.float64))
    rest = (theta - hi.astype(np.float64) - mid.astype(np.float64)).astype(np.float32)
    return hi, mid, rest


def _reduce(x: jax.Array) -> jax.Array:
    """``x - n 2 pi`` in [-pi, pi] (about), n = round(x / 2 pi), for |x| < 2^19 pi (Cody-Waite:
    each ``n * C_i`` is exact, so the error is a few float32 ulps of pi)."""
    n = jnp.round(x * np.float32(1.0 / (2.0 * np.pi)))
    for c in _TWO_PI:
        x = x - n * np.float32(c)
    return x


# |position| up to which rope_angles is accurate to 2e-6 rad in float32 (see its docstring).
PRECISION_BOUND = 1 << 20
_warned_past_bound = False


def _warn_past_precision_bound(positions) -> None:
    """Warn once per process when concrete positions pass ``PRECISION_BOUND`` (the float32
    angle then loses accuracy: about 0.25 rad at 2^23). Traced positions are not inspected."""
    global _warned_past_bound
    if _warned_past_bound or isinstance(positions, jax.core.Tracer):
        return
    pos = np.asarray(positions)
    if pos.size and float(np.max(np.abs(pos))) > PRECISION_BOUND:
        _warned_past_bound = True
        import warnings
        warnings.warn(f"RoPE position {float(np.max(np.abs(pos))):.0f} is past 2^20, the "
                      f"precision bound of float32 angles (rope_angles); the rotation degrades "
                      f"(about 0.25 rad at 2^23). Use float64 (x64) for such positions. "
                      f"(warned once)", UserWarning, stacklevel=3)


def rope_angles(positions: jax.Array, frequencies: jax.Array | np.ndarray, *,
                dtype=jnp.float32) -> jax.Array:
    """Rotation angles ``positions[..., None] * frequencies`` (reduced to about [-pi, pi] in
    float32), the one angle function of the RoPE family.

    In float32 the naive product loses the angle at large positions: at p = 2^20 the rounding of
    the product alone is up to 0.06 rad, and the float32 rounding of theta another ~0.02 rad.
    Here both factors are split into parts whose products are exact in float32:
    ``p = p_hi + p_lo + p_frac`` (``p_hi`` a multiple of 4096, ``p_lo`` an integer of magnitude
    below 4096, all of p's sign) and ``theta = t_hi + t_mid (+ t_rest)`` (12 significant bits
    each); each exact product is reduced modulo 2 pi (Cody-Waite, a 4-part 2 pi) and the reduced
    parts are summed with a reduction after each addition.

    Accuracy (float32, |p| <= 2^20, |theta| <= 1): the angle is within 2e-6 rad of the float64
    ``p * theta`` modulo 2 pi, where theta is the float64 value when ``frequencies`` is a NumPy
    float64 array (as :func:`rope_frequencies` gives with ``dtype=np.float64``) and the float32
    value otherwise. A rotation by the angle then moves a vector by at most 2e-6 |x|
    (``tests/reliability/test_rope_precision.py`` checks 1e-5 |x| against float64). Concrete
    positions past 2^20 warn once per process (a ``UserWarning``); traced ones are not inspected.

    Args:
      positions: ``[...]`` integer or float positions.
      frequencies: ``[n]`` angular frequencies (NumPy float64 for float64 accuracy).
      dtype: float32, or float64 for the direct product (x64 mode).

    Returns:
      ``[..., n]`` angles in ``dtype``.
    """
    if jnp.dtype(dtype) != jnp.float32:
        return jnp.asarray(positions, dtype)[..., None] * jnp.asarray(frequencies, dtype)
    _warn_past_precision_bound(positions)
    pos = jnp.asarray(positions, jnp.float32)[..., None]
    p_hi = jnp.trunc(pos * np.float32(1.0 / 4096.0)) * np.float32(4096.0)  # towards 0: the
    p_lo = jnp.trunc(pos - p_hi)                                               # differences
    p_frac = pos - p_hi - p_lo                                                 # are exact
    if isinstance(frequencies, np.ndarray):
        t_hi, t_mid, t_rest = _split_host(np.asarray(frequencies, np.float64))
        theta = jnp.asarray(frequencies, jnp.float32)
        total = _reduce(p_frac * theta + pos * t_rest)
    else:
        theta = jnp.asarray(frequencies, jnp.float32)
        t_hi, t_mid = _split12(theta)
        total = _reduce(p_frac * theta)
    for part in (p_hi * t_hi, p_hi * t_mid, p_lo * t_hi, p_lo * t_mid):
        total = _reduce(total + _reduce(part))
    return total


# Largest host table (entries of cos, and of sin) that traced positions gather from; a longer
# one would be embedded in every compiled program as a large constant.
_MAX_GATHER_TABLE = 1 << 21


@functools.lru_cache(maxsize=32)
def _host_tables(pos_bytes: bytes, pos_shape: tuple[int, ...], pos_dtype: str, theta_bytes: bytes,
                 dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """float64 ``cos, sin`` of ``positions[..., None] * theta``, rounded once to ``dtype``; cached
    per (positions, frequencies, dtype), so a model's static positions cost one host table."""
    pos = np.frombuffer(pos_bytes, pos_dtype).reshape(pos_shape).astype(np.float64)
    ang = pos[..., None] * np.frombuffer(theta_bytes, np.float64)
    cos, sin = np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
    cos.setflags(write=False)
    sin.setflags(write=False)
    return cos, sin


def rope_tables(positions: jax.Array | np.ndarray, frequencies: jax.Array | np.ndarray, *,
                dtype=jnp.float32, table_len: int | None = None) -> tuple[jax.Array, jax.Array]:
    """``(cos, sin)`` of the angles ``positions[..., None] * frequencies``, each ``[..., n]``.

    Host positions (a NumPy array, e.g. a model's default ``arange(T)``) with concrete
    frequencies give a float64 NumPy table, computed once per (positions, frequencies, dtype)
    and rounded to ``dtype``: inside ``jit`` it is a constant, so the step computes no angle.
    Any other positions (traced, ``[B, T]`` of packed rows or decoding) go through
    :func:`rope_angles` (exact to float64 in float32) and one cos/sin in the traced program.
    (XLA:CPU fuses that computation into each consumer, i.e. recomputes it per layer and for q
    and k, also behind ``jax.lax.optimization_barrier``; measured in docs/results.md.) With
    ``table_len`` and concrete frequencies, traced *integer* positions instead gather rows of
    the float64 host table of ``arange(table_len)`` when every position lies in
    ``[0, table_len)`` (a ``lax.cond`` at run time; otherwise the angles are computed as
    above), so a packed or decoding step costs one gather instead of the angle reduction
    (tables above 2^21 entries are not built: the angles are computed).

    Args:
      positions: ``[...]`` positions.
      frequencies: ``[n]`` angular frequencies (NumPy float64 for float64 accuracy).
      dtype: float32, or float64 (x64 mode).
      table_len: optional length of the host table that traced integer positions gather from
        (e.g. the model's ``max_len``); None computes their angles.

    Returns:
      ``cos, sin`` ``[..., n]`` in ``dtype``.
    """
    host_theta = not isinstance(frequencies, jax.core.Tracer)
    if isinstance(positions, np.ndarray) and host_theta:
        pos = np.ascontiguousarray(positions)
        theta = np.ascontiguousarray(np.asarray(frequencies, np.float64))
        return _host_tables(pos.tobytes(), pos.shape, pos.dtype.str, theta.tobytes(),
                            jnp.dtype(dtype).name)

    def computed(p):
        angles = rope_angles(p, frequencies, dtype=dtype)
        return jnp.cos(angles), jnp.sin(angles)

    positions = jnp.asarray(positions)
    if table_len is not None and table_len < 1:
        raise ValueError(f"rope_tables: table_len must be positive, got {table_len}")
    if (table_len is None or not host_theta or not jnp.issubdtype(positions.dtype, jnp.integer)
            or table_len * np.size(frequencies) > _MAX_GATHER_TABLE):
        return computed(positions)
    cos_t, sin_t = rope_tables(np.arange(int(table_len), dtype=np.int32), frequencies, dtype=dtype)

    def gathered(p):
        return jnp.take(cos_t, p, axis=0), jnp.take(sin_t, p, axis=0)

    inside = jnp.all((positions >= 0) & (positions < table_len))
    return jax.lax.cond(inside, gathered, computed, positions)


def rope_table_pair(q_pos, k_pos, frequencies, *, table_len: int | None = None
                    ) -> tuple[tuple, tuple]:
    """``(q_tables, k_tables)``: the :func:`rope_tables` of query and key positions (one table
    when ``k_pos is q_pos``), in float32 (float64 under x64): what a rotary PE's ``prepare``
    returns. ``table_len``: see :func:`rope_tables`."""
    dtype = jax.dtypes.canonicalize_dtype(jnp.float64)
    q_tables = rope_tables(q_pos, frequencies, dtype=dtype, table_len=table_len)
    return q_tables, (q_tables if k_pos is q_pos else
                      rope_tables(k_pos, frequencies, dtype=dtype, table_len=table_len))


def rotate_pairs_by(x: jax.Array, cos: jax.Array, sin: jax.Array, *, interleaved: bool
                    ) -> jax.Array:
    """Rotate the coordinate pairs of ``x [..., rot_dim]`` by angles given as ``cos, sin``
    ``[..., rot_dim // 2]`` (broadcast against x's leading axes).

    Interleaved pairs are (x_2k, x_2k+1) (RoFormer); half-split pairs are (x_k, x_k+rot/2)
    (GPT-NeoX / LLaMA).
    """
    cos, sin = jnp.asarray(cos).astype(x.dtype), jnp.asarray(sin).astype(x.dtype)
    if interleaved:
        pairs = x.reshape(*x.shape[:-1], -1, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        return jnp.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(x.shape)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return jnp.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def rotate_pairs(x: jax.Array, angles: jax.Array, *, interleaved: bool) -> jax.Array:
    """Rotate the coordinate pairs of ``x [..., rot_dim]`` by ``angles [..., rot_dim // 2]``
    (pairing as in :func:`rotate_pairs_by`)."""
    return rotate_pairs_by(x, jnp.cos(angles), jnp.sin(angles), interleaved=interleaved)


def apply_rope(x: jax.Array, positions: jax.Array, *, base: float = 10000.0,
               rotary_fraction: float = 1.0, interleaved: bool = False,
               frequencies: jax.Array | None = None, position_scale: float = 1.0,
               tables: tuple[jax.Array, jax.Array] | None = None) -> jax.Array:
    """Apply RoPE to ``x [..., seq, heads, head_dim]`` at ``positions [..., seq]``.

    Args:
      x: queries or keys.
      positions: integer or float positions, broadcastable to ``x.shape[:-2]``.
      base: frequency base (10^4 in RoFormer).
      rotary_fraction: fraction of head dims rotated; the rest pass through.
      interleaved: pairing convention: False (default, as :class:`RoPEOptions` and Llama-family
        checkpoints): half-split pairs (k, k + rot/2); True: RoFormer's adjacent pairs (2k, 2k+1).
      frequencies: optional ``[rot_dim // 2]`` override (context-extension variants).
      position_scale: multiplies positions (linear position interpolation uses 1/s); applied
        to the frequencies, so the angles stay exact (see :func:`rope_angles`).
      tables: optional ``(cos, sin)`` ``[..., seq, rot_dim // 2]`` from :func:`rope_tables` at
        these positions and frequencies (a PE's ``prepare``, shared by the layers and by q and
        k); ``positions``, ``base``, ``frequencies`` and ``position_scale`` are then not read.

    Returns:
      Array of x's shape and dtype; norm-preserving per head.
    """
    head_dim = x.shape[-1]
    rot = rotary_dim(head_dim, rotary_fraction)
    if tables is None:
        # angles in float32, or float64 when x is float64 (exact relative tests)
        dtype = jnp.promote_types(x.dtype, jnp.float32)
        theta = rope_frequencies(rot, base, np.float64) if frequencies is None else frequencies
        if not isinstance(theta, np.ndarray):
            theta = jnp.asarray(theta)
        if theta.shape != (rot // 2,):
            raise ValueError(f"frequencies must have shape ({rot // 2},), got {theta.shape}")
        if not (isinstance(position_scale, (int, float)) and position_scale == 1):
            theta = theta * position_scale  # p (s theta): the angles below stay exact
        tables = rope_tables(positions, theta, dtype=dtype)
    cos, sin = tables
    if cos.shape[-1] != rot // 2:
        raise ValueError(f"rotary tables have {cos.shape[-1]} frequencies, the rotary dim "
                         f"{rot} needs {rot // 2}")
    rotated = rotate_pairs_by(x[..., :rot], cos[..., :, None, :], sin[..., :, None, :],
                              interleaved=interleaved)  # tables [..., seq, 1, rot/2]
    if rot == head_dim:
        return rotated
    return jnp.concatenate([rotated, x[..., rot:]], axis=-1)


@dataclasses.dataclass(frozen=True)
class RoPEOptions:
    """Options of RoPE (arXiv 2104.09864).

    ``interleaved=False`` (half-split, the LLaMA/HF convention) is the standard default;
    ``interleaved=True`` is RoFormer's and that of arXiv 2505.13027. ``num_rotary_heads`` rotates only the first
    k heads (partial-head RoPE of arXiv 2505.13027); None rotates all.
    """

    base: float = 10000.0
    rotary_fraction: float = 1.0
    interleaved: bool = False
    num_rotary_heads: int | None = None

    def validate(self, ctx: PEContext) -> None:
        if self.base <= 1.0:
            raise ValueError(f"RoPE base must be > 1, got {self.base}")
        if not 0.0 < self.rotary_fraction <= 1.0:
            raise ValueError(f"RoPE rotary_fraction must be in (0, 1], got {self.rotary_fraction}")
        if ctx.head_dim is not None:
            if ctx.head_dim % 2:
                raise ValueError(f"RoPE needs an even head_dim, got head_dim={ctx.head_dim}")
            rotary_dim(ctx.head_dim, self.rotary_fraction)
        if self.num_rotary_heads is not None:
            if self.num_rotary_heads < 0 or (ctx.num_heads is not None
                                             and self.num_rotary_heads > ctx.num_heads):
                raise ValueError(f"num_rotary_heads={self.num_rotary_heads} is outside "
                                 f"[0, num_heads={ctx.num_heads}]")


@register("rope", options=RoPEOptions, paper="Su et al., RoFormer, arXiv 2104.09864")
class RoPE(PositionalEncoding):
    """Rotates q and k (hook ``rotate``); relative: q.k depends only on j - i."""

    is_relative = True

    def __init__(self, options: RoPEOptions, ctx: PEContext, *, rngs: nnx.Rngs):
        super().__init__(options, ctx)
        ctx.require("rope", "head_dim")

    def frequencies(self) -> jax.Array:
        """The rotary frequencies ``[rot_dim // 2]`` (subclasses rescale them), as exact NumPy
        float64 values so that :func:`rope_angles` is accurate to float64."""
        return rope_frequencies(rotary_dim(self.ctx.head_dim, self.options.rotary_fraction),
                                self.options.base, np.float64)

    def position_frequencies(self, k_pos: jax.Array) -> jax.Array:
        """The frequencies used at key positions ``k_pos`` (those of :meth:`frequencies`;
        length-dependent variants override this)."""
        del k_pos
        return self.frequencies()

    def prepare(self, q_pos, k_pos):
        """``(q_tables, k_tables)``, each the :func:`rope_tables` ``(cos, sin)`` ``[B or 1, T,
        rot/2]`` at those positions (one table when ``k_pos is q_pos``)."""
        theta = self.position_frequencies(k_pos)
        scale = getattr(self, "position_scale", 1.0)
        if not (isinstance(scale, (int, float)) and scale == 1):
            theta = theta * scale  # p (s theta): the angles stay exact
        return rope_table_pair(q_pos, k_pos, theta, table_len=self.ctx.max_len)

    def _apply_tables(self, x: jax.Array, tables: tuple[jax.Array, jax.Array]) -> jax.Array:
        o = self.options
        out = apply_rope(x, None, rotary_fraction=o.rotary_fraction, interleaved=o.interleaved,
                         tables=tables)
        if o.num_rotary_heads is None:
            return out
        heads = jnp.arange(x.shape[-2]) < o.num_rotary_heads
        return jnp.where(heads[:, None], out, x)

    def rotate(self, q, k, q_pos, k_pos):
        return self.rotate_prepared(q, k, q_pos, k_pos, self.prepare(q_pos, k_pos))

    def rotate_prepared(self, q, k, q_pos, k_pos, prepared):
        q_tables, k_tables = prepared
        return self._apply_tables(q, q_tables), self._apply_tables(k, k_tables)
