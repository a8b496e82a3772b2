"""FIRE (Li et al., arXiv 2310.04418): NumPy transcription of the bias with the module's MLP weights."""
import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import fire_inputs

from _pe_checks import make

POS = jnp.arange(6)


def numpy_fire(i, j, *, c, threshold, w1, b1, w2, b2, eps=1e-6):
    """arXiv 2310.04418, Sec. 3 (the FIRE bias with progressive interpolation): b(i, j) = f_theta(psi(i - j) / psi(max(L, i))),
    psi(x) = log(c x + 1), f_theta a 1 -> hidden (ReLU) -> H MLP; distance max(i - j, 0)."""
    psi = lambda x: np.log(c * x + 1.0)
    out = np.zeros((w2.shape[1], len(i), len(j)))
    for a, pi in enumerate(i):
        for b, pj in enumerate(j):
            x = psi(max(pi - pj, 0)) / (psi(max(threshold, pi)) + eps)
            hidden = np.maximum(x * w1[0] + b1, 0.0)
            out[:, a, b] = hidden @ w2 + b2
    return out


def test_bias_matches_the_formula_below_and_above_the_threshold():
    pe = make("fire", causal=True, num_heads=2, base_threshold=6.0, hidden=8)  # L = 6: both regimes at T = 12
    i = j = np.arange(12)
    got = np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j)))
    want = numpy_fire(i, j, c=0.1, threshold=6.0,
                      w1=np.asarray(pe.mlp_in.kernel[...], np.float64),
                      b1=np.asarray(pe.mlp_in.bias[...], np.float64),
                      w2=np.asarray(pe.mlp_out.kernel[...], np.float64),
                      b2=np.asarray(pe.mlp_out.bias[...], np.float64))
    assert got.shape == (2, 12, 12)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fire_normaliser_switches_at_the_threshold():
    x = np.asarray(fire_inputs(jnp.array([3.0, 20.0]), jnp.array([0.0]), c=0.1, threshold=10.0))
    psi = lambda v: math.log(0.1 * v + 1)
    assert x[0, 0] == pytest.approx(psi(3) / (psi(10) + 1e-6), rel=1e-6)   # i < L: psi(L)
    assert x[1, 0] == pytest.approx(psi(20) / (psi(20) + 1e-6), rel=1e-6)  # i >= L: psi(i)


def test_fire_bias_shape_and_learned_parameters():
    fire = pe_lib.make("fire", num_heads=3, causal=True, rngs=nnx.Rngs(0))
    assert fire.bias(POS, POS).shape == (3, 6, 6)
    assert fire.bias(POS[None].repeat(2, 0), POS[None].repeat(2, 0)).shape == (2, 3, 6, 6)
    names = {"/".join(map(str, p)) for p, _ in nnx.to_flat_state(nnx.state(fire, nnx.Param))}
    assert {"c", "threshold_mult"} <= names
    assert float(fire.threshold()) == pytest.approx(512.0)
