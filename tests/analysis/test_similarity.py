"""PE similarity metrics (arXiv 2406.08272) and the network-analysis functions."""
import numpy as np
import pytest
from scipy.stats import ortho_group

from posjax.analysis import pe_similarity
from posjax.analysis.similarity import (compare_rsms, cosine_rsm, embedding_2d, modularity,
                                        pe_vs_fc, procrustes, procrustes_align, segregation)
from posjax.encodings.grid2d import sinusoidal_2d

GT = np.asarray(sinusoidal_2d(4, 4, 32), np.float64)


def test_self_similarity_is_one():
    s = pe_similarity(GT, GT)
    for k in ("rsm_cosine", "spearman", "procrustes_r2"):
        assert s[k] == pytest.approx(1.0, abs=1e-10)


def test_invariant_to_orthogonal_rotation_and_scale():
    q = ortho_group.rvs(32, random_state=0)
    s = pe_similarity(3.0 * GT @ q, GT)
    assert s["procrustes_r2"] == pytest.approx(1.0, abs=1e-10)
    assert s["rsm_cosine"] == pytest.approx(1.0, abs=1e-10)
    assert s["spearman"] == pytest.approx(1.0, abs=1e-10)


def test_procrustes_matches_scipy_disparity():
    from scipy.spatial import procrustes as sp_procrustes

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(16, 5)), rng.normal(size=(16, 5))
    assert procrustes(a, b)["r2"] == pytest.approx(1 - sp_procrustes(b, a)[2], abs=1e-10)


def test_random_table_scores_low_and_layers_average():
    rng = np.random.default_rng(1)
    rand = rng.normal(size=(3, 16, 32))
    s = pe_similarity(np.stack([GT, rand[0], rand[1]]), GT)
    assert len(s["per_layer"]) == 3
    assert s["per_layer"][0]["procrustes_r2"] == pytest.approx(1.0, abs=1e-10)
    assert s["per_layer"][1]["procrustes_r2"] < 0.5
    assert s["per_layer"][1]["spearman"] < 0.5
    assert s["procrustes_r2"] == pytest.approx(np.mean([r["procrustes_r2"] for r in s["per_layer"]]))
    with pytest.raises(ValueError, match="positions"):
        pe_similarity(rand[0][:10], GT)


def test_procrustes_onto_lower_dimensional_layout():
    rng = np.random.default_rng(2)
    coords = rng.normal(size=(20, 2))
    basis = ortho_group.rvs(8, random_state=1)[:2]          # embed 2-D into 8-D
    table = coords @ basis + 5.0
    aligned, r2 = procrustes_align(table, coords)
    assert r2 == pytest.approx(1.0, abs=1e-10)
    np.testing.assert_allclose(aligned, coords, atol=1e-8)


def test_embedding_2d_recovers_a_planar_grid():
    r, c = np.divmod(np.arange(16), 4)
    plane = np.stack([c, r], 1).astype(float)
    table = plane @ ortho_group.rvs(10, random_state=3)[:2]
    for method in ("pca", "mds"):
        xy = embedding_2d(table, method)
        assert xy.shape == (16, 2)
    assert procrustes(embedding_2d(table, "pca"), plane)["r2"] == pytest.approx(1.0, abs=1e-10)


def test_modularity_and_segregation():
    labels = np.repeat([0, 1], 4)
    block = np.where(labels[:, None] == labels[None], 1.0, 0.0)
    # two disconnected cliques: Q = 1 - sum_c (share of degree)^2 = 0.5
    assert modularity(block, labels) == pytest.approx(0.5)
    assert modularity(np.ones((8, 8)), labels) < 0.01
    sim = np.where(labels[:, None] == labels[None], 0.8, 0.2)
    assert segregation(sim, labels) == pytest.approx((0.8 - 0.2) / 0.8)
    with pytest.raises(ValueError, match="partition"):
        segregation(sim, labels[:5])


def test_pe_vs_fc_and_compare():
    rng = np.random.default_rng(4)
    t = rng.normal(size=(12, 6))
    fc = cosine_rsm(t)
    out = pe_vs_fc(t, fc)
    assert out["spearman"] == pytest.approx(1.0) and out["pearson"] == pytest.approx(1.0)
    assert compare_rsms(fc, -fc)["pearson"] == pytest.approx(-1.0)
