"""The Monotonicity-Conjecture check (ntk.conjecture): its statistics recomputed from
``data["per_corpus"]`` alone by an independent NumPy transcription, the information-matched
tables, the geometries against closed forms, and its mutants (``nt:predict`` poison, the
wrong-distance premise breaker)."""
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ntk import conjecture
from ntk.conjecture import ConjectureConfig
from ntk.conjecture_corpora import make_corpus
from ntk.mutants import apply_overrides
from ntk.recording import poisoned
from ntk.sweeps import SweepConfig

TINY_CONJ = ConjectureConfig(corpora=("three_regime:linear:0", "three_regime:hard:1",
                                      "cyclic:1:0", "cyclic:2:0"),
                             positions=12, vocab=10, dim=4, random_tables=1,
                             noise_levels=(0.3, 3.0), seeds=(0, 1), bootstrap=300)
TINY = SweepConfig(conjecture=TINY_CONJ)


@pytest.fixture(scope="module")
def tiny():
    return conjecture.monotonicity_conjecture(TINY)


# --- independent NumPy transcription ---------------------------------------------------------

def np_hellinger(P):
    S = np.sqrt(P)
    return np.sqrt(np.maximum(((S[:, None] - S[None]) ** 2).sum(-1), 0.0))


def np_stress(D, X):
    """1 - (sum e D)^2 / (sum e^2 sum D^2) over i < j (= min_a sum (a e - D)^2 / sum D^2)."""
    iu = np.triu_indices(D.shape[0], 1)
    e = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))[iu]
    d = D[iu]
    return 1.0 - (e @ d) ** 2 / ((e @ e) * (d @ d))


def np_spearman(x, y):
    x, y = np.asarray(x), np.asarray(y)
    assert len(np.unique(x)) == len(x) and len(np.unique(y)) == len(y)   # no ties here
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    return np.corrcoef(rx, ry)[0, 1]


def test_headline_statistics_recomputed_from_per_corpus_alone(tiny):
    d = json.loads(json.dumps(tiny.to_dict()))["data"]         # what ntk_checks.json carries
    pcs = d["per_corpus"]
    C = len(pcs)
    n = len(pcs[0]["P"])
    assert C == 4 and {pc["family"] for pc in pcs} == {"three_regime", "cyclic"}
    line = np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)
    H = [np_hellinger(np.asarray(pc["P"])) for pc in pcs]
    idx = np.random.default_rng(d["bootstrap_seed"]).integers(0, C, size=(d["bootstrap"], C))

    def ci(v):
        m = np.asarray(v)[idx].mean(1)
        return [np.quantile(m, 0.025), np.quantile(m, 0.975)]

    lowers = []
    for r in map(str, d["ridges"]):
        rho_H, rho_line, rho_other = [], [], []
        for c, pc in enumerate(pcs):
            names = list(pc["tables"])
            X = [np.asarray(pc["tables"][m]) for m in names]
            loss = [np.mean(pc["loss"][r][m]) for m in names]
            rho_H.append(np_spearman([np_stress(H[c], x) for x in X], loss))
            rho_line.append(np_spearman([np_stress(line, x) for x in X], loss))
            rho_other.append(np.mean([np_spearman([np_stress(H[o], x) for x in X], loss)
                                      for o in range(C) if o != c]))
        got = d["statistics"][r]
        np.testing.assert_allclose(got["rho_H"], rho_H, atol=1e-12)
        np.testing.assert_allclose(got["rho_line"], rho_line, atol=1e-12)
        np.testing.assert_allclose(got["rho_other"], rho_other, atol=1e-12)
        for key, v in (("rho_H", rho_H), ("H_minus_line", np.subtract(rho_H, rho_line)),
                       ("H_minus_other", np.subtract(rho_H, rho_other))):
            np.testing.assert_allclose(got["ci"][key], ci(v), atol=1e-12)
        lowers += [got["ci"]["H_minus_line"][0], got["ci"]["H_minus_other"][0]]
        stress_vs_line = [np_stress(line, np.asarray(pc["tables"]["mds:hellinger"]))
                          for pc in pcs]
    assert tiny.statistic == pytest.approx(min(lowers), abs=1e-12)
    np.testing.assert_allclose([pc["stress_vs_line"] for pc in pcs], stress_vs_line, atol=1e-12)
    assert d["conjecture_verdict"] in ("reproduced", "not specific", "not reproduced",
                                       "inconclusive")
    assert tiny.passed == (d["conjecture_verdict"] == "reproduced")
    # the pure function alone gives the same headline
    again = conjecture.conjecture_statistics(pcs, bootstrap=d["bootstrap"],
                                             seed=d["bootstrap_seed"])
    assert again["statistic"] == tiny.statistic and again["verdict"] == d["conjecture_verdict"]


