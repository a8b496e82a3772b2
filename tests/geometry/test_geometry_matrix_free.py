"""Matrix-free MDS and streaming stress against the dense paths and independent references."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import posjax.geometry as geo
from posjax.geometry.eigensolvers import fix_signs


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def zipf_counts(n: int, V: int, samples: int = 1000, seed: int = 0) -> np.ndarray:
    """Counts of a Zipf vocabulary whose ranks drift smoothly with the position."""
    rng = np.random.default_rng(seed)
    pos = np.arange(n)[:, None] / n
    w = np.arange(V)[None, :]
    logit = (-1.1 * np.log1p(w) + 1.5 * np.sin(2 * np.pi * (w / V + 3 * pos))
             + 0.8 * np.cos(2 * np.pi * 7 * pos * w / V))
    p = np.exp(logit)
    return rng.multinomial(samples, p / p.sum(1, keepdims=True)).astype(np.float64)


def probs(n, V, seed=0):
    C = zipf_counts(n, V, seed=seed)
    return C / C.sum(1, keepdims=True)


def svd_reference(P, k):
    """Top-k classical MDS of the chord geometry from a NumPy SVD of the centred sqrt(P)."""
    A = np.sqrt(P)
    A = A - A.mean(0)
    U, s, _ = np.linalg.svd(A, full_matrices=False)
    return s[:k] ** 2, np.asarray(fix_signs(jnp.asarray(U[:, :k]))) * s[:k]


def rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(np.asarray(b))))


@pytest.mark.parametrize("kind", ["dense", "csr"])
def test_mds_matches_svd_reference(x64, kind):
    P = probs(1024, 200)
    lam, X = svd_reference(P, 8)
    r = geo.mds_from_distributions(P if kind == "dense" else sp.csr_matrix(P), 8, seed=1)
    assert r.rank == 8 and r.coords.shape == (1024, 8) and r.negative_mass is None
    assert float(np.max(np.abs(np.asarray(r.eigenvalues) - lam) / lam)) <= 1e-8
    assert rel(r.coords, X) <= 1e-6


def test_mds_matches_dense_classical_mds_and_streamed_counts(x64):
    C = zipf_counts(640, 120, seed=2)
    P = C / C.sum(1, keepdims=True)
    ref = geo.classical_mds(geo.hellinger_matrix(P), dim=6, solver="eigh")
    r = geo.mds_from_distributions(P, 6)
    assert float(np.max(np.abs(r.eigenvalues - ref.eigenvalues[:6]) / ref.eigenvalues[:6])) <= 1e-5
    assert rel(r.coords, ref.coords) <= 1e-4
    # streamed from count blocks (never a dense P), float64 storage
    R = geo.sqrt_rows_from_counts((sp.csr_matrix(C[a:a + 100]) for a in range(0, 640, 100)),
                                  120, dtype=np.float64)
    assert R.kind == "csr" and R.n == 640
    r2 = geo.mds_from_distributions(R, 6)
    assert rel(r2.eigenvalues, r.eigenvalues) <= 1e-10 and rel(r2.coords, r.coords) <= 1e-8
    # normalised metric: B is half the chord one
    r3 = geo.mds_from_distributions(P, 6, metric="normalised")
    assert rel(r3.eigenvalues, 0.5 * np.asarray(r.eigenvalues)) <= 1e-10


def test_mds_float32_within_tolerance():
    P = probs(768, 200).astype(np.float32)
    with jax.enable_x64(True):
        lam, X = svd_reference(P.astype(np.float64), 8)
    r = geo.mds_from_distributions(P, 8)
    assert r.coords.dtype == jnp.float32
    assert float(np.max(np.abs(np.asarray(r.eigenvalues) - lam) / lam)) <= 1e-5
    assert rel(r.coords, X) <= 1e-4


def test_trace_and_topk_report(x64):
    P = probs(400, 50)
    B = np.asarray(geo.gram_from_sqrtP(np.sqrt(P)))
    tr = geo.b_trace(P)
    assert abs(tr - np.trace(B)) <= 1e-10 * np.trace(B)
    from jax.experimental import sparse as jsparse

    R = geo.sqrt_rows(jsparse.BCOO.fromdense(jnp.asarray(P)))
    assert R.kind == "csr" and abs(R.trace_b() - tr) <= 1e-10 * tr
    w = np.linalg.eigvalsh(B)[::-1]
    rep = geo.topk_spectrum_report(w[:10], tr, eps=(0.5, 1e-9))
    assert rep["captured"] == pytest.approx(w[:10].sum() / w[w > 0].sum(), rel=1e-9)
    assert rep["lambda1_share"] == pytest.approx(w[0] / tr)
    expected = int(np.searchsorted(np.cumsum(w) / tr, 0.5) + 1)
    assert rep["r_eps"]["0.5"] == expected and rep["r_eps"]["1e-09"] == ">10"


def test_bad_input_raises():
    P = probs(50, 20)
    with pytest.raises(ValueError, match="Gram factorisation"):
        geo.mds_from_distributions(P, 3, metric="fisher_rao")
    with pytest.raises(ValueError, match="k must be"):
        geo.mds_from_distributions(P, 50)
    with pytest.raises(ValueError, match="negative"):
        geo.sqrt_rows_from_counts([-np.ones((2, 20))], 20)
    with pytest.raises(ValueError, match="all-zero rows"):
        geo.sqrt_rows_from_counts([np.zeros((2, 20))], 20)
    with pytest.raises(ValueError, match="sum to one"):
        geo.mds_from_distributions(sp.csr_matrix(2 * P), 3)
    with pytest.raises(ValueError, match="scale"):
        geo.stress_from_distributions(P, np.zeros((50, 2)), scale="max")
    with pytest.raises(ValueError, match="rows"):
        geo.stress_from_distributions(P, np.zeros((49, 2)))


@pytest.mark.parametrize("scale", ["raw", "optimal"])
@pytest.mark.parametrize("metric", ["chord", "fisher_rao"])
def test_exact_stress_matches_dense_float64(x64, scale, metric):
    P = probs(333, 90)
    rng = np.random.default_rng(1)
    D = geo.hellinger_matrix(P, metric=metric)
    for coords in (0.2 * rng.standard_normal((333, 3)), 0.05 * rng.standard_normal((333, 40)),
                   np.arange(333) * 2e-3):
        ref = float(geo.stress(D, coords=coords, scale=scale))
        for inp in (P, sp.csr_matrix(P)):
            got = geo.stress_from_distributions(inp, coords, scale=scale, metric=metric,
                                                block_size=50)
            assert abs(got - ref) <= 1e-6 * ref


def test_both_scales_in_one_pass_equal_separate_calls(x64):
    P = probs(120, 40)
    rng = np.random.default_rng(3)
    coords = [0.2 * rng.standard_normal((120, 3)), np.arange(120) * 2e-3]
    D = geo.hellinger_matrix(P)
    for pairs in (None, 500):
        both = geo.stress_from_distributions(P, coords, scale=("raw", "optimal"), pairs=pairs,
                                             seed=4, block_size=32)
        assert len(both) == 2 and all(sorted(b) == ["optimal", "raw"] for b in both)
        for s in ("raw", "optimal"):
            alone = geo.stress_from_distributions(P, coords, scale=s, pairs=pairs, seed=4,
                                                  block_size=32)
            assert [b[s] for b in both] == alone  # the same sums, bit for bit
            if pairs is None:  # and the dense value (the two scales differ, so no mix-up)
                refs = [float(geo.stress(D, coords=c, scale=s)) for c in coords]
                assert np.allclose([b[s] for b in both], refs, rtol=1e-6, atol=0)
    assert both[0]["raw"].value != both[0]["optimal"].value
    with pytest.raises(ValueError, match="empty"):
        geo.stress_from_distributions(P, coords[0], scale=())
    with pytest.raises(ValueError, match="scale must be"):
        geo.stress_from_distributions(P, coords[0], scale=("raw", "best"))


def test_exact_stress_matches_dense_float32():
    P = probs(300, 80).astype(np.float32)
    X = (0.2 * np.random.default_rng(2).standard_normal((300, 4))).astype(np.float32)
    D = geo.hellinger_matrix(P)
    for scale in ("raw", "optimal"):
        ref = float(geo.stress(D, coords=X, scale=scale))
        got = geo.stress_from_distributions(P, X, scale=scale)
        assert abs(got - ref) <= 1e-4 * ref
    # the MDS configuration of the geometry has a smaller stress than a random one
    mds = geo.mds_from_distributions(P, 4)
    both = geo.stress_from_distributions(P, [mds.coords, X], block_size=70)
    assert both == pytest.approx([geo.stress_from_distributions(P, mds.coords),
                                  geo.stress_from_distributions(P, X)], rel=1e-5)
    assert both[0] < both[1]
    est = geo.stress_from_distributions(P, [mds.coords, X], pairs=5000, seed=4)
    assert est[1] == geo.stress_from_distributions(P, X, pairs=5000, seed=4)


def test_sampled_ci_coverage_vmapped(x64):
    """95 % intervals of the sampled estimate cover the exact value in about 95 % of 400
    samples (binomial sd 1.1 %: accept [0.92, 0.98]); intervals a quarter as wide do not
    (negative control: coverage < 0.6)."""
    n, M, seeds = 200, 2000, 400
    P = probs(n, 60)
    D = np.asarray(geo.hellinger_matrix(P))
    X = np.asarray(geo.mds_from_distributions(P, 2).coords) * 1.3
    E = np.asarray(geo.pairwise_distances(jnp.asarray(X)))
    for scale in ("raw", "optimal"):
        exact = float(geo.stress(D, coords=X, scale=scale))

        def one(key):
            i, j = geo.sample_pairs(key, n, M)
            return geo.pair_stress_estimate(jnp.asarray(D)[i, j], jnp.asarray(E)[i, j], scale)

        est, se = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), seeds))
        cover = np.mean(np.abs(np.asarray(est) - exact) <= 1.959964 * np.asarray(se))
        narrow = np.mean(np.abs(np.asarray(est) - exact) <= 0.49 * np.asarray(se))
        assert 0.92 <= cover <= 0.98, (scale, cover)
        assert narrow < 0.6
    # the public entry point: the same estimator with distances computed from sqrt(P)
    e = geo.stress_from_distributions(P, X, pairs=20000, seed=3)
    assert e.num_pairs == 20000 and e.ci_low < e.value < e.ci_high
    assert abs(e.value - float(geo.stress(D, coords=X))) <= 4 * e.half_width


def test_sample_pairs_uniform_distinct():
    i, j = geo.sample_pairs(jax.random.key(0), 5, 200000)
    i, j = np.asarray(i), np.asarray(j)
    assert np.all(i != j) and i.min() >= 0 and max(i.max(), j.max()) == 4
    freq = np.bincount(np.minimum(i, j) * 5 + np.maximum(i, j), minlength=25)
    freq = freq[freq > 0] / i.size
    assert freq.size == 10 and np.max(np.abs(freq - 0.1)) < 0.005


@pytest.mark.slow
def test_mds_equals_dense_path_at_4096(x64):
    P = probs(4096, 1000, seed=5)
    ref = geo.classical_mds(geo.gram_from_sqrtP(np.sqrt(P)), gram=True, dim=16, solver="eigh")
    for inp in (P, sp.csr_matrix(P)):
        r = geo.mds_from_distributions(inp, 16)
        lam = np.asarray(ref.eigenvalues[:16])
        assert float(np.max(np.abs(np.asarray(r.eigenvalues) - lam) / lam)) <= 1e-5
        assert rel(r.coords, ref.coords) <= 1e-4
