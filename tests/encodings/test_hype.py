"""HyPE (Angelotti, arXiv 2310.19676): the bias -tau sinh(mu (j - i)) against NumPy, its q/k
augmentation, and the ALiBi-like initialisation."""
import math

import jax
import jax.numpy as jnp
import numpy as np

from posjax.encodings import hype_augment
from _np_refs import random_qk
from _pe_checks import make
import posjax.encodings as pe_lib
from posjax.encodings import alibi_slopes, hype_bias

POS = jnp.arange(6)


def numpy_hype(tau, mu, i, j):
    """arXiv 2310.19676, Sec. 3: B_h(i, j) = -tau_h sinh(mu_h (j - i))."""
    return -tau[:, None, None] * np.sinh(mu[:, None, None] * (j[None, None, :] - i[None, :, None]))


def test_bias_matches_the_hyperbolic_formula_and_starts_alibi_like():
    pe = make("hype", d_model=8, num_heads=4, mu_init=0.05)
    pe.mu.value = jnp.array([-0.05, -0.2, 0.1, 0.3], jnp.float32)  # away from the init
    tau, mu = np.asarray(pe.tau[...], np.float64), np.asarray(pe.mu[...], np.float64)
    np.testing.assert_allclose(tau, np.array([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]) / 0.05, rtol=1e-6)
    i, j = np.array([0, 3, 9, 15]), np.array([0, 1, 7, 15])
    np.testing.assert_allclose(np.asarray(pe.bias(jnp.asarray(i), jnp.asarray(j))),
                               numpy_hype(tau, mu, i, j), rtol=1e-5, atol=1e-6)


def test_augmented_dot_product_adds_the_bias():
    """The paper's realisation: two extra coordinates on q and k whose scaled product is B."""
    q, k = random_qk(2, 1, 5, 2, 4)
    tau, mu = np.array([1.5, 0.3]), np.array([-0.1, 0.2])
    pos = np.array([[0, 2, 3, 7, 11]])
    qa, ka = hype_augment(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32), jnp.asarray(pos),
                          jnp.asarray(pos), jnp.asarray(tau), jnp.asarray(mu), center=5.0)
    got = np.einsum("bqhd,bkhd->hqk", np.asarray(qa, np.float64), np.asarray(ka, np.float64)) / 2.0
    want = np.einsum("bqhd,bkhd->hqk", q, k) / 2.0 + numpy_hype(tau, mu, pos[0], pos[0])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_hype_augmentation_equals_the_materialised_bias():
    tau, mu = jnp.array([0.7, 2.0]), jnp.array([-0.05, 0.03])
    d_h = 8
    q = jax.random.normal(jax.random.key(0), (1, 6, 2, d_h))
    k = jax.random.normal(jax.random.key(1), (1, 6, 2, d_h))
    qa, ka = hype_augment(q, k, POS[None], POS[None], tau, mu, center=3.0)
    aug = jnp.einsum("bqhd,bkhd->bhqk", qa, ka) / math.sqrt(d_h)
    plain = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d_h)
    np.testing.assert_allclose(np.asarray(aug - plain), np.asarray(hype_bias(tau, mu, POS, POS))[None],
                               atol=1e-5)


def test_hype_starts_alibi_like():
    hype = pe_lib.make("hype", num_heads=4, causal=True)
    alibi = pe_lib.make("alibi", num_heads=4, causal=True)
    b, a = np.asarray(hype.bias(POS, POS)), np.asarray(alibi.bias(POS, POS))
    past = np.tril(np.ones((6, 6), bool))
    np.testing.assert_allclose(b[:, past], a[:, past], rtol=2e-3, atol=1e-6)  # sinh(x) ~ x
    assert np.all(np.abs(b[:, past]) >= np.abs(a[:, past]) - 1e-6)           # sinh(x) >= x
    np.testing.assert_allclose(np.asarray(hype.tau[...] * -hype.mu[...]), np.asarray(alibi_slopes(4)),
                               rtol=1e-6)
