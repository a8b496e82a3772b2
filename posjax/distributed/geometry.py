"""Sharded geometry: Bhattacharyya and Hellinger matrices split by row blocks.

For corpora and vocabularies whose ``[n, V]`` count matrix does not fit one device, every
device owns a contiguous block of positions (rows): ``n_pad / D`` rows of the counts, of ``P``
and of the ``[n, n]`` distance matrix, with ``n_pad`` the position count rounded up to a multiple
of the ``D`` devices of the row axis.

* :func:`posjax.distributed.sharded_positional_distributions` (``counting.py``) estimates ``P``
  with its rows already split this way;
* :func:`sharded_bhattacharyya` computes ``G = sqrt(P_a) sqrt(P_b)^T`` with a ring: device ``k``
  keeps its row block of ``sqrt(P_a)`` and the row blocks of ``sqrt(P_b)`` travel around the
  devices (``lax.ppermute``), one ``[n/D, n/D]`` tile per step. At most three ``[n/D, V]`` blocks
  live on a device at once; no device holds all of ``P``.
* :func:`sharded_sqrt_rows` places ``sqrt(P)`` row-split for the matrix-free functions:
  :func:`sharded_mds_from_distributions` (top-``k`` MDS; ``S X`` stays row-split, ``S^T Y`` is
  reduced over the devices) and :func:`sharded_stress_from_distributions` (exact tiles or
  sampled pairs); no ``[n, n]`` array on any device.
* :func:`sharded_hellinger_matrix` finishes as :func:`posjax.geometry.hellinger_matrix` does:
  ``D^2 = g_i + g_j - 2 G`` symmetrised, an exactly zero diagonal, pairs with ``D^2 < exact_tol``
  recomputed in the difference form ``sum_w (S_iw - S_jw)^2`` (docs/design.md), then the
  requested metric (chord, normalised, fr_arc, fisher_rao) or the split-half debiased estimate.

Reference: G. Cirrincione, "On the Geometry of Positional Encodings in Transformers",
arXiv 2604.05217 (positional distributions, Eq. (3), Algorithm 1).
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from posjax.geometry.gram import _NT, HIGHEST, pair_sq_distances
from posjax.geometry.hellinger import (canonical_metric, chord_to_metric, debiased_sq,
                                       scatter_pairs, sq_chord_from_gram)
from posjax.geometry.matrix_free import mds_from_distributions
from posjax.geometry.sqrt_rows import SqrtRows
from posjax.geometry.streaming_stress import stress_from_distributions
from posjax.geometry.validation import check_row_sums, is_sparse

__all__ = ["row_mesh", "sharded_bhattacharyya", "sharded_hellinger_matrix", "sharded_sqrt_rows",
           "sharded_mds_from_distributions", "sharded_stress_from_distributions"]



# --- mesh plumbing ----------------------------------------------------------------------------
def row_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-axis mesh ``("rows",)`` over ``devices`` (default: every device)."""
    from jax.sharding import AxisType
    devs = np.asarray(list(jax.devices() if devices is None else devices))
    return Mesh(devs, ("rows",), axis_types=(AxisType.Auto,))


def _axes(mesh: Mesh, axis: str | Sequence[str] | None) -> tuple[str, ...]:
    if axis is None:
        return tuple(mesh.axis_names)
    names = (axis,) if isinstance(axis, str) else tuple(axis)
    for a in names:
        if a not in mesh.axis_names:
            raise ValueError(f"axis {a!r} is not an axis of the mesh {tuple(mesh.axis_names)}")
    return names


def _num_blocks(mesh: Mesh, axes: tuple[str, ...]) -> int:
    return int(np.prod([mesh.shape[a] for a in axes]))


def _row_spec(axes: tuple[str, ...], ndim: int, lead: int = 0) -> PartitionSpec:
    """``PartitionSpec`` splitting dimension ``lead`` over ``axes``."""
    parts: list[Any] = [None] * ndim
    parts[lead] = axes if len(axes) > 1 else axes[0]
    return PartitionSpec(*parts)


def _resolve(mesh: Mesh | None, axis) -> tuple[Mesh, tuple[str, ...], int]:
    mesh = row_mesh() if mesh is None else mesh
    axes = _axes(mesh, axis)
    return mesh, axes, _num_blocks(mesh, axes)


