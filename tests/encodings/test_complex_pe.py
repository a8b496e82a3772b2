"""Complex-valued embedding (Wang et al., arXiv 1912.12333, Sec. 3): f(w, p) = r exp(i(omega p +
phi)) as [Re | Im], against NumPy, and the shift as a phase rotation (the same section)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import complex_embedding

from _pe_checks import make

POS = jnp.arange(7)


def numpy_complex(x, pos, w_r, w_o, w_p, omega0):
    """r = x W_r, omega = x W_omega + omega_0, phi = x W_phi (posjax's projection of the paper's
    per-word tables); f = r exp(i (omega p + phi)) -> [r cos | r sin]."""
    r, om, ph = x @ w_r, x @ w_o + omega0, x @ w_p
    ang = om * pos[..., None] + ph
    return np.concatenate([r * np.cos(ang), r * np.sin(ang)], axis=-1), r, om


def test_embedding_matches_eq7_and_a_shift_is_a_phase_rotation():
    pe = make("complex", d_model=8, init_std=0.5)
    w = [np.asarray(a[...], np.float64) for a in (pe.w_amplitude, pe.w_frequency, pe.w_phase,
                                                  pe.base_frequency)]
    x = np.random.default_rng(0).standard_normal((1, 6, 8))
    pos = np.arange(6)[None].astype(np.float64)
    got = np.asarray(pe.embed(jnp.asarray(x, jnp.float32), jnp.asarray(pos, jnp.int32)))
    want, r, om = numpy_complex(x, pos, *w)
    np.testing.assert_allclose(got, want, atol=1e-4)
    shifted = np.asarray(pe.embed(jnp.asarray(x, jnp.float32), jnp.asarray(pos + 3, jnp.int32)))
    z, zs = got[..., :4] + 1j * got[..., 4:], shifted[..., :4] + 1j * shifted[..., 4:]
    np.testing.assert_allclose(zs, z * np.exp(1j * om * 3), atol=1e-4)  # f(p + 3) = f(p) e^{i 3 omega}


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
