"""rope_plus_abs (RoPE, arXiv 2104.09864, plus an absolute sinusoid, as in the code of arXiv
2505.13027): the block sinusoid against NumPy, the rotary part relative, the whole PE absolute.
(Split from test_rope_plus_abs_mla.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

import posjax.encodings as pe
from posjax.encodings.rope_plus_abs import RoPEPlusAbs
from posjax.models import Classifier, TransformerConfig
from _pe_checks import constant_qk_logits, forward_at

CFG = dict(vocab_size=40, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_len=24)


def test_registered_with_hooks_and_flags():
    assert pe.info("rope_plus_abs").hooks == {"embed", "rotate"}  # RoPE plus a sinusoid
    assert not pe.info("rope_plus_abs").relative
    assert "2505.13027" in pe.info("rope_plus_abs").paper


def test_rope_plus_abs_adds_the_block_sinusoid_and_rotates_relatively():
    m = pe.make("rope_plus_abs", d_model=32, num_heads=4)
    assert isinstance(m, RoPEPlusAbs) and m.options.interleaved
    pos = jnp.arange(6)
    x = jnp.zeros((2, 6, 32))
    out = np.asarray(m.embed(x, pos[None]))
    w = 10000.0 ** (-2 * np.arange(16) / 32)
    ref = np.concatenate([np.sin(pos[:, None] * w), np.cos(pos[:, None] * w)], -1)
    np.testing.assert_allclose(out[1], ref, atol=2e-6)
    # the rotate part alone is relative; the embed part makes the whole PE absolute
    base = constant_qk_logits(m, jnp.arange(8))
    np.testing.assert_allclose(constant_qk_logits(m, jnp.arange(8) + 32), base, atol=1e-5)
    np.testing.assert_allclose(m.table(pos), ref, atol=2e-6)


def test_rope_plus_abs_model_is_not_shift_invariant():
    model = Classifier(TransformerConfig(pe="rope_plus_abs", **CFG), 3, "mean", rngs=nnx.Rngs(0))
    t = jax.random.randint(jax.random.key(1), (2, 10), 0, 40)
    pos = jnp.arange(10)
    shifted, ref = forward_at(model, t, pos + 5), forward_at(model, t, pos)
    assert float(jnp.abs(shifted - ref).max()) > 1e-4
