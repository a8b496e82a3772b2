"""KERPLE (Chi et al., arXiv 2205.09921): NumPy transcription of both kernels."""
import jax.numpy as jnp
import numpy as np
import pytest

from _pe_checks import make


def numpy_kerple(r1, r2, i, j, variant, causal=True):
    """arXiv 2205.09921, Sec. 3 (the logarithmic and power kernels): log variant -r1 log(1 + r2 |m - n|), power
    variant -r1 |m - n|^r2 (0 < r2 <= 2); r1, r2 clamped below at 0.01 (and r2 <= 2), the
    distance max(i - j, 0) in a decoder."""
    r1 = np.maximum(r1, 0.01)
    r2 = np.clip(r2, 0.01, 2.0) if variant == "power" else np.maximum(r2, 0.01)
    out = np.zeros((len(r1), len(i), len(j)))
    for h in range(len(r1)):
        for a, pi in enumerate(i):
            for b, pj in enumerate(j):
                dist = max(pi - pj, 0) if causal else abs(pi - pj)
                out[h, a, b] = (-r1[h] * np.log(1 + r2[h] * dist) if variant == "log"
                                else -r1[h] * dist ** r2[h])
    return out


@pytest.mark.parametrize("variant", ["log", "power"])
@pytest.mark.parametrize("causal", [True, False])
def test_bias_matches_the_kernel(variant, causal):
    pe = make(f"kerple_{variant}", d_model=12, num_heads=3, causal=True, bidirectional=not causal)
    r1, r2 = np.asarray(pe.r1[...], np.float64), np.asarray(pe.r2[...], np.float64)
    i, j = np.array([0, 2, 5, 11]), np.array([0, 1, 4, 9, 12])
    got = np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j)))
    np.testing.assert_allclose(got, numpy_kerple(r1, r2, i, j, variant, causal), rtol=1e-5, atol=1e-6)


def test_clamping_follows_the_reference():
    from posjax.encodings import kerple_power_bias
    r1, r2 = np.array([0.001, 1.0]), np.array([3.0, 0.0])
    i = np.arange(5)
    got = np.asarray(kerple_power_bias(jnp.asarray(r1), jnp.asarray(r2), jnp.asarray(i), jnp.asarray(i)))
    np.testing.assert_allclose(got, numpy_kerple(r1, r2, i, i, "power"), rtol=1e-5, atol=1e-7)
