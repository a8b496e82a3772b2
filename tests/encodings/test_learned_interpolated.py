"""Learned PE with linear interpolation beyond the table (ViT/CLIP practice; learned table of
arXiv 1810.04805): NumPy linear resampling of the table."""
import jax.numpy as jnp
import numpy as np
from flax import nnx

import posjax.encodings as pe_lib
from posjax.encodings import interpolate_rows

from _pe_checks import make


def numpy_stretch(table, length):
    """Rows at fractional index p (n - 1) / (L - 1), linearly interpolated (np.interp per dim)."""
    n = table.shape[0]
    idx = np.arange(length) * (n - 1) / (length - 1) if length > n else np.arange(length)
    return np.stack([np.interp(idx, np.arange(n), table[:, c]) for c in range(table.shape[1])], 1)


def test_inside_the_table_it_is_the_learned_pe_and_beyond_it_stretches():
    pe = make("learned_interpolated", d_model=4, max_len=6)
    table = np.asarray(pe.embedding[...], np.float64)
    for length in (6, 11):
        got = np.asarray(pe.embed(jnp.zeros((1, length, 4)), jnp.arange(length)[None]))[0]
        np.testing.assert_allclose(got, numpy_stretch(table, length), atol=1e-6)


def test_clamp_repeats_the_last_row():
    pe = make("learned_interpolated", d_model=4, max_len=5, beyond="clamp")
    table = np.asarray(pe.embedding[...], np.float64)
    got = np.asarray(pe.embed(jnp.zeros((1, 9, 4)), jnp.arange(9)[None]))[0]
    np.testing.assert_allclose(got, table[np.minimum(np.arange(9), 4)], atol=1e-7)


def test_learned_interpolated_equals_learned_inside_and_stretches_beyond():
    li = pe_lib.make("learned_interpolated", d_model=4, max_len=5, rngs=nnx.Rngs(0))
    le = pe_lib.make("learned", d_model=4, max_len=5, rngs=nnx.Rngs(0))
    np.testing.assert_array_equal(np.asarray(li.table(jnp.arange(5))), np.asarray(le.table(jnp.arange(5))))
    table = np.asarray(li.embedding[...])
    long = np.asarray(li.table(jnp.arange(9)))  # L_new = 9: index p * 4 / 8
    np.testing.assert_allclose(long[0], table[0], atol=1e-7)
    np.testing.assert_allclose(long[8], table[4], atol=1e-7)
    np.testing.assert_allclose(long[3], 0.5 * (table[1] + table[2]), atol=1e-7)
    np.testing.assert_allclose(np.asarray(interpolate_rows(jnp.asarray(table), jnp.array([2.25]))),
                               [0.75 * table[2] + 0.25 * table[3]], atol=1e-7)
    clamp = pe_lib.make("learned_interpolated", d_model=4, max_len=5, beyond="clamp", rngs=nnx.Rngs(0))
    np.testing.assert_allclose(np.asarray(clamp.table(jnp.array([7]))), table[4:5])
