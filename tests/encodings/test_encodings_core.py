"""Golden values and properties of the core positional encodings (papers cited per PE)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
enable_x64 = jax.enable_x64

import posjax.encodings as pe

CORE = ["none", "sinusoidal", "learned", "rope", "alibi", "t5"]


def test_registry_lists_core_encodings():
    assert set(CORE) <= set(pe.names())
    assert pe.names() == sorted(pe.names())


def test_sinusoidal_golden_and_formula():
    np.testing.assert_allclose(pe.sinusoidal(2, 4)[1], [0.841471, 0.540302, 0.010000, 0.999950],
                               atol=1e-6)
    with enable_x64():
        table = np.asarray(pe.sinusoidal(50, 16))
    i = np.arange(50)[:, None]
    w = 10000.0 ** (-2 * np.arange(8) / 16)
    np.testing.assert_allclose(table[:, 0::2], np.sin(i * w), atol=2e-6)
    np.testing.assert_allclose(table[:, 1::2], np.cos(i * w), atol=2e-6)


def test_sinusoidal_block_layout_is_a_permutation_of_interleaved():
    a = pe.sinusoidal_at(jnp.arange(7), 8)
    b = pe.sinusoidal_at(jnp.arange(7), 8, layout="block")
    np.testing.assert_allclose(b, jnp.concatenate([a[:, 0::2], a[:, 1::2]], -1), atol=1e-7)


@pytest.mark.parametrize("heads,expected", [
    (8, [2.0 ** -k for k in range(1, 9)]),
    (12, [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625,
          0.707107, 0.353553, 0.176777, 0.088388]),
])
def test_alibi_slopes_golden(heads, expected):
    np.testing.assert_allclose(pe.alibi_slopes(heads), expected, rtol=1e-5)


def test_alibi_slopes_16_heads_and_exp_variant():
    s = pe.alibi_slopes(16)
    assert s[0] == pytest.approx(2 ** -0.5) and s[-1] == pytest.approx(2 ** -8)
    np.testing.assert_allclose(pe.alibi_slopes(16, kind="exp"), np.exp(-np.arange(16) / 16), rtol=1e-6)


def test_alibi_bias_bidirectional_and_causal():
    q = k = jnp.arange(5)
    b = pe.alibi_bias(2, q, k)
    m = pe.alibi_slopes(2)
    expected = -np.asarray(m)[:, None, None] * np.abs(np.arange(5)[:, None] - np.arange(5)[None])
    np.testing.assert_allclose(b, expected, atol=1e-7)
    c = pe.alibi_bias(2, q, k, causal=True)
    lower = np.tril(np.ones((5, 5), bool))
    np.testing.assert_allclose(np.asarray(c)[:, lower], expected[:, lower], atol=1e-7)
    assert pe.alibi_bias(2, jnp.zeros((3, 5)), jnp.zeros((3, 5))).shape == (3, 2, 5, 5)


T5_R = [-1, 1, -7, -8, -12, -23, -127, -500, 8, 500]
T5_BIDIR = [1, 17, 7, 8, 9, 11, 15, 15, 24, 31]
T5_CAUSAL = [1, 0, 7, 8, 12, 18, 31, 31, 0, 0]


def test_t5_bucket_golden():
    r = jnp.asarray(T5_R)
    np.testing.assert_array_equal(pe.t5_bucket(r), T5_BIDIR)
    np.testing.assert_array_equal(pe.t5_bucket(r, bidirectional=False), T5_CAUSAL)


def _t5_reference(r, bidirectional=True, num_buckets=32, max_distance=128):
    """Independent scalar transcription of the T5 bucket rule (arXiv 1910.10683)."""
    b, n = num_buckets, -r
    out = 0
    if bidirectional:
        b //= 2
        out += b if n < 0 else 0
        n = abs(n)
    else:
        n = max(n, 0)
    exact = b // 2
    if n < exact:
        return out + n
    v = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (b - exact))
    return out + min(v, b - 1)


def test_t5_bucket_matches_scalar_reference_away_from_log_boundaries():
    r = np.array([x for x in range(-300, 301) if abs(x) not in (16, 32, 64, 128, 8)])
    for bidir in (True, False):
        got = np.asarray(pe.t5_bucket(jnp.asarray(r), bidirectional=bidir))
        want = [_t5_reference(int(x), bidir) for x in r]
        np.testing.assert_array_equal(got, want)


def test_rope_golden_both_conventions():
    q = jnp.zeros((1, 1, 4)).at[..., 0].set(1.0)
    np.testing.assert_allclose(pe.apply_rope(q, jnp.array([1]), interleaved=True)[0, 0],
                               [0.540302, 0.841471, 0, 0], atol=1e-6)
    np.testing.assert_allclose(pe.apply_rope(q, jnp.array([1]), interleaved=False)[0, 0],
                               [0.540302, 0, 0.841471, 0], atol=1e-6)


def test_apply_rope_default_pairing_is_the_rope_module_default():
    q = jnp.zeros((1, 1, 4)).at[..., 0].set(1.0)
    np.testing.assert_allclose(pe.apply_rope(q, jnp.array([1]))[0, 0], [0.540302, 0, 0.841471, 0],
                               atol=1e-6)  # half-split, as RoPEOptions and Llama checkpoints
    rope = pe.make("rope", head_dim=8)
    x = jax.random.normal(jax.random.key(2), (1, 5, 2, 8))
    pos = jnp.arange(5)[None]
    np.testing.assert_array_equal(np.asarray(rope.rotate(x, x, pos, pos)[0]),
                                  np.asarray(pe.apply_rope(x, pos)))


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_rope_norm_preserving_and_relative(interleaved, fraction):
    key = jax.random.key(0)
    x = jax.random.normal(key, (2, 12, 3, 16))
    pos = jnp.arange(12)
    y = pe.apply_rope(x, pos, rotary_fraction=fraction, interleaved=interleaved)
    np.testing.assert_allclose(jnp.linalg.norm(y, axis=-1), jnp.linalg.norm(x, axis=-1), rtol=1e-5)
    if fraction < 1:
        np.testing.assert_array_equal(y[..., 8:], x[..., 8:])
    q, k = x, jax.random.normal(jax.random.key(1), x.shape)
    dots = lambda s: jnp.einsum("bqhd,bkhd->bhqk",
                                pe.apply_rope(q, pos + s, rotary_fraction=fraction, interleaved=interleaved),
                                pe.apply_rope(k, pos + s, rotary_fraction=fraction, interleaved=interleaved))
    base = dots(0)
    for s in (1, 7, 48):  # up to 4x the length
        np.testing.assert_allclose(dots(s), base, atol=2e-4, rtol=1e-4)


def test_rope_relative_in_float64():
    with enable_x64():
        q = jax.random.normal(jax.random.key(0), (1, 6, 1, 8), jnp.float64)
        pos = jnp.arange(6)
        a = pe.apply_rope(q, pos, interleaved=True)
        b = pe.apply_rope(q, pos + 37, interleaved=True)
        np.testing.assert_allclose(jnp.einsum("bqhd,bkhd->qk", a, a), jnp.einsum("bqhd,bkhd->qk", b, b),
                                   atol=1e-10)


def test_partial_head_rope_leaves_other_heads_alone():
    r = pe.make("rope", head_dim=8, num_heads=4, num_rotary_heads=1)
    q = jax.random.normal(jax.random.key(0), (1, 5, 4, 8))
    q2, _ = r.rotate(q, q, jnp.arange(5), jnp.arange(5))
    np.testing.assert_array_equal(q2[:, :, 1:], q[:, :, 1:])
    assert not np.allclose(q2[:, 1:, 0], q[:, 1:, 0])


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_bias_encodings_are_shift_invariant(name):
    m = pe.make(name, num_heads=4)
    pos = jnp.arange(10)
    base = m.bias(pos, pos)
    for s in (3, 40):
        np.testing.assert_allclose(m.bias(pos + s, pos + s), base, atol=1e-6)


def test_learned_init_options():
    n = pe.make("learned", d_model=64, max_len=256, init="normal", std=0.5, rngs=None)
    assert abs(float(jnp.std(n.embedding[...])) - 0.5) < 0.02
    z = pe.make("learned", d_model=8, max_len=4, init="zeros")
    assert float(jnp.abs(z.embedding[...]).max()) == 0.0
    u = pe.make("learned", d_model=8, max_len=64, init="uniform", scale=0.1)
    assert float(jnp.abs(u.embedding[...]).max()) <= 0.1
    s = pe.make("learned", d_model=8, max_len=6, init="sinusoidal")
    np.testing.assert_allclose(s.embedding[...], pe.sinusoidal(6, 8), atol=1e-7)


@pytest.mark.parametrize("name,kwargs,match", [
    ("nonexistent", {}, "unknown positional encoding 'nonexistent'"),
    ("rope", {"head_dim": 7}, "even head_dim"),
    ("rope", {"head_dim": 8, "rotary_fraction": 0.0}, "rotary_fraction"),
    ("rope", {"head_dim": 8, "rotary_fraction": 1.5}, "rotary_fraction"),
    ("learned", {"d_model": 8, "max_len": 4, "std": -1.0}, "std must be >= 0"),
    ("learned", {"d_model": 8, "max_len": 4, "colour": "red"}, "unknown option.*'colour'"),
    ("alibi", {"num_heads": 4, "slopes": "linear"}, "slopes"),
    ("t5", {"num_heads": 4, "num_buckets": 31}, "num_buckets"),
    ("rope", {}, "needs head_dim"),
])
def test_bad_options_raise_value_error(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        pe.make(name, **kwargs)


def test_learned_table_refuses_positions_beyond_it():
    m = pe.make("learned", d_model=8, max_len=4)
    x = jnp.zeros((1, 5, 8))
    with pytest.raises(ValueError, match="sequence length 5 exceeds the 4 positions"):
        m.embed(x, jnp.arange(5))
    with pytest.raises(ValueError, match="positions span"):
        m.embed(x[:, :3], jnp.array([0, 1, 9]))
