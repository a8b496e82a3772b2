"""Additive and structural catalogue entries: CAPE, PoPE, complex, learned_interpolated, CPE."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import (cape_positions, complex_embedding, depthwise_conv1d,
                              depthwise_conv2d, interpolate_rows, legendre, pope_table,
                              sinusoidal_at)

POS = jnp.arange(7)


def test_cape_eval_mode_is_plain_sinusoidal():
    cape = pe_lib.make("cape", d_model=8)
    sin = pe_lib.make("sinusoidal", d_model=8)
    x = jax.random.normal(jax.random.key(0), (2, 7, 8))
    np.testing.assert_array_equal(np.asarray(cape.embed(x, POS[None])), np.asarray(sin.embed(x, POS[None])))


def test_cape_training_augmentation_is_seeded_and_bounded():
    cape = pe_lib.make("cape", d_model=8)
    x = jnp.zeros((3, 7, 8))
    a = cape.embed(x, POS[None], deterministic=False, rngs=nnx.Rngs(dropout=1))
    b = cape.embed(x, POS[None], deterministic=False, rngs=nnx.Rngs(dropout=1))
    c = cape.embed(x, POS[None], deterministic=False, rngs=nnx.Rngs(dropout=2))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(jnp.abs(a - c).max()) > 1e-3
    pos = np.asarray(cape_positions(jax.random.key(3), POS[None].astype(jnp.float32), 500,
                                    max_global_shift=5.0, max_local_shift=1.0,
                                    max_global_scaling=1.03))
    dev = pos - np.arange(7)
    assert np.abs(dev).max() <= 1.03 * (6 + 5 + 1) - 6 + 1e-4
    assert np.abs(dev).max() > 4.0  # the global shift is really applied
    with pytest.raises(ValueError, match="rngs"):
        cape.embed(x, POS[None], deterministic=False)


def test_legendre_recurrence_matches_numpy():
    x = np.linspace(-1, 1, 11)
    ours = np.asarray(legendre(jnp.asarray(x, jnp.float32), 12))
    for n in range(12):
        ref = np.polynomial.legendre.legval(x, np.eye(12)[n])
        np.testing.assert_allclose(ours[:, n], ref, atol=2e-5)


def test_pope_table_map_and_normalisation():
    t = np.asarray(pope_table(jnp.array([0, 4, 8]), 4, num_positions=9))
    # x = -1, 0, 1: P_0 = 1, P_1 = x, P_2 = (3x^2 - 1)/2, P_3 = (5x^3 - 3x)/2
    np.testing.assert_allclose(t, [[1, -1, 1, -1], [1, 0, -0.5, 0], [1, 1, 1, 1]], atol=1e-6)
    o = np.asarray(pope_table(jnp.array([8]), 3, num_positions=9, degree_offset=1,
                              normalization="orthonormal"))
    np.testing.assert_allclose(o[0], [math.sqrt(1.5), math.sqrt(2.5), math.sqrt(3.5)], rtol=1e-6)
    pope = pe_lib.make("pope", d_model=4, max_len=9)
    with pytest.raises(ValueError, match="positions"):
        pope.embed(jnp.zeros((1, 3, 4)), jnp.array([[0, 5, 9]]))


def test_complex_shift_is_a_phase_rotation():
    r = jnp.array([[0.5, 2.0]])
    w = jnp.array([[0.3, -1.1]])
    phi = jnp.array([[0.2, 0.0]])
    f = lambda p: np.asarray(complex_embedding(r, w, phi, jnp.array([p], jnp.float32)))[0]
    z = lambda v: v[:2] + 1j * v[2:]
    delta = 5.0
    np.testing.assert_allclose(z(f(3.0 + delta)), z(f(3.0)) * np.exp(1j * np.asarray(w[0]) * delta),
                               atol=1e-5)


def test_complex_embedding_replaces_the_token_vector():
    cpx = pe_lib.make("complex", d_model=8, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (2, 7, 8))
    out = cpx.embed(x, POS[None])
    r, w, phi = cpx.components(x)
    np.testing.assert_allclose(np.asarray(out), np.asarray(complex_embedding(r, w, phi, POS[None])),
                               atol=1e-6)
    # |z| per complex dim is the amplitude: position-independent
    mag = jnp.sqrt(out[..., :4] ** 2 + out[..., 4:] ** 2)
    np.testing.assert_allclose(np.asarray(mag), np.abs(np.asarray(r)), atol=1e-5)
    with pytest.raises(ValueError, match="readout"):
        pe_lib.make("complex", d_model=8, readout="abs")


def test_learned_interpolated_equals_learned_inside_and_stretches_beyond():
    li = pe_lib.make("learned_interpolated", d_model=4, max_len=5, rngs=nnx.Rngs(0))
    le = pe_lib.make("learned", d_model=4, max_len=5, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(np.asarray(li.table(jnp.arange(5))), np.asarray(le.table(jnp.arange(5))))
    table = np.asarray(li.embedding[...])
    long = np.asarray(li.table(jnp.arange(9)))  # L_new = 9: index p * 4 / 8
    np.testing.assert_allclose(long[0], table[0], atol=1e-7)
    np.testing.assert_allclose(long[8], table[4], atol=1e-7)
    np.testing.assert_allclose(long[3], 0.5 * (table[1] + table[2]), atol=1e-7)
    np.testing.assert_allclose(np.asarray(interpolate_rows(jnp.asarray(table), jnp.array([2.25]))),
                               [0.75 * table[2] + 0.25 * table[3]], atol=1e-7)
    clamp = pe_lib.make("learned_interpolated", d_model=4, max_len=5, beyond="clamp", rngs=nnx.Rngs(0))
    np.testing.assert_allclose(np.asarray(clamp.table(jnp.array([7]))), table[4:5])


def test_depthwise_conv1d_formula_and_causality():
    x = jax.random.normal(jax.random.key(0), (1, 9, 3))
    kern = jax.random.normal(jax.random.key(1), (3, 3))
    bias = jnp.array([0.1, 0.2, 0.3])
    y = np.asarray(depthwise_conv1d(x, kern, bias, causal=False))
    xp = np.pad(np.asarray(x)[0], ((1, 1), (0, 0)))
    ref = np.stack([(xp[t:t + 3] * np.asarray(kern)).sum(0) for t in range(9)]) + np.asarray(bias)
    np.testing.assert_allclose(y[0], ref, atol=1e-5)
    yc = np.asarray(depthwise_conv1d(x, kern, bias, causal=True))
    x2 = x.at[:, 5:].set(7.0)
    np.testing.assert_allclose(np.asarray(depthwise_conv1d(x2, kern, bias, causal=True))[:, :5],
                               yc[:, :5], atol=0)


def test_cpe_is_shift_equivariant_for_interior_tokens():
    cpe = pe_lib.make("cpe", d_model=4, kernel_size=3, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(2), (1, 12, 4))
    s = 3
    y = np.asarray(cpe.generate(x))
    ys = np.asarray(cpe.generate(jnp.roll(x, s, axis=1)))
    # interior tokens (away from both zero-padded borders and the wrap-around) move with the shift
    np.testing.assert_allclose(ys[0, s + 1:11], y[0, 1:11 - s], atol=1e-6)
    # zero padding is an absolute cue: on a constant input the border tokens differ from the rest
    const = np.asarray(cpe.generate(jnp.ones((1, 6, 4))))[0]
    np.testing.assert_allclose(const[1:5], np.broadcast_to(const[1], (4, 4)), atol=1e-6)
    assert np.abs(const[0] - const[1]).max() > 1e-3 and np.abs(const[5] - const[1]).max() > 1e-3
    grid = pe_lib.make("cpe", d_model=4, grid=(3, 4), rngs=nnx.Rngs(0))
    assert grid.generate(x).shape == x.shape


def test_depthwise_conv2d_matches_a_direct_sum():
    x = jax.random.normal(jax.random.key(4), (1, 12, 2))
    kern = jax.random.normal(jax.random.key(5), (3, 3, 2))
    y = np.asarray(depthwise_conv2d(x, kern, jnp.zeros(2), (3, 4)))[0].reshape(3, 4, 2)
    xp = np.pad(np.asarray(x)[0].reshape(3, 4, 2), ((1, 1), (1, 1), (0, 0)))
    ref = np.array([[(xp[i:i + 3, j:j + 3] * np.asarray(kern)).sum((0, 1)) for j in range(4)]
                    for i in range(3)])
    np.testing.assert_allclose(y, ref, atol=1e-5)


def test_cpe_acts_only_after_its_block():
    cpe = pe_lib.make("cpe", d_model=4, num_layers=3, peg_after=1, skip_tokens=1, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(6), (1, 5, 4))
    np.testing.assert_array_equal(np.asarray(cpe.block_output(x, POS[None], 0)), np.asarray(x))
    out = np.asarray(cpe.block_output(x, POS[None], 1))
    np.testing.assert_array_equal(out[:, 0], np.asarray(x)[:, 0])  # class token bypasses
    assert np.abs(out[:, 1:] - np.asarray(x)[:, 1:]).max() > 1e-3
    with pytest.raises(ValueError, match="peg_after"):
        pe_lib.make("cpe", d_model=4, num_layers=2, peg_after=2)


def test_sinusoidal_reference_used_by_cape():
    np.testing.assert_allclose(np.asarray(sinusoidal_at(jnp.array([1.0]), 4))[0],
                               [0.841471, 0.540302, 0.010000, 0.999950], atol=1e-6)
