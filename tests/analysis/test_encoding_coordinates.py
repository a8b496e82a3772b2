"""encoding_coordinates: coordinates whose distances are the fixed-encoding distances."""
import jax
import numpy as np
import pytest

import posjax.encodings as pe
import posjax.analysis.encoding_geometry as eg
import posjax.geometry as geo

N = 40
CASES = [
    ("sinusoidal", dict(dim=16)),
    ("sinusoidal", dict(d_model=10, base=100.0, freq_spacing="k/(d/2-1)")),
    ("rope", dict(head_dim=8)),
    ("rope", dict(head_dim=8, rotary_dim=4, base=500.0)),
    ("alibi", dict()),
    ("alibi", dict(scale=0.3)),
    ("alibi", dict(scale="mean_slope", num_heads=12)),
    ("nope", dict()),
]


@pytest.mark.parametrize("name,opts", CASES)
def test_coordinate_distances_equal_closed_forms(name, opts):
    with jax.enable_x64(True):
        X = eg.encoding_coordinates(name, N, **opts)
        E = np.asarray(eg.encoding_distances(name, N, **opts))
        got = np.asarray(geo.dist_mds(X))
    assert X.dtype == np.float64 and X.shape[0] == N
    np.testing.assert_allclose(got, E, rtol=0, atol=1e-12)


def test_positions_are_honoured():
    pos = np.array([0.0, 3.0, 7.5, 20.0])
    with jax.enable_x64(True):
        X = eg.encoding_coordinates("sinusoidal", 4, dim=8, positions=pos)
        E = np.asarray(eg.encoding_distances("sinusoidal", 4, dim=8, positions=pos))
        np.testing.assert_allclose(np.asarray(geo.dist_mds(X)), E, atol=1e-12)


def test_registry_encodings_match_or_are_refused():
    """Every registered PE: its coordinates reproduce the distances of the built module, or the
    PE has no coordinate form and the call says so."""
    opts = {"sinusoidal": dict(dim=16), "rope": dict(head_dim=8),
            "alibi": dict(scale="mean_slope", num_heads=2), "none": {}}
    checked = 0
    for name in pe.names():
        if name not in eg.COORDINATE_ENCODINGS:
            with pytest.raises(ValueError, match="no coordinate form"):
                eg.encoding_coordinates(name, N)
            continue
        E = np.asarray(eg.encoding_distances(name, N, use_registry=True, d_model=16,
                                              num_heads=2))
        X = eg.encoding_coordinates(name, N, **opts[name])
        np.testing.assert_allclose(np.asarray(geo.dist_mds(X)), E, atol=1e-5)
        checked += 1
    assert checked >= 3


def test_bad_options_are_value_errors():
    with pytest.raises(ValueError, match="random_u"):
        eg.encoding_coordinates("rope", N, head_dim=8, mode="random_u")
    with pytest.raises(ValueError, match="even"):
        eg.encoding_coordinates("sinusoidal", N, dim=7)
    with pytest.raises(ValueError, match="bad options"):
        eg.encoding_coordinates("alibi", N, head_dim=3)
    with pytest.raises(ValueError, match="positions"):
        eg.encoding_coordinates("alibi", N, positions=np.arange(3))
    with pytest.raises(ValueError, match="mean_slope"):
        eg.encoding_coordinates("alibi", N, scale="mean_slope")
