"""The stress experiment's matrix-free geometry path: which path runs, and agreement of its
stress, spectrum and parameter tables with the dense path at a small n (float64)."""
import dataclasses
import json
import os
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for `experiments`

import posjax.geometry as geo
from experiments import stress_table as st
from experiments.stress_table import experiment as driver
from posjax.analysis import stress_geometry as G
from posjax.analysis.stress_report import geometry_claims, parameters_table
from posjax.analysis.stress_tables import dense_tables, matrix_free_tables
from posjax.data.classification_corpus import ClassificationCorpus as Prepared
from posjax.geometry.stress_targets import coords_stress, stress_pair
from posjax.data.synthetic import sample_distributions, three_regime_corpus

N, V = 64, 300
SMALL = dict(num_positions=N, vocab_size=V, matrix_free_above=32, smacof_max_iter=5,
             sinusoidal_dim=32, rope_head_dim=16, alibi_scale="mean_slope", eps_alt=1e-2)


@pytest.fixture(scope="module")
def plugin_P():
    """A plug-in estimate of the three-regime corpus (noisy, so B is full rank)."""
    corpus = three_regime_corpus(N, V, seed=0)
    P, _ = sample_distributions(corpus.P, 2000, seed=1)
    return np.asarray(P, np.float64)


def test_auto_picks_dense_below_and_matrix_free_above_the_threshold():
    cfg = st.make_config("synthetic", quick=True, **SMALL)
    assert cfg.geometry_path(32) == "dense"
    assert cfg.geometry_path(33) == "matrix_free"
    assert dataclasses.replace(cfg, geometry="dense").geometry_path(64) == "dense"
    # a metric without a Gram factorisation stays dense under auto, and cannot be forced
    assert st.make_config("synthetic", quick=True, **{**SMALL, "metric": "fr_arc"}
                          ).geometry_path(64) == "dense"
    with pytest.raises(ValueError, match="Gram factorisation"):
        st.make_config("synthetic", quick=True, metric="fr_arc", geometry="matrix_free")
    with pytest.raises(ValueError, match="geometry must be"):
        st.make_config("synthetic", quick=True, geometry="sparse")
    with pytest.raises(ValueError, match="split_half"):
        st.make_config("synthetic", quick=True, geometry="matrix_free", mds_variant="split_half")


def test_cli_types_the_geometry_option(tmp_path):
    with pytest.raises(SystemExit) as e:
        st.run_cli(st.main, ["--set", "geometry=sparse", "--out", str(tmp_path)])
    msg = str(e.value)
    assert "expected one of ['auto', 'dense', 'matrix_free']" in msg and "\n" not in msg
    with pytest.raises(SystemExit) as e:
        st.run_cli(st.main, ["--set", "matrix_free_k=0", "--out", str(tmp_path)])
    assert "matrix_free_k must be >= 1" in str(e.value)


@pytest.mark.parametrize("threshold,path", [(32, "matrix_free"), (64, "dense")])
def test_geometry_variants_follow_the_path(threshold, path):
    cfg = st.make_config("synthetic", quick=True, **{**SMALL, "num_positions": N,
                                                     "matrix_free_above": threshold,
                                                     "samples_per_position": 50})
    corpus = three_regime_corpus(N, V, 50, seed=0)
    toks = np.asarray(corpus.tokens, np.int32)
    prep = Prepared(toks, np.full(len(toks), N, np.int32), None, V, np.asarray(corpus.P),
                    None, None, 2, 0, {})
    with jax.enable_x64(True):
        got, variants, info = G.geometry_variants(prep, **cfg.plan().geometry)
    assert got == path and info["n"] == N  # info["geometry"]: recorded by the driver
    if path == "dense":
        assert set(variants) == {"plugin", "split_half", "exact"}
        assert variants["plugin"]["D"].shape == (N, N)
    else:
        assert set(variants) == {"plugin", "exact"}
        assert variants["plugin"]["P"].shape == (N, V)
        assert info["split_half"].startswith("not computed at n = 64")


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def _matrix_free(P, cfg):
    return matrix_free_tables(P, G.fixed_coordinates(N, cfg.plan().encodings),
                              k=cfg.matrix_free_k, **cfg.plan().pairs, **cfg.plan().tables)


