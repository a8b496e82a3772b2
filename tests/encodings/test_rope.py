"""RoPE (Su et al., RoFormer, arXiv 2104.09864): the rotation against a float64 NumPy
transcription in both pairings and with a rotary fraction, the relative logit identity, and
partial-head RoPE (arXiv 2505.13027; moved from test_rope_plus_abs_mla.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.encodings import apply_rope
from _np_refs import np_rotate, random_qk
from _pe_checks import constant_qk, constant_qk_logits


def numpy_rope(x, pos, *, base=10000.0, fraction=1.0, interleaved=False):
    """arXiv 2104.09864, Sec. 3.4.2 (Eq. (34)): pair k of the first 2 floor(f d / 2) dims rotated
    by p theta_k, theta_k = base^(-2k/d_rot); the remaining dims pass through."""
    rot = 2 * int(fraction * x.shape[-1] // 2)
    theta = base ** (-2.0 * np.arange(rot // 2) / rot)
    out = np.array(x, np.float64)
    out[..., :rot] = np_rotate(x[..., :rot], pos[..., :, None, None] * theta, interleaved=interleaved)
    return out


@pytest.mark.parametrize("interleaved,fraction", [(False, 1.0), (True, 1.0), (False, 0.5)])
def test_float64_rotation_matches_roformer(interleaved, fraction):
    q, _ = random_qk(6, 2, 5, 2, 12)
    pos = np.array([[0, 1, 7, 100, 4095], [3, 3, 9, 12, 70000]])
    with jax.enable_x64(True):
        got = apply_rope(jnp.asarray(q), jnp.asarray(pos), base=500.0, rotary_fraction=fraction,
                         interleaved=interleaved)
        assert got.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(got), numpy_rope(q, pos, base=500.0, fraction=fraction,
                                                               interleaved=interleaved), atol=1e-10)


def test_module_rotation_and_relative_logits():
    """<R_m q, R_n k> = q^T R_(n-m) k (arXiv 2104.09864, Sec. 3.2): the module's float32 rotation
    against NumPy, and its logits against NumPy logits at shifted positions."""
    m = pe.make("rope", d_model=16, num_heads=2, base=100.0)
    q, k = random_qk(7, 1, 6, 2, 8)
    pos = np.array([[0, 2, 5, 9, 30, 63]])
    qr, kr = m.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32), jnp.asarray(pos),
                      jnp.asarray(pos))
    np.testing.assert_allclose(np.asarray(qr), numpy_rope(q, pos, base=100.0), atol=2e-5)
    logits = np.einsum("bqhd,bkhd->hqk", np.asarray(qr, np.float64), np.asarray(kr, np.float64))
    shifted = np.einsum("bqhd,bkhd->hqk", numpy_rope(q, pos + 17, base=100.0),
                        numpy_rope(k, pos + 17, base=100.0))
    np.testing.assert_allclose(logits, shifted, atol=1e-4)


def test_partial_head_rope_rotates_only_the_first_k_heads():
    m = pe.make("rope", d_model=32, num_heads=4, interleaved=True, num_rotary_heads=2)
    q, k = constant_qk(1, 6)
    qr, kr = nnx.jit(lambda m, q, k, p: m.rotate(q, k, p, p))(m, q, k, jnp.arange(6)[None] + 3)
    np.testing.assert_array_equal(np.asarray(qr[:, :, 2:]), np.asarray(q[:, :, 2:]))
    np.testing.assert_array_equal(np.asarray(kr[:, :, 2:]), np.asarray(k[:, :, 2:]))
    assert float(jnp.abs(qr[:, :, :2] - q[:, :, :2]).max()) > 1e-2
    logits = constant_qk_logits(m, jnp.arange(6))
    # NoPE heads: constant logits (q, k are the same at every position); RoPE heads vary
    assert np.ptp(logits[0, 2:], axis=(-1, -2)).max() < 1e-5
    assert np.ptp(logits[0, :2], axis=(-1, -2)).min() > 1e-2
    with pytest.raises(ValueError, match="num_rotary_heads"):
        pe.make("rope", d_model=32, num_heads=4, num_rotary_heads=5)
