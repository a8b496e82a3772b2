"""RoPE context-extension variants of posjax/encodings/rope_scaling.py (linear interpolation,
NTK-aware and dynamic NTK, YaRN's two ramps, Llama 3.1, proportional): each rotation against a
NumPy transcription of its frequency formula (LongRoPE: tests/encodings/test_longrope.py)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.encodings as pe_lib
from posjax.encodings import ntk_base, ramp_frequencies, rope_frequencies

from _np_refs import np_rotate, random_qk
from _pe_checks import make

D, BASE, L, S = 16, 10000.0, 64.0, 4.0
THETA = BASE ** (-2.0 * np.arange(D // 2) / D)


def linear_theta():
    """Position interpolation (Chen et al., arXiv 2306.15595, Sec. 2): f(x, m) -> f(x, m L/L'),
    i.e. angles m theta_k / s."""
    return THETA / S


def ntk_theta(s=S):
    """NTK-aware scaling (community, 2023): base' = base s^(d/(d - 2))."""
    return (BASE * s ** (D / (D - 2))) ** (-2.0 * np.arange(D // 2) / D)


def yarn_ratio_theta(alpha=1.0, beta=32.0):
    """YaRN (Peng et al., arXiv 2309.00071, Sec. 3.2, "NTK-by-parts"): r_k = L /
    lambda_k, gamma = clip((r - alpha)/(beta - alpha), 0, 1), theta' = (1 - gamma) theta / s +
    gamma theta."""
    r = L * THETA / (2 * np.pi)
    g = np.clip((r - alpha) / (beta - alpha), 0, 1)
    return (1 - g) * THETA / S + g * THETA


def yarn_index_theta(alpha=1.0, beta=32.0):
    """The YaRN authors' ramp in the pair index: d(n) = d ln(L / (2 pi n)) / (2 ln base),
    bounds floor(d(beta)), ceil(d(alpha)) clipped to [0, d - 1], gamma linear in k between."""
    idx = lambda n: D * math.log(L / (2 * math.pi * n)) / (2 * math.log(BASE))
    lo, hi = max(math.floor(idx(beta)), 0), min(math.ceil(idx(alpha)), D - 1)
    g = np.clip((np.arange(D // 2) - lo) / (hi - lo), 0, 1)
    return THETA / S * g + THETA * (1 - g)


def llama3_theta(low=1.0, high=4.0):
    """Llama 3.1 scaling (Meta's release): keep theta when lambda < L / high, theta / s when
    lambda > L / low, interpolate linearly in L / lambda between."""
    out = []
    for t in THETA:
        lam = 2 * np.pi / t
        if lam < L / high:
            out.append(t)
        elif lam > L / low:
            out.append(t / S)
        else:
            smooth = (L / lam - low) / (high - low)
            out.append((1 - smooth) * t / S + smooth * t)
    return np.array(out)


def proportional_theta(p=0.5, s=2.0):
    """First floor(p d / 2) pairs rotate with base^(-2k/d) / s, the rest do not rotate."""
    return np.where(np.arange(D // 2) < int(p * D // 2), THETA / s, 0.0)


CASES = {
    "linear": ("rope_linear", dict(factor=S), linear_theta(), 1.0),
    "ntk": ("rope_ntk", dict(factor=S), ntk_theta(), 1.0),
    "yarn_index": ("rope_yarn", dict(factor=S), yarn_index_theta(), 0.1 * math.log(S) + 1),
    "yarn_ratio": ("rope_yarn", dict(factor=S, ramp="ratio"), yarn_ratio_theta(), 0.1 * math.log(S) + 1),
    "llama3": ("rope_llama3", dict(factor=S, base=BASE, original_max_len=64), llama3_theta(), 1.0),
    "proportional": ("rope_proportional", dict(factor=2.0, proportion=0.5), proportional_theta(), 1.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rotation_matches_the_scaled_frequencies(case):
    name, opts, theta, magnitude = CASES[case]
    pe = make(name, d_model=32, num_heads=2, max_len=64, **opts)
    q, k = random_qk(4, 1, 6, 2, D)
    pos = np.array([[0, 1, 3, 10, 31, 63]])
    qr, kr = pe.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32),
                       jnp.asarray(pos), jnp.asarray(pos))
    ang = pos[..., None, None] * theta
    np.testing.assert_allclose(np.asarray(qr), magnitude * np_rotate(q, ang, interleaved=False), atol=3e-5)
    np.testing.assert_allclose(np.asarray(kr), magnitude * np_rotate(k, ang, interleaved=False), atol=3e-5)


def test_dynamic_ntk_uses_the_current_length():
    """HF "dynamic" NTK: s_eff = max(1, s L_cur / L - (s - 1)), L_cur = max position + 1."""
    pe = make("rope_ntk", d_model=32, num_heads=2, max_len=128, factor=S, dynamic=True,
              original_max_len=64)
    q, k = random_qk(5, 1, 4, 2, D)
    for pos in (np.array([[0, 5, 20, 40]]), np.array([[0, 5, 60, 99]])):
        s_eff = max(1.0, S * (pos.max() + 1) / L - (S - 1))
        qr, _ = pe.rotate(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32),
                          jnp.asarray(pos), jnp.asarray(pos))
        want = np_rotate(q, pos[..., None, None] * ntk_theta(s_eff), interleaved=False)
        np.testing.assert_allclose(np.asarray(qr), want, atol=3e-5)


@pytest.mark.parametrize("variant", ["rope_yarn", "rope_llama3"])
def test_ramp_scalings_keep_high_divide_low_and_are_monotone(variant):
    s = 8.0
    pe = pe_lib.make(variant, head_dim=128, num_heads=1, factor=s, original_max_len=2048,
                     base=10000.0)
    theta = np.asarray(rope_frequencies(128, 10000.0), np.float64)
    new = np.asarray(pe.frequencies(), np.float64)
    np.testing.assert_allclose(new[:2], theta[:2], rtol=1e-6)      # highest frequencies kept
    np.testing.assert_allclose(new[-2:], theta[-2:] / s, rtol=1e-6)  # lowest divided by s
    ratio = new / theta
    assert np.all(np.diff(new) < 0)            # still strictly decreasing frequencies
    assert np.all(np.diff(ratio) <= 1e-7)      # the scaling moves monotonically from 1 to 1/s
    middle = (ratio < 1 - 1e-6) & (ratio > 1 / s + 1e-6)
    assert middle.any()                        # a real interpolation band exists


def test_ramp_boundaries_follow_the_formula():
    theta = jnp.asarray([1.0, 2 * math.pi * 4 / 1000, 2 * math.pi * 2 / 1000, 2 * math.pi * 0.5 / 1000])
    new = np.asarray(ramp_frequencies(theta, 4.0, 1000.0, 1.0, 4.0))  # L/lambda = ., 4, 2, 0.5
    g = np.array([1.0, 1.0, 1.0 / 3.0, 0.0])
    np.testing.assert_allclose(new, (1 - g) * np.asarray(theta) / 4 + g * np.asarray(theta), rtol=1e-6)


def test_yarn_scales_logits_by_the_square_of_its_factor():
    s = 4.0
    yarn = pe_lib.make("rope_yarn", head_dim=8, num_heads=1, factor=s, original_max_len=16)
    q = jnp.ones((1, 1, 1, 8))
    pos = jnp.zeros((1, 1), jnp.int32)
    qy, ky = yarn.rotate(q, q, pos, pos)
    np.testing.assert_allclose(float(jnp.sum(qy * ky)), 8 * (0.1 * math.log(s) + 1) ** 2, rtol=1e-6)


def test_linear_scaling_is_rope_at_divided_positions():
    lin = pe_lib.make("rope_linear", head_dim=8, num_heads=1, factor=4.0)
    rope = pe_lib.make("rope", head_dim=8, num_heads=1)
    x = jax.random.normal(jax.random.key(0), (1, 6, 1, 8))
    pos = jnp.arange(0, 24, 4)[None]
    a, _ = lin.rotate(x, x, pos, pos)
    b, _ = rope.rotate(x, x, pos // 4, pos // 4)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_ntk_base_and_dynamic_scaling():
    assert ntk_base(10000.0, 4.0, 8) == pytest.approx(10000.0 * 4.0 ** (8 / 6))
    ntk = pe_lib.make("rope_ntk", head_dim=8, num_heads=1, factor=4.0)
    np.testing.assert_allclose(np.asarray(ntk.frequencies()),
                               np.asarray(rope_frequencies(8, 10000.0 * 4.0 ** (8 / 6))), rtol=1e-5)
    dyn = pe_lib.make("rope_ntk", head_dim=8, num_heads=1, factor=4.0, dynamic=True,
                      original_max_len=16)
    rope = pe_lib.make("rope", head_dim=8, num_heads=1)
    x = jax.random.normal(jax.random.key(1), (1, 16, 1, 8))
    pos = jnp.arange(16)[None]
    # within the original length the dynamic form is plain RoPE
    np.testing.assert_allclose(np.asarray(dyn.rotate(x, x, pos, pos)[0]),
                               np.asarray(rope.rotate(x, x, pos, pos)[0]), atol=1e-6)


def test_llama3_defaults_match_the_release():
    o = pe_lib.make("rope_llama3", head_dim=128, num_heads=1).options
    assert (o.base, o.factor, o.low_freq_factor, o.high_freq_factor, o.original_max_len) == \
        (500000.0, 8.0, 1.0, 4.0, 8192)
