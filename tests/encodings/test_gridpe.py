"""GridPE (Li et al., arXiv 2406.07049): rotation by the phases kappa . x of multi-scale simplex
wave vectors, against NumPy in 1-D and 2-D."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.encodings as pe_lib
from posjax.encodings import grid_wave_vectors, simplex_directions

from _np_refs import np_rotate, random_qk
from _pe_checks import make


def numpy_wave_vectors(pairs, n, dirs, rho):
    """arXiv 2406.07049, Sec. 3 (grid-cell Fourier encoding): kappa_{m,a} = omega_m u_a,
    omega_m = rho^(-m), u_a the n + 1 simplex directions, scale-major; spare pairs unrotated."""
    out = np.zeros((pairs, n))
    scales = pairs // (n + 1)
    for m in range(scales):
        for a, u in enumerate(dirs):
            out[m * (n + 1) + a] = rho ** (-m) * np.asarray(u, np.float64)
    return out


@pytest.mark.parametrize("n,dirs_options", [
    (1, [[[1.0], [-1.0]]]),
    (2, [[[1.0, 0.0], [-0.5, s * np.sqrt(3) / 2], [-0.5, -s * np.sqrt(3) / 2]] for s in (1, -1)]),
])
def test_rotate_matches_the_simplex_fourier_phases(n, dirs_options):
    extra = {} if n == 1 else {"grid": (3, 4)}
    pe = make("gridpe", d_model=32, num_heads=2, dims=n, **extra)  # 8 pairs per head
    q, k = random_qk(3, 1, 6, 2, 16)
    flat = np.array([[0, 1, 5, 6, 10, 11]])
    x = flat[..., None].astype(np.float64) if n == 1 else np.stack(np.unravel_index(flat, (3, 4)), -1)
    qr, kr = pe.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32),
                       jnp.asarray(flat), jnp.asarray(flat))
    errors = []
    for dirs in dirs_options:  # the order of the two 120-degree directions is a convention
        kappa = numpy_wave_vectors(8, n, dirs, np.exp(1.0 / n))
        ang = (x @ kappa.T)[..., None, :]
        errors.append(max(np.abs(np.asarray(qr) - np_rotate(q, ang, interleaved=False)).max(),
                          np.abs(np.asarray(kr) - np_rotate(k, ang, interleaved=False)).max()))
    assert min(errors) < 2e-5, errors


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