def test_statistics_reproduce_when_the_loss_is_the_hellinger_stress(tiny):
    """The verdict can be reached: a loss that is an increasing function of Hellinger stress
    (so mds:hellinger always wins) is reproduced; minus that loss is not."""
    pcs = tiny.data["per_corpus"]
    fake, flipped = [], []
    for pc in pcs:
        H = np_hellinger(np.asarray(pc["P"]))
        s = {m: np_stress(H, np.asarray(t)) for m, t in pc["tables"].items()}
        fake.append({**pc, "loss": {r: {m: [s[m]] for m in s} for r in pc["loss"]}})
        flipped.append({**pc, "loss": {r: {m: [-s[m]] for m in s} for r in pc["loss"]}})
    good = conjecture.conjecture_statistics(fake, bootstrap=300, seed=0)
    assert good["verdict"] == "reproduced" and good["statistic"] > 0
    assert all(v["winners"] == {"mds:hellinger": len(pcs)} for v in good["ridges"].values())
    bad = conjecture.conjecture_statistics(flipped, bootstrap=300, seed=0)
    assert bad["verdict"] == "not reproduced"


# --- tables and geometries -------------------------------------------------------------------

def test_tables_are_information_matched_and_mds_tables_embed_their_geometry():
    P = make_corpus("three_regime:hard:1", 12, 10, alpha=0.1, smoothing=1e-3)
    tables, ladder = conjecture.conjecture_tables(P, 4, random_tables=2, noise_levels=(0.5,))
    assert list(tables) == ["mds:hellinger", "mds:fisher_rao", "mds:euclidean",
                            "mds:logratio", "mds:jensen_shannon", "mds:line", "sinusoidal",
                            "random:0", "random:1"] and list(ladder) == ["ladder:0.5"]
    X = np.stack([*tables.values(), *ladder.values()])
    assert X.shape == (10, 12, 4)
    np.testing.assert_allclose(np.sqrt(np.mean(np.sum(X ** 2, -1), -1)), 1.0, rtol=1e-12)
    np.testing.assert_allclose(X.mean(1), 0.0, atol=1e-12)
    # three distinct rows: the Hellinger geometry is exactly 2-dimensional
    H = np_hellinger(P)
    line = np.abs(np.subtract.outer(np.arange(12), np.arange(12))).astype(float)
    assert np_stress(H, tables["mds:hellinger"]) < 1e-10
    assert np_stress(line, tables["mds:line"]) < 1e-10
    s = {m: np_stress(H, t) for m, t in tables.items()}
    assert min(s, key=s.get) == "mds:hellinger" and s["random:0"] > 0.05
    got = conjecture.optimal_stress(H, X)
    np.testing.assert_allclose(got, [np_stress(H, x) for x in X], atol=1e-12)


def test_geometries_match_closed_forms():
    P = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    fr = conjecture.geometry_distances(P, "fisher_rao")
    np.testing.assert_allclose(fr[0, 1], np.pi, atol=1e-7)       # BC = 0
    np.testing.assert_allclose(fr[0, 2], 2 * np.arccos(np.sqrt(0.5)), atol=1e-7)
    js = conjecture.geometry_distances(P, "jensen_shannon")
    np.testing.assert_allclose(js[0, 1], np.sqrt(np.log(2)), atol=1e-12)
    kl = 0.5 * (0.5 * np.log(0.5 / 0.75) + 0.5 * np.log(0.5 / 0.25)) + 0.5 * np.log(1 / 0.75)
    np.testing.assert_allclose(js[0, 2], np.sqrt(kl), atol=1e-12)
    np.testing.assert_allclose(np.diag(js), 0.0, atol=0)
    np.testing.assert_allclose(js, js.T, atol=0)
    Q = np.random.default_rng(0).dirichlet(np.ones(5), size=6)
    bc = np.sqrt(Q) @ np.sqrt(Q).T
    np.testing.assert_allclose(conjecture.geometry_distances(Q, "fisher_rao"),
                               2 * np.arccos(np.clip(bc, -1, 1)), atol=1e-6)
    np.testing.assert_allclose(conjecture.geometry_distances(Q, "hellinger"), np_hellinger(Q),
                               atol=1e-12)
    L = np.log(Q) - np.log(Q).mean(1, keepdims=True)
    np.testing.assert_allclose(conjecture.geometry_distances(Q, "logratio"),
                               np.sqrt(((L[:, None] - L[None]) ** 2).sum(-1)), atol=1e-12)
    np.testing.assert_allclose(conjecture.geometry_distances(Q, "line"),
                               np.abs(np.subtract.outer(np.arange(6), np.arange(6))))
    with pytest.raises(ValueError, match="unknown geometry"):
        conjecture.geometry_distances(Q, "cosine")


def test_spearman_of_a_constant_is_zero_not_nan():
    assert conjecture.spearman([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]) == 0.0
    assert conjecture.spearman([1.0, 2.0, 3.0], [3.0, 1.0, 2.0]) == pytest.approx(-0.5)


# --- kernel regression and bootstrap (moved from test_ntk_checks.py) ---------------------

