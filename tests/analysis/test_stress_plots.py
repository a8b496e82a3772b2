"""posjax.analysis.stress_plots: which figures a stress analysis writes (the heatmap needs the
dense ``[n, n]`` array; accuracy and sensitivity figures only when given)."""
import numpy as np

from posjax.analysis.stress_plots import stress_figures


def test_figures_follow_the_arrays_they_are_given(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 2))
    arrays = {"plugin": {"coords_2d": X, "eigenvalues": np.array([3.0, 1.0, 0.0, -0.1])}}
    stress = {"plugin": {"mds_low": {"raw": 0.0, "optimal": 0.0},
                         "alibi": {"raw": "not computed", "optimal": 0.2}}}
    (tmp_path / "a").mkdir()
    dense = stress_figures(str(tmp_path / "a"), {"plugin": {"D": np.abs(X[:, :1] - X[:, 0])}},
                           arrays, stress)
    assert set(dense) == {"hellinger_heatmap", "mds_2d", "spectrum", "stress_bars"}
    (tmp_path / "b").mkdir()
    sens = [{"samples_per_position": s, "debias": "none", "alibi/optimal": 0.1,
             "sinusoidal/optimal": 0.2, "rope/optimal": 0.3} for s in (100, 1000)]
    mf = stress_figures(str(tmp_path / "b"), {"plugin": {"P": np.eye(6)}},
                        {"plugin": dict(arrays["plugin"], trace=5.0)}, stress,
                        {"learned": {"params": 12, "mean": 0.8, "sd": 0.01}}, sens)
    assert set(mf) == {"mds_2d", "spectrum", "stress_bars", "accuracy_vs_params", "sensitivity"}
    assert all((tmp_path / "b" / f"{k}.png").stat().st_size > 1000 for k in mf)
