"""ComRoPE (Yu et al., arXiv 2506.03737, Sec. 3): the block-diagonal rotation
blockdiag(exp(p A_1), ..., exp(p A_m)) q against a float64 NumPy exponential per block; blocks
do not mix; relative and norm-preserving. (Split from test_liere_comrope_string.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.liere import skew
from _np_refs import expm_skew64
from _pe_checks import (assert_cache_and_packing, assert_relative_and_norm_preserving, make,
                        train_one_step)

RANDOM = {"block_size": 4}


@pytest.mark.parametrize("name", ["comrope"])  # as in the family file this was split from
def test_relative_and_norm_preserving(name):
    assert_relative_and_norm_preserving(make(name, **RANDOM))


def test_comrope_mixes_dims_only_within_blocks():
    pe = make("comrope", block_size=4)
    x = jnp.zeros((1, 1, 2, 8)).at[..., 1].set(1.0)  # a unit vector in block 0
    out = np.asarray(pe.rotate(x, x, jnp.array([[5]]), jnp.array([[5]]))[0])
    assert np.abs(out[..., :4]).max() > 0.1 and np.abs(out[..., 4:]).max() == 0.0
    with pytest.raises(ValueError, match="divide"):
        make("comrope", block_size=3)


def test_rotation_is_the_block_diagonal_exponential():
    """q' = blockdiag(exp(p A_b)) q with A_b = (M_b - M_b^T) / 2 per head (arXiv 2506.03737,
    Sec. 3, the 1-D reduction of ComRoPE-AP/LD)."""
    pe = make("comrope", block_size=4)
    M = np.asarray(pe.angle_matrices[...], np.float64)               # [H, d/b, b, b]
    A = np.asarray(skew(jnp.asarray(M)), np.float64)
    np.testing.assert_allclose(A, 0.5 * (M - np.swapaxes(M, -1, -2)), atol=1e-6)
    q = np.random.default_rng(0).standard_normal((1, 3, 2, 8))
    pos = np.array([[0, 2, 5]])
    got = np.asarray(pe.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(q, jnp.float32),
                               jnp.asarray(pos), jnp.asarray(pos))[0])
    want = np.zeros_like(q)
    for t, p in enumerate(pos[0]):
        for h in range(2):
            for blk in range(2):
                sl = slice(4 * blk, 4 * blk + 4)
                want[0, t, h, sl] = expm_skew64(p * A[h, blk]) @ q[0, t, h, sl]
    np.testing.assert_allclose(got, want, atol=5e-5)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("comrope")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("comrope", **RANDOM)
