"""TUPE (Ke, He, Liu, arXiv 2006.15595): the untied positional logit term (Sec. 3) against
NumPy, with the [CLS] reset."""
import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib

from _np_refs import np_layernorm
from _pe_checks import make

POS = jnp.arange(6)


def numpy_tupe(pe, i, j, theta=None):
    """arXiv 2006.15595, Sec. 3 (untied positional correlation): (1/sqrt(2d)) (p_i U^Q)(p_j U^K)^T per head (p through the
    reference LayerNorm); the [CLS] reset: the [CLS] query row -> theta_1, the [CLS] key column -> theta_2."""
    p = np.asarray(pe.embedding[...], np.float64)
    ln = lambda rows: np_layernorm(rows, np.asarray(pe.pos_norm.scale[...]), np.asarray(pe.pos_norm.bias[...]))
    uq, uk = np.asarray(pe.u_q[...], np.float64), np.asarray(pe.u_k[...], np.float64)
    h, e = uq.shape[1], uq.shape[2]
    out = np.zeros((h, len(i), len(j)))
    for hh in range(h):
        qh, kh = ln(p[i]) @ uq[:, hh], ln(p[j]) @ uk[:, hh]
        out[hh] = qh @ kh.T / np.sqrt(2 * e)
        if theta is not None:
            out[hh][:, j == 0] = theta[1][hh]
            out[hh][i == 0, :] = theta[0][hh]
    return out


def test_position_term_matches_eq6():
    pe = make("tupe", d_model=8, num_heads=2, max_len=12, init_std=1.0)
    i, j = np.array([0, 3, 5, 11]), np.array([1, 2, 3, 4, 10])
    got = np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j)))
    np.testing.assert_allclose(got, numpy_tupe(pe, i, j), rtol=1e-4, atol=1e-5)


def test_cls_reset_matches_eq7():
    pe = make("tupe", d_model=8, num_heads=2, max_len=12, init_std=1.0, untie_cls=True)
    theta = (np.array([0.7, -0.3]), np.array([-1.1, 0.4]))
    pe.theta1.value, pe.theta2.value = jnp.asarray(theta[0], jnp.float32), jnp.asarray(theta[1], jnp.float32)
    i = j = np.arange(6)
    got = np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j)))
    np.testing.assert_allclose(got, numpy_tupe(pe, i, j, theta), rtol=1e-4, atol=1e-5)
    assert np.isclose(got[0, 0, 0], 0.7) and np.isclose(got[1, 3, 0], 0.4)


def test_tupe_position_term_and_cls_reset():
    tupe = pe_lib.make("tupe", d_model=8, num_heads=2, max_len=10, untie_cls=True, init_std=1.0,
                       rngs=nnx.Rngs(0))
    tupe.theta1[...] = jnp.array([3.0, 4.0])
    tupe.theta2[...] = jnp.array([-1.0, -2.0])
    b = np.asarray(tupe.bias(POS, POS))
    p = np.asarray(tupe.projected_rows(POS))
    np.testing.assert_allclose(p.std(-1), 1.0, rtol=1e-3)  # LayerNorm of the table rows
    uq, uk = np.asarray(tupe.u_q[...]), np.asarray(tupe.u_k[...])
    expect = np.einsum("qhe,khe->hqk", np.einsum("qd,dhe->qhe", p, uq),
                       np.einsum("kd,dhe->khe", p, uk)) / math.sqrt(2 * 4)
    np.testing.assert_allclose(b[:, 1:, 1:], expect[:, 1:, 1:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b[:, 0, :], [[3.0] * 6, [4.0] * 6])        # [CLS] query row
    np.testing.assert_allclose(b[:, 1:, 0], [[-1.0] * 5, [-2.0] * 5])     # [CLS] key column
    assert tupe.attention_scale(4) == pytest.approx(1 / math.sqrt(8))
    with pytest.raises(ValueError, match="max_len"):
        tupe.bias(jnp.arange(12), jnp.arange(12))


def test_tupe_r_adds_a_relative_bucket_bias():
    a = pe_lib.make("tupe", d_model=8, num_heads=2, max_len=10, causal=True, rngs=nnx.Rngs(0))
    r = pe_lib.make("tupe", d_model=8, num_heads=2, max_len=10, causal=True, variant="R",
                    rngs=nnx.Rngs(0))
    extra = np.asarray(r.bias(POS, POS) - a.bias(POS, POS))
    # Toeplitz: constant along every diagonal
    for off in range(-5, 6):
        diag = np.diagonal(extra, offset=off, axis1=1, axis2=2)
        np.testing.assert_allclose(diag, diag[:, :1].repeat(diag.shape[1], 1), atol=1e-6)
