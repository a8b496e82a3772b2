"""Spectral diagnostics: reference values for Toeplitz D, SIS, spectrum report."""
import jax
import numpy as np
import pytest

import posjax.geometry as geo

# Closed form, D_ij = sqrt(2 (1 - rho^|i-j|)), n = 128.
REFERENCE = {
    0.90: ([0.939, 0.967, 0.912, 0.952], 0.148, 0.891),
    0.98: ([0.993, 0.999, 0.991, 0.998], 0.417, 0.971),
}


def toeplitz_D(rho, n=128):
    i = np.arange(n)
    return np.sqrt(2 * (1 - rho ** np.abs(i[:, None] - i[None, :])))


@pytest.mark.parametrize("rho", [0.90, 0.98])
def test_toeplitz_mds_axes_align_with_dct_modes(rho):
    with jax.enable_x64(True):
        D = toeplitz_D(rho)
        res = geo.classical_mds(D, dim=4)
        corr = np.asarray(geo.dct_alignment(res.coords, m_max=4))
        dct_ref, share_ref, ramp_ref = REFERENCE[rho]
        assert np.all(corr > 0.9)
        np.testing.assert_allclose(corr, dct_ref, atol=5e-4)
        report = geo.spectrum_report(eigenvalues=res.eigenvalues)
        assert report["lambda1_share"] == pytest.approx(share_ref, abs=5e-4)
        assert float(geo.ramp_alignment(res.coords[:, 0])) == pytest.approx(ramp_ref, abs=5e-4)
        assert float(geo.shift_invariance_score(D)) == pytest.approx(1.0, abs=1e-12)


def test_shift_invariance_score_range():
    rng = np.random.default_rng(0)
    A = rng.random((10, 10))
    D = A + A.T
    np.fill_diagonal(D, 0.0)
    s = float(geo.shift_invariance_score(D))
    assert 0.0 <= s < 1.0
    # A D with one outlier position (like [CLS] at position 0) is less shift-invariant.
    T = toeplitz_D(0.9, 10)
    T2 = T.copy()
    T2[0, 1:] = T2[1:, 0] = np.sqrt(2)
    assert float(geo.shift_invariance_score(T2)) < 0.99


def test_spectrum_report_fields():
    lam = np.array([4.0, 2.0, 1.0, 1.0, 0.0, -0.5])
    rep = geo.spectrum_report(eigenvalues=lam, k=3)
    assert rep["n"] == 6 and rep["top_normalized"] == [0.5, 0.25, 0.125]
    assert rep["lambda1_share"] == 0.5 and rep["r_tau"] == 4
    assert rep["r_eps"] == {"0.001": 4, "0.01": 4}
    assert rep["negative_mass"] == pytest.approx(0.5 / 8.5)
    assert 1.0 <= rep["erank"] <= 4.0
    with pytest.raises(ValueError, match="m_max"):
        geo.dct_alignment(np.zeros((5, 2)), m_max=3)
