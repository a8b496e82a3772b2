"""``S = sqrt(P)`` as an operator: the products that matrix-free geometry needs, never ``[n, n]``.

For the chord metric every quantity of classical MDS and of stress is a product with the
square-root distributions ``S = sqrt(P) [n, V]``: ``B = (J S)(J S)^T`` (``J = I - 11^T/n``) and
``D^2_ij = g_i + g_j - 2 <s_i, s_j>`` with ``g_i = ||s_i||^2`` (``= 1`` for normalised rows;
G. Cirrincione, arXiv 2604.05217, Eq. (3)). :class:`SqrtRows` holds ``S`` once and offers

* ``matmul(X)`` / ``rmatmul(Y)``: ``S X`` (``[n, b]``) and ``S^T Y`` (``[V, b]``);
* ``cross_gram(start, r)``: ``S S_blk^T`` for one row block (``[n_rows, r]``);
* ``pair_dots(I, J)``: ``<s_I, s_J>`` for sampled pairs;
* ``g`` (row norms) and ``col_sum`` (``1^T S``), from which the centring and ``trace(B)`` follow.

Two storage kinds:

* ``"dense"``: a ``jax.Array`` (optionally zero-padded and row-sharded over a mesh, see
  :func:`posjax.distributed.sharded_sqrt_rows`); products are jitted GEMMs;
* ``"csr"``: a ``scipy.sparse`` CSR matrix of ``sqrt(P)`` on the host (products cost
  ``O(nnz * b)``); built from dense, BCOO or scipy.sparse ``P``, or streamed from blocks of
  counts with :func:`sqrt_rows_from_counts` so that no dense ``[n, V]`` array ever exists.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from posjax.geometry.gram import HIGHEST
from posjax.geometry.validation import (check_probabilities, check_row_sums, float_eps,
                                        is_sparse)

__all__ = ["SqrtRows", "sqrt_rows", "sqrt_rows_from_counts"]

#: Pairs per chunk of :meth:`SqrtRows.pair_dots`.
PAIR_CHUNK = 1 << 15


@jax.jit
def _mm(S, X):
    return jnp.matmul(S, X, precision=HIGHEST)


@jax.jit
def _rmm(S, Y):
    return jnp.matmul(S.T, Y, precision=HIGHEST)


@functools.partial(jax.jit, static_argnames=("r",))
def _dense_cross_gram(S, start, *, r):
    blk = lax.dynamic_slice_in_dim(S, start, r, 0)
    return jnp.matmul(S, blk.T, precision=HIGHEST)


@jax.jit
def _dense_pair_dots(S, I, J):
    return jnp.sum(S[I] * S[J], axis=-1)


class SqrtRows:
    """Square roots of ``n`` probability rows over a vocabulary of ``V`` (see module docstring).

    Attributes:
      S: ``[n_rows, V]`` dense ``jax.Array`` (``n_rows >= n``; rows past ``n`` are zero padding)
        or an ``[n, V]`` ``scipy.sparse.csr_matrix``.
      n: number of real positions.
      kind: ``"dense"`` or ``"csr"``.
      g: ``[n]`` float64 squared row norms ``||s_i||^2`` (the row sums of ``P``).
      col_sum: ``[V]`` float64 ``sum_i s_i``.
    """

    def __init__(self, S: Any, n: int, *, g: np.ndarray | None = None,
                 col_sum: np.ndarray | None = None):
        self.S = S
        self.n = int(n)
        self.kind = "csr" if is_sparse(S) else "dense"
        if g is None:
            g = (np.asarray(S.multiply(S).sum(axis=1)).ravel() if self.kind == "csr"
                 else np.asarray(jax.jit(lambda s: jnp.sum(s * s, axis=1))(S), np.float64))
        if col_sum is None:
            col_sum = (np.asarray(S.sum(axis=0)).ravel() if self.kind == "csr"
                       else np.asarray(jax.jit(lambda s: jnp.sum(s, axis=0))(S), np.float64))
        self.g = np.asarray(g, np.float64)[:self.n]
        self.col_sum = np.asarray(col_sum, np.float64)

    @property
    def shape(self) -> tuple[int, int]:
        return self.n, int(self.S.shape[1])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.S.dtype)

    @property
    def n_rows(self) -> int:
        """Stored rows (``n`` plus padding)."""
        return int(self.S.shape[0])

    @property
    def nnz(self) -> int:
        """Stored entries (``n_rows * V`` when dense)."""
        return int(self.S.nnz) if self.kind == "csr" else int(np.prod(self.S.shape))

    def trace_b(self) -> float:
        """``trace(B) = ||J S||_F^2 = sum_i g_i - ||1^T S||^2 / n`` (closed form, no product)."""
        return float(self.g.sum() - self.col_sum @ self.col_sum / self.n)

    def matmul(self, X: np.ndarray) -> np.ndarray:
        """``S X`` for ``X [V, b]``: ``[n, b]`` (padding rows dropped)."""
        X = np.asarray(X, self.dtype)
        if self.kind == "csr":
            return np.asarray(self.S @ X)
        return np.asarray(_mm(self.S, X))[:self.n]

    def rmatmul(self, Y: np.ndarray) -> np.ndarray:
        """``S^T Y`` for ``Y [n, b]``: ``[V, b]``."""
        Y = np.asarray(Y, self.dtype)
        if self.kind == "csr":
            return np.asarray(self.S.T @ Y)
        if self.n_rows > self.n:
            Y = np.concatenate([Y, np.zeros((self.n_rows - self.n, Y.shape[1]), Y.dtype)])
        if hasattr(self.S, "sharding"):
            Y = jax.device_put(Y, self.S.sharding)
        return np.asarray(_rmm(self.S, Y))

    def cross_gram(self, start: int, r: int) -> Any:
        """``G [n_rows, r]`` with ``G[j, c] = <s_j, s_{start + c}>`` (``start + r <= n``).

        For the CSR kind only rows ``j >= start`` are computed (the rest are zero): the
        upper-triangle pairs ``j > i`` are all a stress pass needs.
        """
        if self.kind == "csr":
            blk = self.S[start:start + r].toarray()
            G = np.zeros((self.n, r), self.dtype)
            G[start:] = self.S[start:] @ blk.T
            return G
        return _dense_cross_gram(self.S, jnp.asarray(start, jnp.int32), r=int(r))

    def pair_dots(self, I: np.ndarray, J: np.ndarray) -> np.ndarray:
        """``<s_I[t], s_J[t]>`` for ``t < len(I)``: ``[M]`` float64."""
        I, J = np.asarray(I), np.asarray(J)
        out = np.empty(I.shape[0], np.float64)
        for a in range(0, I.shape[0], PAIR_CHUNK):
            i, j = I[a:a + PAIR_CHUNK], J[a:a + PAIR_CHUNK]
            if self.kind == "csr":
                out[a:a + i.size] = np.asarray(self.S[i].multiply(self.S[j]).sum(axis=1)).ravel()
            else:
                out[a:a + i.size] = np.asarray(_dense_pair_dots(self.S, i, j))
        return out


def _csr_from_sqrt(data, indices, indptr, shape):
    import scipy.sparse as sp  # noqa: PLC0415

    S = sp.csr_matrix((data, indices, indptr), shape=shape)
    S.sum_duplicates()
    S.sort_indices()
    return S


def sqrt_rows(P: Any, *, normalize: bool = False, validate: bool = True) -> SqrtRows:
    """Prepare ``sqrt(P)`` for the matrix-free functions.

    Args:
      P: ``[n, V]`` probability rows: dense (numpy/jax; kept dense), a BCOO or scipy.sparse
        (kept as CSR on the host), or an existing :class:`SqrtRows` (returned as is).
      normalize: rescale rows to sum one instead of requiring it.
      validate: check the rows (ValueError on NaN, negatives, empty rows, sums off one).

    Returns:
      :class:`SqrtRows`.
    """
    if isinstance(P, SqrtRows):
        return P
    if is_sparse(P):
        import scipy.sparse as sp  # noqa: PLC0415

        if hasattr(P, "indices") and not hasattr(P, "tocsr"):  # BCOO
            idx = np.asarray(P.indices)
            P = sp.coo_matrix((np.asarray(P.data), (idx[:, 0], idx[:, 1])), shape=P.shape)
        P = sp.csr_matrix(P)
        if P.ndim != 2 or 0 in P.shape:
            raise ValueError(f"P must be a non-empty 2-D matrix, got shape {P.shape}")
        if not np.issubdtype(P.dtype, np.floating):
            P = P.astype(np.result_type(float))
        P.sum_duplicates()
        sums = np.asarray(P.sum(axis=1)).ravel()
        if validate or normalize:
            check_row_sums(sums, has_nan=bool(np.isnan(P.data).any()),
                           has_neg=bool((P.data < 0).any()), eps=float_eps(P.dtype),
                           vocab=P.shape[1], require_one=not normalize)
        data = P.data / np.repeat(sums, np.diff(P.indptr)) if normalize else P.data
        return SqrtRows(_csr_from_sqrt(np.sqrt(data).astype(P.dtype), P.indices, P.indptr,
                                       P.shape), P.shape[0])
    P = jnp.asarray(P)
    if P.ndim != 2:
        raise ValueError(f"P must be a 2-D array [num_positions, vocab], got shape {P.shape}")
    if not jnp.issubdtype(P.dtype, jnp.floating):
        P = P.astype(jnp.result_type(float))
    if validate or normalize:
        P = check_probabilities(P, normalize=normalize)
    return SqrtRows(jnp.sqrt(P), P.shape[0])


def sqrt_rows_from_counts(blocks: Iterable[Any], vocab_size: int, *,
                          dtype: Any = np.float32) -> SqrtRows:
    """Stream ``sqrt(P)`` from blocks of token counts, one block in memory at a time.

    Each block ``[r, V]`` of counts (numpy or scipy.sparse; rows are positions, in order) is
    normalised row by row, square-rooted and appended to a CSR matrix, so the memory is
    ``O(nnz)``: a dense ``[n, V]`` array is never formed (at ``n = 65,536``, ``V = 32,000`` it
    would take 8 GiB in float32).

    Args:
      blocks: iterable of ``[r_b, vocab_size]`` non-negative count blocks.
      vocab_size: ``V``.
      dtype: floating dtype of the stored square roots.

    Returns:
      :class:`SqrtRows` of kind ``"csr"``.

    Raises:
      ValueError: a block of the wrong width, negative or non-finite counts, an empty position.
    """
    import scipy.sparse as sp  # noqa: PLC0415

    datas, indices, lengths = [], [], []
    row0 = 0
    for b, C in enumerate(blocks):
        C = sp.csr_matrix(C)
        if C.ndim != 2 or C.shape[1] != vocab_size:
            raise ValueError(f"count block {b} has shape {C.shape}; expected [rows, {vocab_size}]")
        C.sum_duplicates()
        C.eliminate_zeros()
        sums = np.asarray(C.sum(axis=1), np.float64).ravel()
        try:
            check_row_sums(sums, has_nan=bool(np.isnan(C.data).any()) if C.data.dtype.kind == "f"
                           else False, has_neg=bool((C.data < 0).any()), eps=1.0,
                           vocab=vocab_size, name="counts", require_one=False)
        except ValueError as e:
            raise ValueError(f"{e} (block {b}, rows from {row0})") from None
        lens = np.diff(C.indptr)
        datas.append(np.sqrt(C.data / np.repeat(sums, lens)).astype(dtype))
        indices.append(C.indices.astype(np.int32))
        lengths.append(lens)
        row0 += C.shape[0]
    if row0 == 0:
        raise ValueError("no count blocks were given")
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(lengths))])
    S = _csr_from_sqrt(np.concatenate(datas), np.concatenate(indices), indptr,
                       (row0, vocab_size))
    return SqrtRows(S, row0)
