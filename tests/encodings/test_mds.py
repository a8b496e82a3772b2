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