@pytest.fixture(scope="module")
def both_paths(plugin_P):
    """The dense analysis of D = hellinger_matrix(P) and the matrix-free analysis of P."""
    cfg = st.make_config("synthetic", quick=True, **SMALL)
    P = plugin_P
    with jax.enable_x64(True):
        D = np.asarray(geo.hellinger_matrix(P, metric=cfg.metric), np.float64)
        D_fr = np.asarray(geo.hellinger_matrix(P, metric="fr_arc"), np.float64)
        dense, _ = dense_tables(D, D_fr, G.fixed_distances(N, cfg.plan().encodings),
                                smacof_max_iter=cfg.smacof_max_iter, smacof_tol=None,
                                **cfg.plan().tables)
        mf, _ = _matrix_free(P, cfg)
        # MDS at k against the dense MDS at the same dimension
        ref_k = stress_pair(D, geo.dist_mds(geo.classical_mds(D, dim=mf["k"]).coords))
    return cfg, dense, mf, ref_k


def test_matrix_free_stress_rows_equal_dense_rows(both_paths, plugin_P):
    cfg, dense, mf, ref_k = both_paths
    P = plugin_P
    k = mf["k"]
    assert k == min(cfg.matrix_free_k, N - 1) and mf["geometry"] == "matrix_free"
    for key in ("mds_low", "mds_low_alt"):
        assert mf["stress"][key]["rank"] == dense["stress"][key]["rank"]
        assert mf["stress"][key]["energy_target_reached"] is True
    for key in ("mds_low", "mds_low_alt", "sinusoidal", "rope", "alibi", "nope"):
        assert mf["stress"][key]["method"] == "exact"
        for s in ("raw", "optimal"):
            assert _rel(mf["stress"][key][s], dense["stress"][key][s]) < 1e-6, (key, s)
    for s in ("raw", "optimal"):  # full-rank MDS: both are 0 up to float64 round-off
        assert abs(mf["stress"]["mds_k"][s] - ref_k[s]) <= 1e-6 * ref_k[s] + 1e-12
    # the alibi raw stress depends on the mean-slope scale: a unit-scale configuration differs
    with jax.enable_x64(True):
        unit = geo.stress_from_distributions(P, np.arange(N, dtype=float))
    assert _rel(unit, mf["stress"]["alibi"]["raw"]) > 0.1
    assert mf["stress"]["mds_smacof"]["raw"].startswith("not computed")
    assert "mds_full" not in mf["stress"] and "mds_full" in dense["stress"]


def test_matrix_free_spectrum_and_parameters_equal_dense(both_paths):
    _, dense, mf, _ = both_paths
    assert mf["spectrum"]["r_eps"]["0.01"] == dense["spectrum"]["r_eps"]["0.01"]
    assert mf["spectrum"]["r_eps"]["0.001"] == dense["spectrum"]["r_eps"]["0.001"]
    np.testing.assert_allclose(mf["spectrum"]["top_normalized"], dense["spectrum"]["top_normalized"],
                               rtol=1e-6)
    assert _rel(mf["spectrum"]["lambda1_share"], dense["spectrum"]["lambda1_share"]) < 1e-6
    np.testing.assert_allclose(mf["spectrum"]["dct_alignment"], dense["spectrum"]["dct_alignment"],
                               rtol=1e-6)
    for label, row in mf["parameters"].items():
        row = dict(row)
        assert row.pop("energy_target_reached") is True
        assert row == dense["parameters"][label]
    for key in ("erank", "sis", "negative_mass_fr_arc"):
        assert mf["spectrum"][key] == "not computed at n = 64 (matrix-free)"


