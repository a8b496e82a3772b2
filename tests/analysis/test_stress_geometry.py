"""posjax.analysis.stress_geometry (arXiv 2604.05217): the estimator variants of a geometry
corpus, the stress of tables against them and the sample-size analysis, each held against a
NumPy transcription of Eq. (3), Eq. (4) and classical MDS."""
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from posjax.analysis import stress_geometry as G
from posjax.geometry.stress_targets import GRAM_METRICS


def _stress(D, E, optimal=False):
    """Eq. (4) without square root over the pairs i < j (optimal: at the least-squares scale)."""
    iu = np.triu_indices(len(D), 1)
    d, e = D[iu], E[iu]
    c = (d @ e) / (e @ e) if optimal else 1.0
    return ((d - c * e) ** 2).sum() / (d ** 2).sum()


def _chord(P):
    S = np.sqrt(P)
    return np.sqrt(((S[:, None] - S[None]) ** 2).sum(-1))


def _euclid(X):
    return np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))


@pytest.fixture(scope="module")
def corpus():
    """12 sequences of 5 positions over 4 words (no padding), with a known exact ``P``."""
    rng = np.random.default_rng(0)
    exact = rng.dirichlet(np.ones(4), size=5)
    toks = np.stack([[rng.choice(4, p=exact[i]) for i in range(5)] for _ in range(12)])
    return SimpleNamespace(geo_tokens=toks.astype(np.int32), geo_lengths=np.full(12, 5),
                           vocab_size=4, pad_id=None, exact_P=exact)


def test_dense_variants_are_the_chord_distances_of_the_empirical_rows(corpus):
    with jax.enable_x64(True):
        path, variants, info = G.geometry_variants(
            corpus, metric="chord", geometry="dense", estimator={"num_positions": 5})
    P = np.stack([np.bincount(corpus.geo_tokens[:, i], minlength=4) / 12 for i in range(5)])
    assert path == "dense" and set(variants) == {"plugin", "split_half", "exact"}
    np.testing.assert_allclose(variants["plugin"]["D"], _chord(P), atol=1e-12)
    np.testing.assert_allclose(variants["exact"]["D"], _chord(corpus.exact_P), atol=1e-12)
    assert info["n"] == 5 and info["N_i"] == {"min": 12.0, "median": 12.0, "max": 12.0}
    assert info["N_i_per_half"]["A"]["max"] + info["N_i_per_half"]["B"]["max"] == 12


def test_matrix_free_variants_hold_rows_and_refuse_split_half(corpus):
    with jax.enable_x64(True):
        path, variants, info = G.geometry_variants(
            corpus, metric="chord", geometry="matrix_free",
            estimator={"num_positions": 5})
        with pytest.raises(ValueError, match="split_half"):
            G.geometry_variants(corpus, metric="chord", geometry="matrix_free",
                                estimator={"num_positions": 5}, split_half_ok=False)
    assert path == "matrix_free" and set(variants) == {"plugin", "exact"}
    np.testing.assert_allclose(variants["plugin"]["P"].sum(1), 1.0)
    assert info["split_half"].startswith("not computed at n = 5")


def test_trained_and_pretrained_rows_equal_the_stress_formula():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.ones(6), size=8)
    D = _chord(P)
    table = rng.normal(size=(11, 3))
    with jax.enable_x64(True):
        got = G.trained_stress({"plugin": D}, table=table)["plugin"]
        rows = G.pretrained_stress_rows({"pretrained": table}, 2, G.as_targets({"plugin": D}),
                                        checkpoint="ckpt")["plugin"]["pretrained"]
        with pytest.raises(ValueError, match="require_n"):
            G.pretrained_stress_rows({"pretrained": table}, 5, G.as_targets({"plugin": D}),
                                     checkpoint="ckpt", required=8)
    E = _euclid(table[:8])
    assert got["raw"] == pytest.approx(_stress(D, E), rel=1e-9)
    assert got["optimal"] == pytest.approx(_stress(D, E, optimal=True), rel=1e-9)
    # rows offset:offset + n of the table against the first n positions
    assert rows["rows"] == 8 and rows["rank"] == 3 and rows["checkpoint"] == "ckpt"
    assert rows["optimal"] == pytest.approx(_stress(D, _euclid(table[2:10]), True), rel=1e-9)


