"""Complex-valued embedding (Wang et al., arXiv 1912.12333, Sec. 3): f(w, p) = r exp(i(omega p +
phi)) as [Re | Im], against NumPy, and the shift as a phase rotation (the same section)."""
import jax.numpy as jnp
import numpy as np

from _pe_checks import make


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
