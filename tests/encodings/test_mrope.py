"""M-RoPE (Qwen2-VL, arXiv 2409.12191): equal components give RoPE, each component rotates only
its section, float64 recomputation, relative per component, norm-preserving."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.mrope import apply_mrope, mrope_sections
from posjax.encodings.rope import rope_frequencies
from _pe_checks import (assert_cache_and_packing, make, rotated_logits, shift_gap,
                        train_one_step)


def _qk(shape=(2, 7, 2, 16), seed=0):
    kq, kk = jax.random.split(jax.random.key(seed))
    return jax.random.normal(kq, shape), jax.random.normal(kk, shape)


def test_default_sections_follow_qwen2_vl():
    assert mrope_sections(64) == (16, 24, 24)
    assert mrope_sections(8) == (2, 3, 3)
    with pytest.raises(ValueError, match="sections"):
        mrope_sections(8, (1, 2, 3))


def test_equal_components_are_rope():
    q, k = _qk()
    pos = jnp.arange(7)[None] + 3
    pos3 = jnp.stack([pos] * 3, axis=-1)  # [1, 7, 3]
    for interleaved in (False, True):
        m = make("mrope", d_model=32, interleaved=interleaved)
        r = make("rope", d_model=32, interleaved=interleaved)
        want = r.rotate(q, k, pos, pos)
        for got in (m.rotate(q, k, pos, pos), m.rotate(q, k, pos3, pos3)):
            for a, b in zip(got, want):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_matches_a_float64_recomputation():
    with jax.enable_x64(True):
        x = np.asarray(jax.random.normal(jax.random.key(2), (1, 3, 1, 16), jnp.float64))
        pos = np.array([[[0, 1, 2], [4, 0, 7], [9, 5, 3]]], np.float64)  # (t, h, w)
        theta = np.asarray(rope_frequencies(16, dtype=jnp.float64))
        sections = (2, 3, 3)
        got = np.asarray(apply_mrope(jnp.asarray(x), jnp.asarray(pos), theta=jnp.asarray(theta),
                                     sections=sections))
        want = x.copy()
        comp = [0, 0, 1, 1, 1, 2, 2, 2]
        for t in range(3):
            for kk in range(8):  # half-split pairs (k, k + 8)
                ang = pos[0, t, comp[kk]] * theta[kk]
                a, b = x[0, t, 0, kk], x[0, t, 0, kk + 8]
                want[0, t, 0, kk] = a * np.cos(ang) - b * np.sin(ang)
                want[0, t, 0, kk + 8] = a * np.sin(ang) + b * np.cos(ang)
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_each_component_moves_only_its_section():
    x = jax.random.normal(jax.random.key(1), (1, 1, 1, 16))
    theta = rope_frequencies(16)
    base = apply_mrope(x, jnp.array([[[1.0, 1.0, 1.0]]]), theta=theta, sections=(2, 3, 3))
    moved = apply_mrope(x, jnp.array([[[1.0, 4.0, 1.0]]]), theta=theta, sections=(2, 3, 3))
    changed = np.abs(np.asarray(moved - base))[0, 0, 0] > 1e-7
    pairs = changed[:8] | changed[8:]
    np.testing.assert_array_equal(pairs, [False, False, True, True, True, False, False, False])


def test_relative_per_component_and_norm_preserving():
    pe = make("mrope", d_model=32)
    assert pe.is_relative and pe.hook == "rotate"
    assert shift_gap(lambda p: rotated_logits(pe, p), jnp.arange(8)) < 1e-5
    q, k = _qk((1, 5, 1, 16))
    p3 = jnp.array([[[0, 1, 2], [3, 1, 2], [3, 4, 2], [5, 5, 5], [1, 9, 0]]])
    qa, ka = pe.rotate(q, k, p3, p3)
    qb, kb = pe.rotate(q, k, p3 + jnp.array([7, -2, 11]), p3 + jnp.array([7, -2, 11]))
    np.testing.assert_allclose(np.einsum("bqhd,bkhd->hqk", qa, ka),
                               np.einsum("bqhd,bkhd->hqk", qb, kb), atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(qa, axis=-1), np.linalg.norm(q, axis=-1), rtol=1e-5)


@pytest.mark.slow  # the registry test builds every PE into a model by default
def test_trains_a_step_in_a_model():
    before, after = train_one_step("mrope")
    assert after < before


@pytest.mark.slow  # the registry-driven decoding and packing tests cover every PE by default
def test_cache_and_packing():
    assert_cache_and_packing("mrope")