# --- Gram matrix by a ring of row blocks ------------------------------------------------------
@functools.lru_cache(maxsize=32)
def _ring_fn(mesh: Mesh, axes: tuple[str, ...]):
    """Jitted ``(A [n_pad, V], B [n_pad, V]) -> sqrt(A) sqrt(B)^T [n_pad, n_pad]``, all
    row-sharded; the blocks of ``sqrt(B)`` circulate between the devices."""
    ax = axes if len(axes) > 1 else axes[0]
    D = _num_blocks(mesh, axes)
    perm = [(k, (k - 1) % D) for k in range(D)]  # device k receives block k + s + 1 next

    def local(a, b):
        r = a.shape[0]
        me = lax.axis_index(ax)
        sa, sb = jnp.sqrt(a), jnp.sqrt(b)

        def tile(sb, s, out):
            t = lax.dot_general(sa, sb, _NT, precision=HIGHEST)
            return lax.dynamic_update_slice(out, t.astype(out.dtype), (0, ((me + s) % D) * r))

        def body(s, carry):
            sb, out = carry
            return lax.ppermute(sb, ax, perm), tile(sb, s, out)

        out = lax.pcast(jnp.zeros((r, D * r), jnp.result_type(sa, sb)), ax, to="varying")
        sb, out = lax.fori_loop(0, D - 1, body, (sb, out))
        return tile(sb, D - 1, out)

    spec = _row_spec(axes, 2)
    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(spec, spec), out_specs=spec))


def _place_rows(P: Any, n_pad: int, mesh: Mesh, axes: tuple[str, ...]) -> jax.Array:
    """``P [n, V]`` zero-padded to ``n_pad`` rows and split by rows over ``axes``."""
    sharding = NamedSharding(mesh, _row_spec(axes, 2))
    if isinstance(P, jax.Array):
        if not jnp.issubdtype(P.dtype, jnp.floating):
            P = P.astype(jnp.result_type(float))
        pad = n_pad - P.shape[0]
        return jax.jit(lambda x: jnp.pad(x, ((0, pad), (0, 0))), out_shardings=sharding)(P)
    P = np.asarray(P)
    if not np.issubdtype(P.dtype, np.floating):
        P = P.astype(jnp.result_type(float))
    if n_pad > P.shape[0]:
        P = np.concatenate([P, np.zeros((n_pad - P.shape[0], P.shape[1]), P.dtype)])
    return jax.device_put(P, sharding)


@jax.jit
def _row_stats(P):
    return (jnp.any(jnp.isnan(P)), jnp.any(P < 0), P.sum(axis=1))


def _check_rows(P: jax.Array, n: int, name: str, normalize: bool) -> jax.Array:
    """Validate (or normalise) the first ``n`` rows of a padded, row-sharded ``P`` with the
    checks of :func:`posjax.geometry.validation.check_probabilities`."""
    has_nan, has_neg, sums = _row_stats(P)
    sums = np.asarray(sums)[:n]
    check_row_sums(sums, has_nan=bool(has_nan), has_neg=bool(has_neg),
                   eps=float(jnp.finfo(P.dtype).eps), vocab=P.shape[1], name=name,
                   require_one=not normalize)
    if normalize:
        scale = np.ones(P.shape[0], np.float64)
        scale[:n] = 1.0 / sums
        return jax.jit(lambda x, s: x * s[:, None], out_shardings=P.sharding)(
            P, jnp.asarray(scale, P.dtype))
    return P


