"""Network simulation (stand-in for the fMRI data of arXiv 2406.08272)."""
import numpy as np
import pytest

from posjax.data.network_sim import NetworkSimOptions, random_masks, simulate, windows


@pytest.mark.parametrize("kind", ["grid2d", "modular"])
def test_layout_and_simulation(kind):
    o = NetworkSimOptions(layout=kind, num_nodes=16, steps=400, burn_in=50)
    sim = simulate(o, seed=0)
    w = sim["weights"]
    assert w.shape == (16, 16) and np.allclose(np.diag(w), 0) and np.allclose(w, w.T)
    assert np.max(np.abs(np.linalg.eigvals(w))) == pytest.approx(0.9)
    assert sim["activity"].shape == (400, 16) and np.isfinite(sim["activity"]).all()
    assert np.allclose(np.diag(sim["fc"]), 1.0)
    assert sorted(np.bincount(sim["modules"]).tolist()) == [4, 4, 4, 4]
    again = simulate(o, seed=0)
    np.testing.assert_array_equal(again["activity"], sim["activity"])


def test_fc_reflects_the_grid_layout():
    o = NetworkSimOptions(num_nodes=16, steps=3000)
    sim = simulate(o, seed=1)
    d = np.linalg.norm(sim["coords"][:, None] - sim["coords"][None], axis=-1)
    iu = np.triu_indices(16, 1)
    near, far = sim["fc"][iu][d[iu] <= 1.0], sim["fc"][iu][d[iu] >= 3.0]
    assert near.mean() > far.mean() + 0.05


def test_windows_and_masks():
    act = np.arange(50 * 3, dtype=float).reshape(50, 3)
    w = windows(act, 10, standardize=False)
    assert w.shape == (5, 3, 10)
    np.testing.assert_array_equal(w[1, 2], act[10:20, 2])
    m = random_masks(np.random.default_rng(0), 7, 64, 0.15)
    assert m.shape == (7, 64) and (m.sum(1) == 10).all()


def test_bad_options():
    with pytest.raises(ValueError, match="square"):
        NetworkSimOptions(num_nodes=10)
    with pytest.raises(ValueError, match="layout"):
        NetworkSimOptions(layout="ring")
    with pytest.raises(ValueError, match="fraction"):
        random_masks(np.random.default_rng(0), 1, 4, 1.5)