def test_sensitivity_mds_rows_equal_a_numpy_classical_mds():
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.ones(9), size=7)
    with jax.enable_x64(True):
        got = G.sensitivity_stress(P, debias="none", matrix_free=False,
                                   encodings={"alibi": {}}, pair_options={"metric": "chord"})
    D = _chord(P)
    J = np.eye(7) - 1 / 7
    lam, U = np.linalg.eigh(-0.5 * J @ (D ** 2) @ J)
    X = U[:, ::-1][:, :3] * np.sqrt(np.maximum(lam[::-1][:3], 0))
    for r in (1, 2, 3):
        assert got[f"mds_r{r}"]["raw"] == pytest.approx(_stress(D, _euclid(X[:, :r])), rel=1e-7)
    # ALiBi's distances at unit scale: |i - j|
    E = np.abs(np.arange(7)[:, None] - np.arange(7)[None]).astype(float)
    assert got["alibi"]["optimal"] == pytest.approx(_stress(D, E, optimal=True), rel=1e-9)
    with pytest.raises(ValueError, match="split-half"):
        G.sensitivity_stress(P, debias="split_half", matrix_free=True, encodings={},
                             pair_options={"metric": "chord"})


def test_summarise_sensitivity_means_and_the_ordering_flags():
    def cell(a, s, r):
        return {k: {"raw": 2 * v, "optimal": v} for k, v in
                (("alibi", a), ("sinusoidal", s), ("rope", r))}

    rows = G.summarise_sensitivity({(None, "none"): [cell(0.1, 0.5, 0.55)],
                                    (100, "none"): [cell(0.6, 0.5, 0.3), cell(0.2, 0.5, 0.3)]})
    assert rows[0]["paper_ordering_holds"] and rows[0]["repeats"] == 1
    r = rows[1]
    assert r["samples_per_position"] == 100 and r["repeats"] == 2
    assert r["alibi/optimal"] == pytest.approx(0.4) and r["alibi/optimal/sd"] == pytest.approx(0.2)
    assert r["alibi/raw"] == pytest.approx(0.8)
    # 0.4 > 0.3: ALiBi not lowest; |0.5 - 0.3| > 0.25 * 0.5: sinusoidal and RoPE not close
    assert not r["alibi_lowest"] and not r["sin_rope_close"] and not r["paper_ordering_holds"]


def test_variant_tables_score_the_fixed_encodings_alike_on_both_paths():
    """The same P through the dense path (D of Eq. (3)) and the matrix-free path (rows of P,
    streamed exactly): every fixed encoding's stress is the NumPy Eq. (4) of its distances
    against the chord matrix of P, on both paths."""
    from posjax.analysis.encoding_geometry import encoding_distances

    rng = np.random.default_rng(3)
    P = rng.dirichlet(np.full(30, 0.4), size=10)
    D = _chord(P)
    encodings = {"sinusoidal": {"dim": 16}, "alibi": {}}
    tables = dict(tau=1e-6, eps=1e-3, eps_alt=1e-2, paper_d=16, model_d=8)
    with jax.enable_x64(True):
        dense, _ = G.variant_tables("dense", {"plugin": {"D": D, "D_fr": D}}, encodings,
                                    k=4, pairs={}, smacof_max_iter=5, smacof_tol=None,
                                    **tables)
        free, _ = G.variant_tables("matrix_free", {"plugin": {"P": P}}, encodings, k=4,
                                   pairs=dict(metric="chord", exact_max=100, pairs=10, seed=0),
                                   smacof_max_iter=5, smacof_tol=None, **tables)
        for name, options in encodings.items():
            E = np.asarray(encoding_distances(name, 10, **options), np.float64)
            for rows in (dense["plugin"]["stress"], free["plugin"]["stress"]):
                assert rows[name]["optimal"] == pytest.approx(_stress(D, E, True), rel=1e-8)
                assert rows[name]["raw"] == pytest.approx(_stress(D, E), rel=1e-8)
    assert dense["plugin"]["geometry"] == "dense" and "mds_k" in free["plugin"]["stress"]


def test_geometry_path_rule():
    """auto: matrix-free strictly above the threshold and only for a metric with a Gram
    factorisation ; an explicit path is taken as it is."""
    assert G.geometry_path(100, matrix_free_above=100) == "dense"
    assert G.geometry_path(101, matrix_free_above=100) == "matrix_free"
    assert G.geometry_path(101, matrix_free_above=100, metric="fr_arc") == "dense"
    for metric in GRAM_METRICS:
        assert G.geometry_path(101, matrix_free_above=100, metric=metric) == "matrix_free"
    assert G.geometry_path(10**6, "dense") == "dense"
    assert G.geometry_path(2, "matrix_free") == "matrix_free"
    with pytest.raises(ValueError, match="geometry must be auto, dense or matrix_free"):
        G.geometry_path(10, "sparse")
