"""posjax.analysis.stress_report (arXiv 2604.05217): the report tables as rows and the
paper's geometry claims, on hand-made tables whose verdicts are known in advance."""
import pytest

from posjax.analysis.stress_report import (fmt, geometry_claims, parameters_table,
                                           real_text_table, sensitivity_table, stress_table)


def test_fmt_switches_to_scientific_below_1e_3():
    assert [fmt(None), fmt("x"), fmt(0), fmt(0.012345), fmt(2.5e-4)] == [
        "n/a", "x", "0", "0.0123", "2.5e-04"]


def test_stress_table_orders_rows_and_brackets_sampled_intervals():
    stress = {"plugin": {"alibi": {"raw": 0.5, "optimal": 0.25},
                         "mds_low": {"raw": 1e-5, "optimal": 1e-5, "rank": 3,
                                     "ci": {"raw": [0.5e-5, 2e-5]}}},
              "exact": {"mds_low": {"raw": 0.0, "optimal": 0.0}}}
    headers, rows = stress_table(stress, ["plugin", "exact"], labels=False)
    assert headers == ["encoding", "r", "plug-in σ_raw", "plug-in σ*", "exact P σ_raw",
                       "exact P σ*"]
    assert rows == [["mds_low", "3", "1.0e-05 [5.0e-06, 2.0e-05]", "1.0e-05", "0", "0"],
                    ["alibi", "", "0.5", "0.25", "n/a", "n/a"]]


def _summary(saving, reached=None):
    p = {"n": 10, "d": 768, "r": 2, "eps": 1e-3, "nd": 7680, "r(n+d)": 1556,
         "saving": saving, "break_even_r": 9.87}
    if reached is not None:
        p["energy_target_reached"] = reached
    return {"r_full": 9, "spectrum": {"negative_mass_chord": 0.02},
            "parameters": {"paper_d": p, "paper_d_alt": dict(p, eps=1e-2)}}


def test_parameters_table_marks_bounds_when_the_energy_target_was_not_reached():
    _, rows = parameters_table({"plugin": _summary(0.9), "exact": _summary(0.9, False)})
    assert rows[0][4] == 2 and rows[0][7] == "90.0 %"
    assert rows[2][4].startswith("> 2") and rows[2][7] == "≤ 90.0 %"


@pytest.mark.parametrize("full,alibi,low,saving,want", [
    (1e-8, 0.1, 1e-3, 0.9, ["reproduced", "reproduced", "reproduced"]),
    (1e-4, 0.3, 1e-3, 0.5, ["approximately (D not Euclidean, NM = 0.02)",
                            "partly: lower, not ≤ half", "not reproduced"]),
    (1e-2, 0.7, 0.5, 0.9, ["not reproduced", "not reproduced", "not reproduced"]),
])
def test_geometry_claims_at_their_thresholds(full, alibi, low, saving, want):
    rows = {"mds_full": {"raw": full}, "mds_low": {"raw": low}, "mds_low_alt": {"raw": low},
            "alibi": {"optimal": alibi}, "sinusoidal": {"optimal": 0.5},
            "rope": {"optimal": 0.6}}
    claims = geometry_claims({"plugin": rows}, {"plugin": _summary(saving)})
    assert [c["verdict"] for c in claims[:3]] == want and len(claims) == 4
    assert claims[3]["value"] == {"r": 2, "saving": saving, "stress": low}


def test_geometry_claims_without_full_rank_or_fixed_rows():
    rows = {"mds_low": {"raw": 0.0}, "mds_low_alt": {"raw": 0.0}}
    claims = geometry_claims({"plugin": rows}, {"plugin": dict(_summary(0.9, False),
                                                               r_full="not computed")})
    assert [c["verdict"][:12] for c in claims] == ["not computed"] + ["inconclusive"] * 2


def test_sensitivity_and_real_text_tables():
    row = {"samples_per_position": 1000, "debias": "none", "mds_r1/raw": 0.3,
           "mds_r2/raw": 0.2, "mds_r3/raw": 0.1, "alibi/optimal": 0.05,
           "sinusoidal/optimal": 0.1, "rope/optimal": 0.11, "paper_ordering_holds": True}
    toy = {1000: {"mds": (0.4, 0.2, 0.2), "alibi": 0.2, "sinusoidal": 0.01, "rope": 0.02}}
    _, body = sensitivity_table([row, dict(row, debias="split_half")], toy)
    assert body[0] == ["1e+03", "none", "0.3/0.2/0.1", "0.05", "0.1", "0.11", "yes",
                       "0.4/0.2/0.2; 0.2; 0.01; 0.02"]
    assert body[1][-1] == ""  # the toy has no debiased column
    run = {"stress": {"plugin": {"pretrained": {"raw": 1.0, "optimal": 0.5},
                                 "mds_full": {"raw": 0.0, "optimal": 0.0}},
                      "split_half": {"pretrained": {"raw": 2.0, "optimal": 0.75}}},
           "spectrum": {v: {"erank": 3.0, "r_eps": {"0.001": 4, "0.01": 3}}
                        for v in ("plugin", "split_half")},
           "parameters": {v: {"model_d": {"d": 8, "saving": 0.25}}
                          for v in ("plugin", "split_half")},
           "data": {"geometry_corpus": {"windows": 7}},
           "geometry": {"info": {"n": 5, "requested_n": 6}}}
    head, body = real_text_table({"a": run})
    assert head == ["Encoding", "a plug-in", "a split-half"]
    assert body[0][1:] == ["0.5", "0.75"] and body[1][1:] == ["0", "n/a"]
    assert body[2][1:] == ["5 (6)"] * 2 and body[-1][1:] == ["d = 8: 25.0 %"] * 2


def test_stress_rows_average_trained_seeds_and_mark_missing_matrix_free_rows():
    from posjax.analysis.stress_report import stress_rows

    summary = {"n": 6, "geometry": "matrix_free", "stress": {"nope": {"raw": 1.0, "optimal": 1.0}}}
    runs = [{"plugin": {"raw": 0.2, "optimal": 0.1}}, None,
            {"plugin": {"raw": 0.4, "optimal": 0.3}}]
    rows = stress_rows(summary, {"learned": runs, "t5": [None], "mds_trained": []}, "plugin")
    assert rows["learned"]["raw"] == pytest.approx(0.3) and rows["learned"]["seeds"] == 2
    assert rows["learned"]["sd"]["optimal"] == pytest.approx(0.1)  # population sd
    assert rows["t5"]["raw"] == "not computed at n = 6 (matrix-free)"
    assert "mds_trained" not in rows and rows["nope"] == {"raw": 1.0, "optimal": 1.0}
    dense = stress_rows(dict(summary, geometry="dense"), {"t5": [None]}, "plugin")
    assert "t5" not in dense