def test_energy_target_beyond_k_is_reported(plugin_P):
    """With k below r_eps the rows use r = k and every table says the target was not reached."""
    cfg = st.make_config("synthetic", quick=True, **{**SMALL, "matrix_free_k": 3})
    with jax.enable_x64(True):
        mf, _ = _matrix_free(plugin_P, cfg)
    assert mf["k"] == 3 and mf["r_low"] == 3
    assert mf["stress"]["mds_low"]["energy_target_reached"] is False
    assert mf["spectrum"]["r_eps"]["0.001"] == ">3" and mf["spectrum"]["captured"] < 0.999
    assert any("not reached within k = 3" in note for note in mf["notes"])
    assert mf["parameters"]["paper_d"]["energy_target_reached"] is False
    assert "> 3 (r_ε beyond k" in str(parameters_table({"plugin": mf})[1])
    claims = geometry_claims({"plugin": mf["stress"]}, {"plugin": mf})
    low = [c for c in claims if c["claim"].startswith("low-rank MDS")]
    assert low and all(c["verdict"].startswith("inconclusive") for c in low)
    full = [c for c in claims if c["claim"].startswith("MDS stress ≈ 0")]
    assert full[0]["verdict"] == "not computed at n = 64 (matrix-free)"


def test_trained_table_stress_equal_on_both_targets(plugin_P):
    cfg = st.make_config("synthetic", quick=True, **SMALL)
    table = np.random.default_rng(0).normal(size=(N + 5, 6))
    with jax.enable_x64(True):
        D = np.asarray(geo.hellinger_matrix(plugin_P), np.float64)
        dense = G.trained_stress({"plugin": D}, table=table)["plugin"]
        mf = G.trained_stress(G.as_targets({"plugin": {"P": plugin_P}}, cfg.plan().pairs),
                              table=table)["plugin"]
        with pytest.raises(ValueError, match="not computed at n = 64"):
            G.trained_stress(G.as_targets({"plugin": {"P": plugin_P}}, cfg.plan().pairs),
                             distances=np.zeros((N, N)))
    for s in ("raw", "optimal"):
        assert _rel(mf[s], dense[s]) < 1e-6


def test_sampled_pairs_bracket_the_exact_stress(plugin_P):
    """Above stress_exact_max the rows are sampled-pair estimates whose intervals cover the
    exact values (within 2 half-widths, a margin fixed before the run); a wrong target (the
    exact value of another encoding) lies far outside."""
    cfg = st.make_config("synthetic", quick=True, **SMALL)
    cfg_s = dataclasses.replace(cfg, stress_exact_max=16, stress_pairs=4000)
    fixed = G.fixed_coordinates(N, cfg.plan().encodings)
    with jax.enable_x64(True):
        exact = coords_stress(plugin_P, list(fixed.values()), **cfg.plan().pairs)
        est = coords_stress(plugin_P, list(fixed.values()), **cfg_s.plan().pairs)
    by = dict(zip(fixed, zip(exact, est)))
    for name, (ex, es) in by.items():
        assert es["method"] == "sampled_pairs" and es["pairs"] == 4000
        for s in ("raw", "optimal"):
            lo, hi = es["ci"][s]
            h = (hi - lo) / 2
            assert abs(es[s] - ex[s]) <= 2 * h + 1e-12, (name, s)
    lo, hi = by["rope"][1]["ci"]["optimal"]
    assert not lo <= by["alibi"][0]["optimal"] <= hi


@pytest.fixture(scope="module")
def mf_run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("stress_mf"))
    cfg = st.make_config("synthetic", quick=True, num_positions=12, vocab_size=40,
                         samples_per_position=300, train_examples=32, test_examples=16,
                         model=dict(d_model=8, num_heads=2, num_layers=1, d_ff=16),
                         train=dict(batch_size=8, steps=2), seeds=1, encodings=(), sens_positions=8, sens_vocab=20,
                         sens_samples=(), matrix_free_above=8)
    return out, st.run(cfg, out, log=lambda *_: None)


def test_run_reports_the_matrix_free_path(mf_run):
    out, res = mf_run
    with open(os.path.join(out, "results.json")) as f:
        saved = json.load(f)
    g = saved["interpretation"]["geometry"]
    assert g["path"] == "matrix_free" and g["option"] == "auto" and g["matrix_free_above"] == 8
    assert set(saved["stress"]) == {"plugin", "exact"}
    rows = saved["stress"]["plugin"]
    assert {"mds_k", "mds_low", "sinusoidal", "rope", "alibi", "nope"} <= set(rows)
    assert "mds_full" not in rows
    assert rows["nope"]["raw"] == 1.0 and rows["mds_low"]["method"] == "exact"
    assert saved["spectrum"]["plugin"]["erank"] == "not computed at n = 12 (matrix-free)"
    report = open(os.path.join(out, "report.md")).read()
    assert "## Geometry path" in report and "Matrix-free (option `geometry=auto`" in report
    assert "not computed at n = 12 (matrix-free)" in report
    assert not os.path.exists(os.path.join(out, "hellinger_heatmap.png"))
    assert saved["sensitivity"]["geometry"] == "dense"  # its own n = 8 is not above 8


