"""Infinite-width attention kernels with neural-tangents' positional embeddings.

:func:`infinite_attention_kernel` gives the analytic NNGP / NTK of
``Dense -> GlobalSelfAttention -> Relu -> pool -> Dense`` (neural-tangents ``stax``, NTK
parameterisation) with the attention layer's positional-embedding options ``NONE`` / ``SUM`` /
``CONCAT`` and a decay of the PE covariance across positions, to compare PE choices in the
infinite-width limit (Hron et al., "Infinite attention: NNGP and NTK for deep attention
networks", arXiv 2006.10540). :func:`attention_network` gives the same layers at finite width
(for Monte Carlo comparisons). RoPE, ALiBi, T5 biases and learned-PE inits have no analytic
counterpart in neural-tangents.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from ntk.recording import neural_tangents

__all__ = ["POS_EMB_TYPES", "infinite_attention_kernel", "attention_network"]

POS_EMB_TYPES = ("NONE", "SUM", "CONCAT")


def _decay(decay_fn):
    if decay_fn is None or callable(decay_fn):
        return decay_fn
    raise ValueError(f"decay_fn must be None or a callable d -> covariance, got {decay_fn!r}")


def infinite_attention_kernel(x1: jax.Array, x2: jax.Array | None = None, *,
                              pos_emb_type: str = "SUM", decay_fn: Callable | None = None,
                              pos_emb_p_norm: float = 2, W_pos_emb_std: float = 1.0,
                              val_pos_emb: bool = False, n_chan_pos_emb: int | None = None,
                              attention_mechanism: str = "SOFTMAX", W_std: float = 1.0,
                              b_std: float = 0.0, readout: str = "mean",
                              get: tuple[str, ...] = ("nngp", "ntk")) -> dict[str, jax.Array]:
    """Infinite-width NNGP/NTK of ``Dense -> GlobalSelfAttention -> Relu -> pool -> Dense``.

    The network is built from neural-tangents ``stax`` (NTK parameterisation). The attention
    layer carries neural-tangents' positional embedding: ``"NONE"`` (no PE), ``"SUM"`` (an
    i.i.d. Gaussian PE added to the keys/queries input) or ``"CONCAT"``; with ``decay_fn`` the PE
    covariance across positions is ``R_ij = decay_fn(||i - j||_p^p)`` (identity when None).
    Hron et al., "Infinite attention: NNGP and NTK for deep attention networks",
    arXiv 2006.10540.

    Args:
      x1: ``[N1, T, C]`` inputs (spatial axis T, channels last); x2: ``[N2, T, C]`` or None.
      pos_emb_type: one of :data:`POS_EMB_TYPES`.
      decay_fn: None or a callable ``d -> covariance`` (e.g. ``lambda d: jnp.exp(-d / 4)``).
      readout: ``"mean"`` (global average over positions) or ``"flatten"``.
      get: kernels to return, from ``("nngp", "ntk")``.

    Returns:
      ``{"nngp": [N1, N2], "ntk": [N1, N2]}`` (the requested subset).
    """
    pos_emb_type = str(pos_emb_type).upper()
    if pos_emb_type not in POS_EMB_TYPES:
        raise ValueError(f"pos_emb_type must be one of {POS_EMB_TYPES}, got {pos_emb_type!r}")
    if readout not in ("mean", "flatten"):
        raise ValueError(f"readout must be 'mean' or 'flatten', got {readout!r}")
    get = tuple(get)
    if not get or any(g not in ("nngp", "ntk") for g in get):
        raise ValueError(f"get must be a non-empty subset of ('nngp', 'ntk'), got {get!r}")
    if jnp.ndim(x1) != 3:
        raise ValueError(f"x1 must be [N, T, C], got shape {jnp.shape(x1)}")
    nt = neural_tangents()
    stax = nt.stax
    _, _, kernel_fn = stax.serial(*attention_network(
        pos_emb_type=pos_emb_type, decay_fn=_decay(decay_fn), pos_emb_p_norm=pos_emb_p_norm,
        W_pos_emb_std=W_pos_emb_std, val_pos_emb=val_pos_emb, n_chan_pos_emb=n_chan_pos_emb,
        attention_mechanism=attention_mechanism, W_std=W_std, b_std=b_std, readout=readout,
        width=1))
    out = jax.jit(kernel_fn, static_argnames="get")(x1, x2, get=get[0] if len(get) == 1
                                                     else get)
    if len(get) == 1:
        out = (out,)
    return dict(zip(get, out))


def attention_network(*, pos_emb_type: str = "SUM", decay_fn: Callable | None = None,
                      pos_emb_p_norm: float = 2, W_pos_emb_std: float = 1.0,
                      val_pos_emb: bool = False, n_chan_pos_emb: int | None = None,
                      attention_mechanism: str = "SOFTMAX", W_std: float = 1.0,
                      b_std: float = 0.0, readout: str = "mean", width: int = 512,
                      n_heads: int = 1) -> list:
    """The ``stax`` layers of :func:`infinite_attention_kernel` at a finite ``width``.

    ``stax.serial(*attention_network(width=w))`` gives ``(init_fn, apply_fn, kernel_fn)``; the
    finite network's Monte Carlo kernel converges to the analytic one as ``w`` grows.
    """
    stax = neural_tangents().stax
    pool = stax.GlobalAvgPool() if readout == "mean" else stax.Flatten()
    return [
        stax.Dense(width, W_std=W_std, b_std=b_std),
        stax.GlobalSelfAttention(
            n_chan_out=width, n_chan_key=width, n_chan_val=width, n_heads=n_heads,
            linear_scaling=True, W_key_std=W_std, W_value_std=W_std, W_query_std=W_std,
            W_out_std=W_std, b_std=b_std, attention_mechanism=attention_mechanism,
            pos_emb_type=pos_emb_type, pos_emb_p_norm=pos_emb_p_norm,
            pos_emb_decay_fn=decay_fn, n_chan_pos_emb=n_chan_pos_emb,
            W_pos_emb_std=W_pos_emb_std, val_pos_emb=val_pos_emb),
        stax.Relu(),
        pool,
        stax.Dense(1, W_std=W_std, b_std=b_std),
    ]