def sharded_bhattacharyya(P_a: Any, P_b: Any | None = None, *, mesh: Mesh | None = None,
                          axis: str | Sequence[str] | None = None) -> jax.Array:
    """Bhattacharyya coefficients ``BC_ij = <sqrt(P_a[i]), sqrt(P_b[j])>`` by row blocks.

    Args:
      P_a: ``[n, V]`` (numpy, jax, or an already row-sharded jax array); no validation.
      P_b: ``[m, V]`` or None (``P_a``).
      mesh, axis: the devices and the mesh axes the rows are split over.

    Returns:
      ``[n, m]`` computed with HIGHEST precision, split by rows over the mesh.
    """
    mesh, axes, D = _resolve(mesh, axis)
    n = P_a.shape[0]
    m = n if P_b is None else P_b.shape[0]
    n_pad = -(-max(n, m) // D) * D
    A = _place_rows(P_a, n_pad, mesh, axes)
    B = A if P_b is None else _place_rows(P_b, n_pad, mesh, axes)
    G = _ring_fn(mesh, axes)(A, B)
    return G if (n, m) == (n_pad, n_pad) else G[:n, :m]


# --- Hellinger --------------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames=("n", "sharding"))
def _sq_from_gram(G, exact_tol, *, n, sharding):
    """:func:`posjax.geometry.hellinger.sq_chord_from_gram` on the padded ``[n_pad, n_pad]``
    grid (only the first ``n`` rows are real), results kept row-sharded."""
    D2, near, count = sq_chord_from_gram(G, exact_tol, n)
    return (lax.with_sharding_constraint(D2, sharding),
            lax.with_sharding_constraint(near, sharding), count)


@jax.jit
def _rows_with_pairs(near):
    return jnp.sum(near, axis=1, dtype=jnp.int32)


@jax.jit
def _take_rows(near, rows):
    return near[rows]


def _near_pairs(near, count: int, size: int) -> tuple[jax.Array, jax.Array]:
    """The ``count`` flagged pairs ``(I, J)``, padded to ``size`` with the out-of-range index
    ``n_pad``: per-row counts first, then only the rows that hold a pair come to the host."""
    per_row = np.asarray(_rows_with_pairs(near))
    rows = np.flatnonzero(per_row)
    I, J = np.full(size, near.shape[0], np.int32), np.full(size, near.shape[0], np.int32)
    at = 0
    for start in range(0, rows.size, 1024):  # bounded host memory: 1024 x n_pad booleans
        chunk = rows[start:start + 1024]
        sub = np.asarray(_take_rows(near, jnp.asarray(chunk, jnp.int32)))
        r, c = np.nonzero(sub)
        I[at:at + r.size], J[at:at + r.size] = chunk[r], c
        at += r.size
    assert at == count, (at, count)
    return jnp.asarray(I), jnp.asarray(J)


def _exact_fix(D2, near, count: int, P, V: int):
    """Recompute the flagged pairs in the difference form, in chunks of ``~2^23 / V`` pairs
    (only those rows are gathered from the devices that own them)."""
    size = 1 << max(0, (count - 1).bit_length())
    I, J = _near_pairs(near, count, size)
    chunk = max(1, (1 << 23) // max(V, 1))
    chunk = 1 << max(0, (chunk.bit_length() - 1))  # a power of two: divides size or exceeds it
    return scatter_pairs(D2, I, J, pair_sq_distances(P, I, J, chunk=chunk).astype(D2.dtype))


@functools.partial(jax.jit, static_argnames=("sharding",))
def _debiased_sq(C, *, sharding):
    return lax.with_sharding_constraint(debiased_sq(C), sharding)


def sharded_hellinger_matrix(P: Any, *, mesh: Mesh | None = None,
                             axis: str | Sequence[str] | None = None, metric: str = "chord",
                             fr_scale: float | None = None, exact_tol: float = 1e-3,
                             normalize: bool = False, debias: str = "none",
                             halves: tuple[Any, Any] | None = None, squared: bool = False,
                             validate: bool = True) -> jax.Array:
    """Pairwise Hellinger distances between the rows of ``P``, computed by row blocks.

    Same definitions and numbers as :func:`posjax.geometry.hellinger_matrix` (dense input):

    * ``"chord"`` ``||sqrt(P_i) - sqrt(P_j)||_2 = sqrt(2 - 2 BC)`` (Eq. (3) of arXiv
      2604.05217), ``"normalized"`` (``chord / sqrt(2)``), ``"fr_arc"`` (``fr_scale *
      arccos BC``, default scale 1) and ``"fisher_rao"`` (``2 arccos BC``);
    * ``D^2 = g_i + g_j - 2 G`` from the ring Gram matrix of :func:`sharded_bhattacharyya`,
      symmetrised, with an exactly zero diagonal; pairs with ``D^2 < exact_tol`` are recomputed
      in the difference form (docs/design.md; ``exact_tol=0`` disables it);
    * ``debias="split_half"``: ``C_ij = <sqrt(P^A_i), sqrt(P^B_j)>`` symmetrised,
      ``BC~ = clip(C_ij / sqrt(C_ii C_jj), 0, 1)``, ``D~^2 = 2 - 2 BC~``.

    Args:
      P: ``[n, V]`` dense probability rows (numpy, jax, or a row-sharded jax array, e.g. from
        :func:`sharded_positional_distributions`); ``[2, n, V]`` halves with
        ``debias="split_half"`` (or pass ``halves``).
      mesh, axis: the devices and the mesh axes the rows are split over (default: a
        :func:`row_mesh` of every device).
      metric, fr_scale, exact_tol, normalize, debias, halves, squared, validate: as in
        :func:`posjax.geometry.hellinger_matrix`.

    Returns:
      ``D [n, n]`` symmetric with an exactly zero diagonal, split by rows over the mesh.

    Raises:
      ValueError: invalid probabilities, unknown metric or debias mode, mismatched halves, or
        (split-half) a position whose halves share no token.
    """
    metric = canonical_metric(metric)
    if debias not in ("none", "split_half"):
        raise ValueError(f"debias must be 'none' or 'split_half', got {debias!r}")
    mesh, axes, D = _resolve(mesh, axis)
    if debias == "split_half":
        if halves is None:
            if np.ndim(P) != 3 or np.shape(P)[0] != 2:
                raise ValueError("debias='split_half' needs halves=(P_a, P_b) or P of shape "
                                 f"[2, n, V]; got P of shape {np.shape(P)}")
            halves = (P[0], P[1])
        P_a, P_b = halves
        if np.shape(P_a) != np.shape(P_b) or np.ndim(P_a) != 2:
            raise ValueError(f"split-half inputs must have the same 2-D shape, got "
                             f"{np.shape(P_a)} and {np.shape(P_b)}")
        n = P_a.shape[0]
        n_pad = -(-n // D) * D
        A, B = _place_rows(P_a, n_pad, mesh, axes), _place_rows(P_b, n_pad, mesh, axes)
        if validate or normalize:
            A, B = _check_rows(A, n, "P_a", normalize), _check_rows(B, n, "P_b", normalize)
        C = _ring_fn(mesh, axes)(A, B)
        diag = np.asarray(jax.jit(jnp.diagonal)(C))[:n]
        bad = np.flatnonzero(diag <= 0)
        if bad.size:
            raise ValueError(
                f"split-half debiasing is undefined at positions {bad[:10].tolist()}: their two "
                "halves share no token (C_ii = 0); use more samples, top_k, or debias='none'")
        D2 = _debiased_sq(C, sharding=C.sharding)
    else:
        if np.ndim(P) != 2:
            raise ValueError(f"P must be a 2-D array [num_positions, vocab], got shape "
                             f"{np.shape(P)}")
        n, V = P.shape
        n_pad = -(-n // D) * D
        A = _place_rows(P, n_pad, mesh, axes)
        if validate or normalize:
            A = _check_rows(A, n, "P", normalize)
        G = _ring_fn(mesh, axes)(A, A)
        D2, near, count = _sq_from_gram(G, jnp.asarray(exact_tol, G.dtype), n=n,
                                        sharding=G.sharding)
        del G
        count = int(count)
        if exact_tol > 0 and count:
            D2 = _exact_fix(D2, near, count, A, V)
    if n != n_pad:
        D2 = D2[:n, :n]
    return D2 if squared and metric == "chord" else chord_to_metric(D2, metric, fr_scale,
                                                                    squared=squared)


# --- matrix-free geometry on row-split sqrt(P) ------------------------------------------------
@jax.jit
def _sqrt(x):
    return jnp.sqrt(x)


def sharded_sqrt_rows(P: Any, *, mesh: Mesh | None = None,
                      axis: str | Sequence[str] | None = None, normalize: bool = False,
                      validate: bool = True) -> SqrtRows:
    """``sqrt(P)`` zero-padded to a multiple of the devices and split by rows over the mesh.

    Args:
      P: ``[n, V]`` probability rows (numpy, jax, scipy.sparse or BCOO; sparse input is
        densified on the host first).
      mesh, axis: the devices and the mesh axes the rows are split over.
      normalize, validate: as in :func:`posjax.geometry.hellinger_matrix`.

    Returns:
      A dense :class:`~posjax.geometry.SqrtRows` for :func:`posjax.geometry.mds_from_distributions`
      and :func:`posjax.geometry.stress_from_distributions`.
    """
    mesh, axes, D = _resolve(mesh, axis)
    if is_sparse(P):
        P = P.todense() if hasattr(P, "todense") else P.toarray()
    if np.ndim(P) != 2:
        raise ValueError(f"P must be a 2-D array [num_positions, vocab], got shape "
                         f"{np.shape(P)}")
    n = P.shape[0]
    A = _place_rows(P, -(-n // D) * D, mesh, axes)
    if validate or normalize:
        A = _check_rows(A, n, "P", normalize)
    return SqrtRows(_sqrt(A), n)


def sharded_mds_from_distributions(P: Any, k: int, *, mesh: Mesh | None = None,
                                   axis: str | Sequence[str] | None = None,
                                   normalize: bool = False, validate: bool = True, **kwargs):
    """:func:`posjax.geometry.mds_from_distributions` with the rows of ``sqrt(P)`` split over
    the devices of ``mesh`` (the same result as on one device)."""
    R = sharded_sqrt_rows(P, mesh=mesh, axis=axis, normalize=normalize, validate=validate)
    return mds_from_distributions(R, k, **kwargs)


def sharded_stress_from_distributions(P: Any, coords: Any, *, mesh: Mesh | None = None,
                                      axis: str | Sequence[str] | None = None,
                                      normalize: bool = False, validate: bool = True,
                                      **kwargs):
    """:func:`posjax.geometry.stress_from_distributions` with the rows of ``sqrt(P)`` split
    over the devices of ``mesh`` (the same result as on one device)."""
    R = sharded_sqrt_rows(P, mesh=mesh, axis=axis, normalize=normalize, validate=validate)
    return stress_from_distributions(R, coords, **kwargs)
