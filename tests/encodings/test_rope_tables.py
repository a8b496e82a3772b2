"""rope_tables on traced integer positions: the gathered host table equals float64 cos/sin, and
positions outside the table (or negative, or fractional) take the computed path, never a clamped row."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from posjax.encodings.rope import rope_frequencies, rope_tables

THETA = rope_frequencies(32, 10000.0, np.float64)


def _ref(pos):
    ang = np.asarray(pos, np.float64)[..., None] * THETA
    return np.cos(ang), np.sin(ang)


@pytest.mark.parametrize("shift", [0, 100, -3, 2 ** 19])   # inside, past the end, negative, far
def test_gathered_or_computed_tables_match_float64(shift):
    pos = np.random.default_rng(0).integers(0, 64, (2, 9)).astype(np.int32) + shift
    fn = jax.jit(lambda p: rope_tables(p, THETA, table_len=64))
    cos, sin = fn(jnp.asarray(pos))
    rc, rs = _ref(pos)
    tol = 3e-7 if 0 <= shift and pos.max() < 64 else 2e-6    # a rounded float64 row vs angles
    np.testing.assert_allclose(np.asarray(cos), rc, atol=tol)
    np.testing.assert_allclose(np.asarray(sin), rs, atol=tol)


def test_fractional_positions_are_computed_not_gathered():
    pos = jnp.asarray([[0.5, 1.25, 7.75]], jnp.float32)
    cos, _ = jax.jit(lambda p: rope_tables(p, THETA, table_len=64))(pos)
    np.testing.assert_allclose(np.asarray(cos), _ref(np.asarray(pos))[0], atol=1e-6)


def test_table_len_must_be_positive():
    with pytest.raises(ValueError, match="table_len must be positive"):
        rope_tables(jnp.arange(4), THETA, table_len=0)
