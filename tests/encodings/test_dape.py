"""DAPE (arXiv 2405.14722): A = QK^T + B + f(QK^T, B) with f recomputed in NumPy, the static part
is ALiBi / KERPLE, relative, causal, cache and packing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.alibi import alibi_bias
from _pe_checks import (assert_cache_and_packing, causal_outputs_ignore_the_future, make,
                        shift_gap, train_one_step)


def test_logits_are_content_plus_bias_plus_mlp():
    pe = make("dape", causal=True)
    pos = jnp.arange(5)
    b = np.asarray(pe.bias(pos, pos))
    np.testing.assert_allclose(b, np.asarray(alibi_bias(2, pos, pos, causal=True)), atol=0)
    content = np.asarray(jax.random.normal(jax.random.key(0), (1, 2, 5, 5)))
    out = np.asarray(pe.logits(jnp.asarray(content + b[None]), None, None, pos[None], pos[None], None))
    x = np.concatenate([content, np.broadcast_to(b[None], content.shape)], axis=1)
    x = np.moveaxis(x, 1, -1)
    h = x @ np.asarray(pe.mlp_in.kernel[...]) + np.asarray(pe.mlp_in.bias[...])
    h = np.where(h > 0, h, 0.01 * h)
    f = h @ np.asarray(pe.mlp_out.kernel[...]) + np.asarray(pe.mlp_out.bias[...])
    want = content + b[None] + np.moveaxis(f, -1, 1)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_kerple_base_and_relative_static_bias():
    for base in ("alibi", "kerple_log"):
        pe = make("dape", base=base, causal=True)
        assert pe.is_relative
        assert shift_gap(lambda p: pe.bias(p, p), jnp.arange(8)) < 1e-5
    with pytest.raises(ValueError, match="DAPE base"):
        make("dape", base="t5")


def test_causal_and_trains_a_step_in_a_model():
    causal_outputs_ignore_the_future("dape")
    before, after = train_one_step("dape")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("dape")