def test_accuracy_cell_salt_depends_on_the_path_options_only_when_matrix_free():
    a = st.make_config("synthetic", quick=True)
    b = st.make_config("synthetic", quick=True, matrix_free_above=8, matrix_free_k=5,
                       stress_pairs=10)
    # dense cells stored before these options existed keep their key
    assert a.salt() == b.salt() and "geometry" not in a.salt()
    mf_a, mf_b = a.salt(path="matrix_free"), b.salt(path="matrix_free")
    assert mf_a != mf_b and mf_a["geometry_path"] == "matrix_free"
    assert mf_a != a.salt()


SENS = dict(sens_positions=40, sens_vocab=60, sinusoidal_dim=16, rope_head_dim=8,
            sens_samples=(None, 500))


def test_sensitivity_settings_follow_the_path():
    """Above the threshold the sample-size analysis has no split-half setting and its cells are
    keyed by the matrix-free options; below it the keys are those of the dense cells."""
    dense_cfg = st.make_config("synthetic", quick=True, **SENS)
    mf_cfg = st.make_config("synthetic", quick=True, matrix_free_above=32, **SENS)
    assert dense_cfg.geometry_path(40) == "dense" and mf_cfg.geometry_path(40) == "matrix_free"

    class Keys:  # a cell store that records the keys asked for
        def __init__(self):
            self.keys = []

        def compute(self, key, fn):
            self.keys.append(key)
            return {k: {"raw": 0.5, "optimal": 0.5} for k in ("alibi", "sinusoidal", "rope")}

    def asked(cfg, matrix_free):
        store = Keys()
        spec = {**cfg.plan().sensitivity, "n": 40, "vocab": 60, "repeats": 2,
                "matrix_free": matrix_free}
        rows = driver._sensitivity(store, spec, log=lambda *_: None)
        assert [(r["samples_per_position"], r["debias"], r["repeats"]) for r in rows] == (
            [(None, "none", 1), (500, "none", 2)] + [(500, "split_half", 2)] * (not matrix_free))
        return store.keys

    dense = asked(dense_cfg, False)
    assert [(k["samples"], k["debias"], k["repeat"]) for k in dense] == [
        (None, "none", 0), (500, "none", 0), (500, "none", 1), (500, "split_half", 0),
        (500, "split_half", 1)] and all(set(k) == {"samples", "debias", "repeat"} for k in dense)
    mf = asked(mf_cfg, True)
    assert [(k["samples"], k["debias"]) for k in mf] == [(None, "none"), (500, "none"),
                                                         (500, "none")]
    assert all(k["path"] == "matrix_free" for k in mf)


@pytest.mark.slow
def test_sensitivity_cell_matrix_free_equals_dense():
    """A matrix-free sample-size cell equals the dense one at the same n."""
    dense_cfg = st.make_config("synthetic", quick=True, **SENS)
    mf_cfg = st.make_config("synthetic", quick=True, matrix_free_above=32, **SENS)
    def cell(cfg, debias, matrix_free):
        return driver._sensitivity_cell(
            cfg.sens_positions, cfg.sens_vocab, 500, debias, 0, mixing=cfg.mixing,
            alpha=cfg.alpha, data_seed=cfg.data_seed, matrix_free=matrix_free,
            encodings=cfg.plan().sensitivity["encodings"],
            pair_options=cfg.plan().pairs)

    with jax.enable_x64(True):
        d = cell(dense_cfg, "none", False)
        m = cell(mf_cfg, "none", True)
        with pytest.raises(ValueError, match="not computed at n = 40"):
            cell(mf_cfg, "split_half", True)
    assert set(d) == set(m)
    for k in d:
        for s in ("raw", "optimal"):
            assert _rel(m[k][s], d[k][s]) < 1e-6, (k, s)
