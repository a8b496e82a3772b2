"""Rotary-family catalogue entries: xPos, HoPE, GridPE and the RoPE context-extension variants."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.encodings as pe_lib
from posjax.encodings import (grid_wave_vectors, hope_frequencies, ntk_base, ramp_frequencies,
                              rope_frequencies, simplex_directions, xpos_zeta)


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


@pytest.mark.parametrize("variant", ["rope_yarn", "rope_llama3"])
def test_ramp_scalings_keep_high_divide_low_and_are_monotone(variant):
    s = 8.0
    pe = pe_lib.make(variant, head_dim=128, num_heads=1, factor=s, original_max_len=2048,
                     base=10000.0)
    theta = np.asarray(rope_frequencies(128, 10000.0), np.float64)
    new = np.asarray(pe.frequencies(), np.float64)
    np.testing.assert_allclose(new[:2], theta[:2], rtol=1e-6)      # highest frequencies kept
    np.testing.assert_allclose(new[-2:], theta[-2:] / s, rtol=1e-6)  # lowest divided by s
    ratio = new / theta
    assert np.all(np.diff(new) < 0)            # still strictly decreasing frequencies
    assert np.all(np.diff(ratio) <= 1e-7)      # the scaling moves monotonically from 1 to 1/s
    middle = (ratio < 1 - 1e-6) & (ratio > 1 / s + 1e-6)
    assert middle.any()                        # a real interpolation band exists


def test_ramp_boundaries_follow_the_formula():
    theta = jnp.asarray([1.0, 2 * math.pi * 4 / 1000, 2 * math.pi * 2 / 1000, 2 * math.pi * 0.5 / 1000])
    new = np.asarray(ramp_frequencies(theta, 4.0, 1000.0, 1.0, 4.0))  # L/lambda = ., 4, 2, 0.5
    g = np.array([1.0, 1.0, 1.0 / 3.0, 0.0])
    np.testing.assert_allclose(new, (1 - g) * np.asarray(theta) / 4 + g * np.asarray(theta), rtol=1e-6)


def test_yarn_scales_logits_by_the_square_of_its_factor():
    s = 4.0
    yarn = pe_lib.make("rope_yarn", head_dim=8, num_heads=1, factor=s, original_max_len=16)
    q = jnp.ones((1, 1, 1, 8))
    pos = jnp.zeros((1, 1), jnp.int32)
    qy, ky = yarn.rotate(q, q, pos, pos)
    np.testing.assert_allclose(float(jnp.sum(qy * ky)), 8 * (0.1 * math.log(s) + 1) ** 2, rtol=1e-6)


def test_linear_scaling_is_rope_at_divided_positions():
    lin = pe_lib.make("rope_linear", head_dim=8, num_heads=1, factor=4.0)
    rope = pe_lib.make("rope", head_dim=8, num_heads=1)
    x = jax.random.normal(jax.random.key(0), (1, 6, 1, 8))
    pos = jnp.arange(0, 24, 4)[None]
    a, _ = lin.rotate(x, x, pos, pos)
    b, _ = rope.rotate(x, x, pos // 4, pos // 4)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_ntk_base_and_dynamic_scaling():
    assert ntk_base(10000.0, 4.0, 8) == pytest.approx(10000.0 * 4.0 ** (8 / 6))
    ntk = pe_lib.make("rope_ntk", head_dim=8, num_heads=1, factor=4.0)
    np.testing.assert_allclose(np.asarray(ntk.frequencies()),
                               np.asarray(rope_frequencies(8, 10000.0 * 4.0 ** (8 / 6))), rtol=1e-5)
    dyn = pe_lib.make("rope_ntk", head_dim=8, num_heads=1, factor=4.0, dynamic=True,
                      original_max_len=16)
    rope = pe_lib.make("rope", head_dim=8, num_heads=1)
    x = jax.random.normal(jax.random.key(1), (1, 16, 1, 8))
    pos = jnp.arange(16)[None]
    # within the original length the dynamic form is plain RoPE
    np.testing.assert_allclose(np.asarray(dyn.rotate(x, x, pos, pos)[0]),
                               np.asarray(rope.rotate(x, x, pos, pos)[0]), atol=1e-6)


def test_llama3_defaults_match_the_release():
    o = pe_lib.make("rope_llama3", head_dim=128, num_heads=1).options
    assert (o.base, o.factor, o.low_freq_factor, o.high_freq_factor, o.original_max_len) == \
        (500000.0, 8.0, 1.0, 4.0, 8192)


def test_hope_zeroes_low_frequencies():
    theta = np.asarray(rope_frequencies(16, 10000.0))
    by_wavelength = np.asarray(hope_frequencies(16, train_length=64))
    keep = 2 * np.pi / theta <= 64
    assert keep.any() and (~keep).any()
    np.testing.assert_array_equal(by_wavelength[keep], theta[keep])
    assert np.all(by_wavelength[~keep] == 0)
    by_pairs = np.asarray(hope_frequencies(16, rotated_pairs=3))
    np.testing.assert_array_equal(by_pairs[:3], theta[:3])
    assert np.all(by_pairs[3:] == 0)
    with pytest.raises(ValueError):
        hope_frequencies(16)


def test_simplex_directions():
    np.testing.assert_allclose(simplex_directions(1), [[1.0], [-1.0]])
    d2 = simplex_directions(2)
    np.testing.assert_allclose(np.linalg.norm(d2, axis=1), 1.0, atol=1e-12)
    gram = d2 @ d2.T
    np.testing.assert_allclose(gram[~np.eye(3, dtype=bool)], -0.5, atol=1e-12)  # 120 degrees
    np.testing.assert_allclose(d2.sum(0), 0.0, atol=1e-12)


def test_gridpe_scales_and_2d_relativity():
    w = np.asarray(grid_wave_vectors(12, 2, scale_ratio=math.sqrt(math.e)))  # 6 pairs = 2 scales
    norms = np.linalg.norm(w, axis=1)
    np.testing.assert_allclose(norms, [1, 1, 1] + [math.e ** -0.5] * 3, rtol=1e-6)
    grid = pe_lib.make("gridpe", head_dim=12, num_heads=1, dims=2)
    q = jax.random.normal(jax.random.key(2), (1, 1, 1, 12))
    k = jax.random.normal(jax.random.key(3), (1, 1, 1, 12))
    xy = jnp.array([[[0, 0], [3, 1], [2, 5]]])
    shifted = xy + jnp.array([7, -4])

    def logits(p):
        qq, kk = grid.rotate(jnp.broadcast_to(q, (1, 3, 1, 12)), jnp.broadcast_to(k, (1, 3, 1, 12)), p, p)
        return np.einsum("bqhd,bkhd->qk", qq, kk)

    np.testing.assert_allclose(logits(shifted), logits(xy), atol=1e-5)
    flat = pe_lib.make("gridpe", head_dim=12, num_heads=1, dims=2, grid=(4, 6))
    np.testing.assert_allclose(np.asarray(flat.coordinates(jnp.array([0, 7, 23]))),
                               [[0, 0], [1, 1], [3, 5]])
