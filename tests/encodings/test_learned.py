"""Learned absolute PE (arXiv 1810.04805 / 1706.03762 Sec. 3.5) and the fixed random PE of
arXiv 2406.08272: embed adds the table row of each position; init statistics."""
import jax.numpy as jnp
import numpy as np
import pytest

from _pe_checks import make


@pytest.mark.parametrize("name", ["learned", "random_fixed"])
def test_embed_adds_the_row_of_each_position(name):
    pe = make(name, d_model=8, max_len=12)
    table = np.asarray(pe.embedding[...], np.float64)
    x = np.random.default_rng(0).standard_normal((2, 5, 8))
    pos = np.array([[0, 3, 3, 11, 7], [1, 2, 3, 4, 5]])
    got = np.asarray(pe.embed(jnp.asarray(x, jnp.float32), jnp.asarray(pos)))
    np.testing.assert_allclose(got, x + table[pos], atol=1e-6)
    with pytest.raises(ValueError):
        pe.embed(jnp.asarray(x, jnp.float32), jnp.asarray(pos) + 1)  # position 12 is past the table


def test_init_statistics():
    """learned: N(0, 0.02^2) entries (BERT); random_fixed: N(0, 1), held fixed (arXiv 2406.08272,
    the lazy baseline); sinusoidal init: the table of arXiv 1706.03762."""
    big = dict(d_model=16, max_len=16)
    learned = np.asarray(make("learned", **big).embedding[...])
    fixed = make("random_fixed", **big)
    assert abs(learned.std() - 0.02) < 0.004 and abs(np.asarray(fixed.embedding[...]).std() - 1) < 0.2
    assert type(fixed.embedding).__name__ == "Variable"  # never trained
    sin = np.asarray(make("learned", init="sinusoidal", d_model=4, max_len=3).embedding[...])
    p = np.arange(3)[:, None]
    want = np.stack([np.sin(p[:, 0]), np.cos(p[:, 0]), np.sin(p[:, 0] / 100), np.cos(p[:, 0] / 100)], 1)
    np.testing.assert_allclose(sin, want, atol=1e-6)
