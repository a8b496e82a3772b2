"""Low-rank factors, parameter counts, the MDS positional-encoding module."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.geometry as geo
from posjax.encodings.mds import MDSEncoding


@pytest.mark.parametrize("n, r, full, low", [(64, 6, 49152, 4992), (128, 11, 98304, 9856),
                                              (512, 30, 393216, 38400)])
def test_param_count_matches_the_closed_form(n, r, full, low):
    assert geo.param_count(n, 768, r) == (full, low)
    assert r < geo.break_even_rank(n, 768)


def test_lift_preserves_distances_and_factors_are_orthonormal():
    X = np.random.default_rng(0).normal(size=(10, 3))
    for lift in ("pad", "random_orthonormal"):
        A, W = geo.low_rank_factors(X, 16, lift=lift, seed=1)
        assert A.shape == (10, 3) and W.shape == (16, 3)
        np.testing.assert_allclose(np.asarray(W.T @ W), np.eye(3), atol=1e-5)
        T = geo.lift_to_width(X, 16, lift=lift, seed=1)
        np.testing.assert_allclose(np.asarray(geo.pairwise_distances(T)),
                                   np.asarray(geo.pairwise_distances(jnp.asarray(X))), atol=1e-5)
    with pytest.warns(UserWarning, match="exceeds d_model"):
        A, W = geo.low_rank_factors(X, 2)
    assert A.shape == (10, 2)
    with pytest.raises(ValueError, match="lift"):
        geo.low_rank_factors(X, 16, lift="svd")


def test_mds_encoding_module():
    D = geo.hellinger_matrix(np.random.default_rng(1).dirichlet(np.ones(30), size=12))
    X = geo.classical_mds(D, dim=4).coords
    pe = MDSEncoding.create(12, 16, coords=X, rngs=nnx.Rngs(0))
    assert pe.hook == "embed" and not pe.is_relative and pe.rank == 4
    assert pe.param_count() == (12 * 16, 4 * (12 + 16))
    x = jnp.ones((2, 5, 16))
    pos = jnp.arange(3, 8)
    out = pe.embed(x, pos)
    np.testing.assert_allclose(np.asarray(out[1] - x[1]), np.asarray(pe.table(pos)), atol=1e-6)
    np.testing.assert_allclose(np.asarray(pe.full_table()[:, :4]), np.asarray(X), atol=1e-6)
    assert float(geo.stress(D, coords=pe.full_table())) < 0.2
    frozen = MDSEncoding.create(12, 16, coords=X, trainable="W", rngs=nnx.Rngs(0))
    params = jax.tree.leaves(nnx.state(frozen, nnx.Param))
    assert len(params) == 1 and params[0].shape == (16, 4)
    rand = MDSEncoding.create(12, 16, rank=3, init="random", trainable="none", rngs=nnx.Rngs(0))
    assert rand.full_table().shape == (12, 16) and not jax.tree.leaves(nnx.state(rand, nnx.Param))
    with pytest.raises(ValueError, match="positions"):
        pe.embed(x, jnp.arange(10, 15))
    with pytest.raises(ValueError, match="coords"):
        MDSEncoding.create(12, 16, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="trainable"):
        MDSEncoding.create(12, 16, coords=X, trainable="B", rngs=nnx.Rngs(0))
