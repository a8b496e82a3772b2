"""xPos (Sun et al., arXiv 2212.10554): NumPy transcription of its scaled rotation."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.encodings as pe_lib
from posjax.encodings import xpos_zeta

from _np_refs import np_rotate, random_qk
from _pe_checks import make


def numpy_xpos(x, pos, *, sign, gamma=0.4, scale_base=512.0, offset=0.0, base=10000.0):
    """arXiv 2212.10554, Sec. 3 (the xPos rotation): RoPE rotation of pair k by n theta_k,
    theta_k = base^(-2k/d), times zeta_k^(sign (n - offset) / B), zeta_k = (2k/d + gamma)/(1 + gamma)
    (queries sign +1, keys -1); half-split pairs as posjax's default RoPE."""
    d = x.shape[-1]
    k = np.arange(d // 2)
    theta = base ** (-2.0 * k / d)
    zeta = (2.0 * k / d + gamma) / (1.0 + gamma)
    ang = pos[..., :, None, None] * theta                      # [B, T, 1, d/2]
    scale = zeta ** (sign * (pos[..., :, None, None] - offset) / scale_base)
    scale = np.concatenate([scale, scale], axis=-1)            # both coordinates of a pair
    return np_rotate(x, ang, interleaved=False) * scale


def test_rotate_matches_the_paper_formula():
    pe = make("xpos", d_model=16, num_heads=2, max_len=64, scale_base=8.0)  # small B: visible decay
    q, k = random_qk(0, 1, 9, 2, 8)
    pos = np.array([[0, 1, 2, 5, 9, 13, 20, 40, 63]], np.float64)
    qr, kr = pe.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32),
                       jnp.asarray(pos, jnp.int32), jnp.asarray(pos, jnp.int32))
    offset = 32.0  # max_len / 2, the default centring
    np.testing.assert_allclose(np.asarray(qr), numpy_xpos(q, pos, sign=1, scale_base=8.0, offset=offset),
                               rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(kr), numpy_xpos(k, pos, sign=-1, scale_base=8.0, offset=offset),
                               rtol=2e-5, atol=2e-5)


def test_logits_decay_as_zeta_power_of_the_distance():
    """<q'_n, k'_m> of one pair = zeta_k^((n - m)/B) * RoPE logit (arXiv 2212.10554, Sec. 3)."""
    pe = make("xpos", d_model=4, num_heads=2, max_len=16, scale_base=4.0)  # head_dim 2: one pair
    q = jnp.ones((1, 1, 2, 2))
    n, m = jnp.array([[7]]), jnp.array([[3]])
    qr, kr = pe.rotate(q, q, n, n)
    _, k3 = pe.rotate(q, q, m, m)
    logit = float(jnp.sum(qr[0, 0, 0] * k3[0, 0, 0]))
    zeta = 0.4 / 1.4
    rope_logit = 2.0 * np.cos(4.0)  # <R_7 (1,1), R_3 (1,1)> with theta_0 = 1
    np.testing.assert_allclose(logit, zeta ** (4 / 4.0) * rope_logit, rtol=1e-5)


def test_xpos_zeta_golden():
    # arXiv 2212.10554: d_rot = 8 -> (0.285714, 0.464286, 0.642857, 0.821429)
    np.testing.assert_allclose(np.asarray(xpos_zeta(8)), [0.285714, 0.464286, 0.642857, 0.821429],
                               atol=1e-6)


def test_xpos_decays_logits_with_distance_and_is_rope_at_zero_distance():
    xpos = pe_lib.make("xpos", head_dim=8, num_heads=1, max_len=64, causal=True)
    rope = pe_lib.make("rope", head_dim=8, num_heads=1)
    q = jnp.ones((1, 1, 1, 8))
    pos = jnp.arange(40)
    qb = jnp.broadcast_to(q, (1, 40, 1, 8))
    qx, kx = xpos.rotate(qb, qb, pos[None], pos[None])
    qr, kr = rope.rotate(qb, qb, pos[None], pos[None])
    # n = m: the decay cancels, the logit is RoPE's
    np.testing.assert_allclose(np.einsum("bthd,bthd->t", qx, kx), np.einsum("bthd,bthd->t", qr, kr),
                               rtol=1e-5)
    # per-pair factor zeta_k^((n - m)/B): check pair 0 alone (interleaving-free: half-split pairs)
    e0 = jnp.zeros((1, 40, 1, 8)).at[..., 0].set(1.0)
    qx0, kx0 = xpos.rotate(e0, e0, pos[None], pos[None])
    qr0, kr0 = rope.rotate(e0, e0, pos[None], pos[None])
    ratio = np.einsum("bhd,bhd->", qx0[:, 30], kx0[:, 10]) / np.einsum("bhd,bhd->", qr0[:, 30], kr0[:, 10])
    np.testing.assert_allclose(ratio, float(xpos_zeta(8)[0]) ** (20 / 512), rtol=1e-5)


def test_xpos_offset_does_not_change_logits_and_future_keys_grow():
    a = pe_lib.make("xpos", head_dim=8, num_heads=1, max_len=64)
    b = pe_lib.make("xpos", head_dim=8, num_heads=1, position_offset=-100.0)
    x = jax.random.normal(jax.random.key(4), (1, 20, 1, 8))
    pos = jnp.arange(20)[None]
    la = np.einsum("bqhd,bkhd->qk", *a.rotate(x, x, pos, pos))
    lb = np.einsum("bqhd,bkhd->qk", *b.rotate(x, x, pos, pos))
    np.testing.assert_allclose(la, lb, rtol=1e-4, atol=1e-5)
    e0 = jnp.zeros((1, 20, 1, 8)).at[..., 0].set(1.0)
    q, k = a.rotate(e0, e0, pos, pos)
    rope = pe_lib.make("rope", head_dim=8, num_heads=1)
    qr, kr = rope.rotate(e0, e0, pos, pos)
    ratio = float(jnp.sum(q[0, 2] * k[0, 12]) / jnp.sum(qr[0, 2] * kr[0, 12]))
    assert ratio == pytest.approx(float(xpos_zeta(8)[0]) ** (-10 / 512), rel=1e-5) and ratio > 1
