"""Two STRINGs told apart: ``cayley_string`` (Schenck et al., arXiv 2502.02562), ``string_shift``
(An et al., arXiv 2410.18745, an inference-time shift of the relative positions) and the
deprecated alias ``string``."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.models import LanguageModel, TransformerConfig


def test_string_alias_warns_resolves_to_cayley_string_and_is_not_listed():
    assert "string" not in pe.names()
    assert {"cayley_string", "string_shift"} <= set(pe.names())
    assert pe.aliases()["string"] == "cayley_string"
    with pytest.warns(DeprecationWarning, match="'string' is deprecated, use 'cayley_string'"):
        entry = pe.info("string")
    assert entry is pe.info("cayley_string") and entry.name == "cayley_string"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        a = pe.make("string", head_dim=8, num_heads=2, init_std=0.3)
    assert any(issubclass(w.category, DeprecationWarning) for w in seen)
    b = pe.make("cayley_string", head_dim=8, num_heads=2, init_std=0.3)
    assert type(a) is type(b) and a.name == "cayley_string"
    np.testing.assert_array_equal(a.skew_param[...], b.skew_param[...])
    with pytest.raises(ValueError, match="already registered"):
        pe.register_alias("string", "rope", "again")


def test_shifted_position_matrix_golden():
    # T = 8, S = 4, W = 2: distances >= 4 are read as d - 2; the band d < 4 is kept.
    got = pe.string_shift_distances(np.arange(8), np.arange(8), shift=4, window=2)
    golden = np.array([
        [0, -1, -2, -3, -2, -3, -4, -5],
        [1, 0, -1, -2, -3, -2, -3, -4],
        [2, 1, 0, -1, -2, -3, -2, -3],
        [3, 2, 1, 0, -1, -2, -3, -2],
        [2, 3, 2, 1, 0, -1, -2, -3],
        [3, 2, 3, 2, 1, 0, -1, -2],
        [4, 3, 2, 3, 2, 1, 0, -1],
        [5, 4, 3, 2, 3, 2, 1, 0]])
    np.testing.assert_array_equal(got, golden)
    # the paper's causal range: max distance L - 1 - S + W
    L, S, W = 96, 32, 8
    lower = np.tril(pe.string_shift_distances(np.arange(L), np.arange(L), S, W))
    assert lower.max() == L - 1 - S + W and lower.min() == 0


@pytest.mark.parametrize("causal", [True, False])
def test_string_shift_logits_are_rope_at_the_shifted_distances(causal):
    d_h, heads, T, S, W = 8, 2, 12, 5, 2
    p = pe.make("string_shift", head_dim=d_h, num_heads=heads, max_len=T, causal=causal,
                shift=S, window=W)
    assert p.hooks == frozenset({"logits"}) and p.is_relative
    kq, kk = jax.random.split(jax.random.key(0))
    q = jax.random.normal(kq, (1, T, heads, d_h))
    k = jax.random.normal(kk, (1, T, heads, d_h))
    pos = jnp.arange(T)[None]
    got = np.asarray(p.logits(jnp.zeros((1, heads, T, T)), q, k, pos, pos, None))
    # NumPy: half-split RoPE, <R(i) q, R(j) k> = q^T R(j - i) k, at distance d' = shifted(i - j)
    theta = 10000.0 ** (-np.arange(d_h // 2) * 2.0 / d_h)
    D = pe.string_shift_distances(np.arange(T), np.arange(T), S, W)
    qn, kn = np.asarray(q[0], np.float64), np.asarray(k[0], np.float64)
    want = np.zeros((heads, T, T))
    for h in range(heads):
        for i in range(T):
            for j in range(T):
                if causal and j > i:
                    d = i - j  # not shifted: masked by the model anyway
                else:
                    d = D[i, j]
                a = d * theta
                q1, q2 = qn[i, h, :d_h // 2], qn[i, h, d_h // 2:]
                k1, k2 = kn[j, h, :d_h // 2], kn[j, h, d_h // 2:]
                # rotating q by d (relative to k) = <R(d) q, k>
                want[h, i, j] = (np.sum((q1 * np.cos(a) - q2 * np.sin(a)) * k1)
                                 + np.sum((q1 * np.sin(a) + q2 * np.cos(a)) * k2)) / np.sqrt(d_h)
    sel = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
    np.testing.assert_allclose(got[0][:, sel], want[:, sel], atol=2e-5)


def test_string_shift_with_a_large_shift_is_rope_in_a_model():
    kw = dict(vocab_size=17, num_layers=1, d_model=16, num_heads=2, d_ff=32, max_len=10,
              causal=True)
    rope = LanguageModel(TransformerConfig(pe="rope", **kw), rngs=nnx.Rngs(0))
    shifted = LanguageModel(TransformerConfig(pe="string_shift", pe_options={"shift": 10,
                                                                            "window": 3}, **kw),
                            rngs=nnx.Rngs(0))
    near = LanguageModel(TransformerConfig(pe="string_shift", pe_options={"shift": 4,
                                                                         "window": 1}, **kw),
                         rngs=nnx.Rngs(0))
    tokens = jax.random.randint(jax.random.key(1), (2, 10), 0, 17)
    a, b, c = rope(tokens), shifted(tokens), near(tokens)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)  # no distance >= S
    assert float(jnp.abs(a[:, :4] - c[:, :4]).max()) < 1e-5  # rows < S see only the band
    assert float(jnp.abs(a[:, 5:] - c[:, 5:]).max()) > 1e-4


def test_string_shift_bad_options_name_the_field():
    with pytest.raises(ValueError, match="window must be in"):
        pe.make("string_shift", head_dim=8, shift=4, window=5)
    with pytest.raises(ValueError, match="needs shift="):
        pe.make("string_shift", head_dim=8)