def test_heldout_losses_match_numpy_and_the_exact_fit_floor():
    rng = np.random.default_rng(2)
    P = rng.dirichlet(np.ones(5), size=4)
    P_hat = np.stack([rng.dirichlet(np.ones(5), size=4) for _ in range(2)])
    A = rng.normal(size=(4, 4))
    K = A @ A.T + 0.5 * np.eye(4)
    got = conjecture.heldout_losses(jnp.asarray(K)[None], P, P_hat, 0.05)   # [1, 2]
    reg = 0.05 * np.trace(K) / 4
    for s in range(2):
        mean = P_hat[s].mean(0)
        yhat = mean + K @ np.linalg.solve(K + reg * np.eye(4), P_hat[s] - mean)
        ref = np.mean(np.sum((yhat - P) ** 2, 1) + 1 - np.sum(P * P, 1))
        assert got[0, s] == pytest.approx(ref, rel=1e-4)


def test_bootstrap_ci_brackets_the_mean():
    v = np.random.default_rng(0).normal(1.0, 0.1, size=20)
    lo, hi = conjecture.bootstrap_ci(v, num=500)
    assert lo < v.mean() < hi and hi - lo < 0.2


# --- configuration ---------------------------------------------------------------------------

def test_config_validation_and_corpora_near_the_line_are_refused():
    with pytest.raises(ValueError, match="family"):
        ConjectureConfig(corpora=("cyclic:1:0", "cyclic:1:1"))
    with pytest.raises(ValueError, match="stress_target"):
        ConjectureConfig(stress_target="euclidean")
    with pytest.raises(ValueError, match="family:arg:seed"):
        ConjectureConfig(corpora=("zipf:1:0", "cyclic:1:0"))
    near = dataclasses.replace(TINY_CONJ, corpora=("three_regime:linear:0",
                                                   "three_regime:linear:1",
                                                   "three_regime:linear:2", "cyclic:1:0"))
    with pytest.raises(ValueError, match="at least half"):
        conjecture.monotonicity_conjecture(SweepConfig(conjecture=near))
    full = ConjectureConfig.full()
    assert len(full.corpora) >= 10 and len(full.seeds) >= len(TINY_CONJ.seeds)
    assert conjecture.NUISANCE and "wrong_distance" in conjecture.PREMISE_BREAKERS


# --- mutants ---------------------------------------------------------------------------------

def test_wrong_distance_premise_breaker_fails(tiny):
    (overrides,) = conjecture.PREMISE_BREAKERS.values()
    res = conjecture.monotonicity_conjecture(apply_overrides(TINY, overrides))
    assert not res.passed and res.statistic < 0
    assert res.data["conjecture_verdict"] != "reproduced"
    assert res.data["stress_target"] == "shuffled_hellinger"
    assert res.statistic == pytest.approx(tiny.data["negative_control"]["statistic"], abs=1e-12)
    assert not tiny.data["negative_control"]["passed"]
    assert tiny.data["control"]["passed"]                  # noise ladder: dose-response


def test_nt_predict_poison_removes_every_association(tiny):
    """The prior mean is the same for every table, so no stress can predict the loss: every
    rho is 0 and the check cannot pass."""
    with poisoned("nt:predict"):
        res = conjecture.monotonicity_conjecture(TINY)
    assert not res.passed and res.data["conjecture_verdict"] == "inconclusive"
    assert res.statistic == 0.0
    for v in res.data["statistics"].values():
        assert v["rho_H"] == [0.0] * 4 and v["rho_line"] == [0.0] * 4
        assert v["winners"] == {"tie": 4}                  # no table is better than another
    assert tiny.data["statistics"] != res.data["statistics"]


def test_verdict_rules_across_ridges():
    up, down, mixed = [0.1, 0.5], [-0.5, -0.1], [-0.1, 0.3]
    rv = conjecture._ridge_verdict
    assert rv({"rho_H": up, "H_minus_line": up, "H_minus_other": up}, 0.6) == "reproduced"
    assert rv({"rho_H": up, "H_minus_line": up, "H_minus_other": up}, 0.5) == \
        "specific, not best"
    assert rv({"rho_H": up, "H_minus_line": mixed, "H_minus_other": up}, 0.9) == "not specific"
    assert rv({"rho_H": down, "H_minus_line": up, "H_minus_other": up}, 0.9) == "not reproduced"
    assert rv({"rho_H": mixed, "H_minus_line": up, "H_minus_other": up}, 0.9) == "inconclusive"
    ov = conjecture._overall_verdict
    assert ov(["reproduced"] * 3) == "reproduced"
    assert ov(["reproduced", "not specific", "specific, not best"]) == "not specific"
    assert ov(["reproduced", "specific, not best", "reproduced"]) == "inconclusive"
    assert ov(["not specific", "not reproduced", "reproduced"]) == "not reproduced"
    assert ov(["not specific", "inconclusive", "not specific"]) == "inconclusive"
