"""posjax.encodings.mds: placing MDS coordinates on model positions (arXiv 2604.05217,
Algorithm 1: the table of the MDS PE is the rank-r coordinates of the corpus positions)."""
import numpy as np
import pytest

from posjax.encodings.mds import mds_model_coords


def test_mds_coords_follow_model_positions():
    coords = np.arange(6, dtype=float).reshape(3, 2)
    table = mds_model_coords(coords, 5, offset=1, scale=2.0)
    assert table.shape == (5, 2) and table.dtype == np.float32
    # model position p holds corpus position clip(p - 1, 0, 2), scaled: [CLS] and tail nearest
    expected = 2.0 * np.array([coords[min(max(p - 1, 0), 2)] for p in range(5)])
    np.testing.assert_allclose(table, expected)
    np.testing.assert_allclose(mds_model_coords(coords, 2), coords[:2])


def test_mds_model_coords_refuses_bad_shapes():
    with pytest.raises(ValueError, match="coords"):
        mds_model_coords(np.zeros(4), 3)
    with pytest.raises(ValueError, match="max_len"):
        mds_model_coords(np.zeros((3, 2)), 0)


def test_one_class_registry_and_create_give_the_papers_table():
    """arXiv 2604.05217, Algorithm 1 (minimal parametrisation): with the "pad" lift the table
    A W^T is the rank-r coordinates X_r in the first r dims and 0 elsewhere; the registry
    (n = max_len, rows past the coordinates zero) and ``create`` build the same class."""
    import jax.numpy as jnp
    from flax import nnx

    import posjax.encodings as pe
    from posjax.encodings.mds import MDSEncoding, MDSOptions

    assert pe.info("mds").module is MDSEncoding and pe.info("mds").options is MDSOptions
    X = np.random.default_rng(0).normal(size=(6, 3))
    reg = pe.make("mds", d_model=8, max_len=9, coords=X, rank=2, rngs=nnx.Rngs(0))
    want = np.zeros((9, 8))
    want[:6, :2] = X[:, :2]
    np.testing.assert_allclose(np.asarray(reg.full_table()), want, atol=1e-6)
    direct = MDSEncoding.create(6, 8, coords=X, rank=2, rngs=nnx.Rngs(0))
    assert type(direct) is type(reg) and direct.param_count() == (6 * 8, 2 * (6 + 8))
    np.testing.assert_allclose(np.asarray(direct.embed(jnp.zeros((1, 6, 8)), jnp.arange(6))[0]),
                               want[:6], atol=1e-6)
    with pytest.raises(ValueError, match="columns"):
        pe.make("mds", d_model=8, max_len=9, coords=X, rank=4)
    with pytest.raises(AttributeError, match="merged into MDSEncoding"):
        from posjax.encodings import mds
        mds.RegisteredMDS
