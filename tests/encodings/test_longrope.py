"""LongRoPE (Ding et al., arXiv 2402.13753) and YaRN's two ramps, beyond the golden values of
tests/pretrained/test_rope_config.py."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax import encodings as pe_lib
from posjax.encodings.rope import apply_rope, rope_frequencies

SHORT = tuple(1.0 + 0.1 * k for k in range(8))
LONG = tuple(1.0 + 0.5 * k for k in range(8))


def make(**kw):
    return pe_lib.make("longrope", head_dim=16, num_heads=2, max_len=64,
                       **{"short_factor": SHORT, "long_factor": LONG, "original_max_len": 16, **kw})


def test_short_factors_within_the_original_length_long_beyond():
    pe = make()
    x = jax.random.normal(jax.random.key(0), (1, 20, 2, 16))
    m = pe.magnitude()
    assert m == pytest.approx(math.sqrt(1 + math.log(64 / 16) / math.log(16)))
    for T, factors in ((16, SHORT), (20, LONG)):
        pos = jnp.arange(T)[None]
        q, _ = pe.rotate(x[:, :T], x[:, :T], pos, pos)
        theta = rope_frequencies(16) / jnp.asarray(factors)
        ref = apply_rope(x[:, :T], pos, interleaved=False, frequencies=theta) * m
        np.testing.assert_allclose(np.asarray(q), np.asarray(ref), atol=1e-5)


def test_relative_at_a_fixed_length_and_norm_scaled_by_the_factor():
    pe = make(attention_factor=1.0)
    q = jax.random.normal(jax.random.key(1), (1, 1, 1, 16))
    k = jax.random.normal(jax.random.key(2), (1, 1, 1, 16))
    dots = []
    for shift in (0, 3):
        qp, kp = jnp.array([[2 + shift]]), jnp.array([[9 + shift]])
        qr, _ = pe.rotate(q, q, qp, jnp.array([[10]]))   # same length (11) for both calls
        _, kr = pe.rotate(k, k, jnp.array([[10]]), kp)
        dots.append(float(jnp.sum(qr * kr)))
    assert dots[0] == pytest.approx(dots[1], rel=1e-5)
    out, _ = make().rotate(q, q, jnp.array([[3]]), jnp.array([[3]]))
    assert float(jnp.linalg.norm(out)) == pytest.approx(make().magnitude() * float(jnp.linalg.norm(q)), rel=1e-5)


def test_bad_factor_lists_are_named():
    with pytest.raises(ValueError, match="short_factor has 3 values, needs 8"):
        make(short_factor=(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="> 0"):
        make(long_factor=(0.0,) * 8)
    with pytest.raises(ValueError, match="ramp"):
        pe_lib.make("rope_yarn", head_dim=16, max_len=64, ramp="wavelength")


def test_proportional_rotates_only_its_first_pairs():
    pe = pe_lib.make("rope_proportional", head_dim=16, proportion=0.5, factor=2.0)
    theta = np.asarray(pe.frequencies())
    np.testing.assert_allclose(theta[:4], np.asarray(rope_frequencies(16))[:4] / 2, rtol=1e-6)
    assert (theta[4:] == 0).all()
    x = jax.random.normal(jax.random.key(3), (1, 5, 1, 16))
    q, _ = pe.rotate(x, x, jnp.arange(5)[None], jnp.arange(5)[None])
    # half-split pairs (k, k + 8): the unrotated pairs k = 4..7 pass through
    np.testing.assert_allclose(np.asarray(q)[..., 4:8], np.asarray(x)[..., 4:8], atol=1e-6)
    np.testing.assert_allclose(np.asarray(q)[..., 12:], np.asarray(x)[..., 12:], atol=1e-6)
