"""Encoding -> distance adapters: closed forms vs tables, registry fallback, errors."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posjax.analysis.encoding_geometry as eg
import posjax.encodings as pe
import posjax.geometry as geo


def table_distances(T):
    T = np.asarray(T, np.float64)
    return np.sqrt(((T[:, None] - T[None]) ** 2).sum(-1))


def test_sinusoidal_closed_form_equals_table_distances():
    n, d = 20, 16
    i = np.arange(n)[:, None]
    w = 10000.0 ** (-2 * np.arange(d // 2) / d)
    T = np.zeros((n, d))
    T[:, 0::2], T[:, 1::2] = np.sin(i * w), np.cos(i * w)
    with jax.enable_x64(True):
        E = np.asarray(eg.encoding_distances("sinusoidal", n, dim=d))
        np.testing.assert_allclose(E, table_distances(T), atol=1e-10)
        pos = np.arange(n) * 2.0 + 3.0  # explicit, non-arange positions take the direct path
        T2 = np.zeros((n, d))
        T2[:, 0::2], T2[:, 1::2] = np.sin(pos[:, None] * w), np.cos(pos[:, None] * w)
        E2 = np.asarray(eg.dist_sinusoidal(n, d, positions=pos))
        np.testing.assert_allclose(E2, table_distances(T2), atol=1e-10)


def test_rope_kernel_is_the_orbit_distance_of_an_equal_energy_vector():
    n, dh = 16, 8
    theta = 10000.0 ** (-2 * np.arange(dh // 2) / dh)
    u = np.ones(dh) / math.sqrt(dh)
    orbit = []
    for p in range(n):
        c, s = np.cos(p * theta), np.sin(p * theta)
        a, b = u[0::2], u[1::2]
        v = np.empty(dh)
        v[0::2], v[1::2] = a * c - b * s, a * s + b * c
        orbit.append(v)
    with jax.enable_x64(True):
        E = np.asarray(eg.encoding_distances("rope", n, head_dim=dh))
        np.testing.assert_allclose(E, table_distances(np.array(orbit)), atol=1e-10)
        delta = np.subtract.outer(np.arange(n), np.arange(n))[..., None]
        K = (2 / dh) * np.cos(delta * theta).sum(-1)
        np.testing.assert_allclose(E, np.sqrt(np.maximum(2 * (1 - K), 0)), atol=1e-7)
        Er = np.asarray(eg.dist_rope(n, dh, mode="random_u", num_samples=256))
        assert np.abs(Er - E).max() < 0.1 and np.all(np.diag(Er) == 0)


def test_alibi_nope_learned_mds_bias():
    n = 12
    E = np.asarray(eg.encoding_distances("alibi", n))
    np.testing.assert_allclose(E, np.abs(np.subtract.outer(np.arange(n), np.arange(n))))
    Es = np.asarray(eg.encoding_distances("alibi", n, scale="mean_slope", num_heads=8))
    np.testing.assert_allclose(Es, E * np.mean(2.0 ** (-np.arange(1, 9))), rtol=1e-6)
    assert eg.alibi_mean_slope(12) == pytest.approx(np.mean(
        [2 ** -k for k in range(1, 9)] + [2 ** -(k + 0.5) for k in range(4)]), rel=1e-9)
    assert float(jnp.abs(eg.encoding_distances("nope", n)).max()) == 0.0
    T = np.random.default_rng(0).normal(size=(20, 5))
    np.testing.assert_allclose(np.asarray(eg.encoding_distances("learned", n, table=T)),
                               table_distances(T[:n]), atol=1e-5)
    Eln = np.asarray(geo.dist_learned(T, ln=True))
    Tn = (T - T.mean(1, keepdims=True)) / T.std(1, keepdims=True)
    np.testing.assert_allclose(Eln, table_distances(Tn), atol=1e-4)
    np.testing.assert_allclose(np.asarray(eg.encoding_distances("mds", n, coords=T[:n])),
                               table_distances(T[:n]), atol=1e-5)
    slopes = jnp.array([0.5, 0.25])
    Eb = eg.encoding_distances("bias", n, b=lambda r: -slopes[:, None, None] * jnp.abs(r))
    np.testing.assert_allclose(np.asarray(Eb), 0.375 * E, rtol=1e-6)
    lag = jnp.subtract.outer(jnp.arange(n), jnp.arange(n))
    causal = -slopes[:, None, None] * jnp.maximum(lag, 0)  # 0 on future keys
    Ec = geo.dist_bias(causal, side="lower")
    np.testing.assert_allclose(np.asarray(Ec), 0.375 * E, rtol=1e-6)


def test_registry_fallback_agrees_with_closed_forms():
    n = 24
    pairs = [
        (eg.encoding_distances("sinusoidal", n, dim=32),
         eg.encoding_distances("sinusoidal", n, d_model=32, use_registry=True)),
        (eg.encoding_distances("rope", n, head_dim=16),
         eg.encoding_distances("rope", n, head_dim=16, use_registry=True)),
        (eg.encoding_distances("alibi", n, scale="mean_slope", num_heads=4),
         eg.encoding_distances("alibi", n, num_heads=4, use_registry=True)),
        (eg.encoding_distances("nope", n), eg.encoding_distances("none", n, use_registry=True)),
    ]
    for closed, generic in pairs:
        np.testing.assert_allclose(np.asarray(generic), np.asarray(closed), atol=2e-5)
    E = eg.encoding_distances("t5", n, num_heads=2)  # any registered bias PE works
    assert E.shape == (n, n) and np.allclose(np.asarray(E), np.asarray(E).T)
    learned = eg.encoding_distances("learned", n, d_model=8)  # no table: the registry's init
    assert learned.shape == (n, n)


def test_a_pe_with_several_hooks_adds_the_distances_of_its_parts():
    # rope_plus_abs = RoPE on q, k + an absolute sinusoid: both parts count, E^2 = E_sin^2 + E_rope^2
    n, d, h = 12, 16, 2
    E = np.asarray(eg.encoding_distances("rope_plus_abs", n, d_model=d, num_heads=h))
    sin = np.asarray(eg.dist_sinusoidal(n, d, 10000.0))
    rope = np.asarray(eg.dist_rope(n, d // h, 10000.0))
    np.testing.assert_allclose(E, np.sqrt(sin ** 2 + rope ** 2), atol=2e-5)
    plain = np.asarray(eg.encoding_distances("rope", n, d_model=d, num_heads=h, use_registry=True))
    assert np.abs(E - plain).max() > 0.5  # the sinusoid is not ignored
    np.testing.assert_allclose(plain, rope, atol=2e-5)


class _AttentionOnly:
    hook = "attention"


def test_unsupported_encodings_raise_naming_the_pe():
    with pytest.raises(ValueError, match="no_such_pe"):
        eg.encoding_distances("no_such_pe", 8)
    with pytest.raises(ValueError, match="positional_attention"):
        eg.encoding_distances("positional_attention", 8, module=_AttentionOnly())
    with pytest.raises(ValueError, match="sinusoidal"):
        eg.encoding_distances("sinusoidal", 8, dim=16, bogus=1)
    with pytest.raises(ValueError, match="mode"):
        eg.dist_rope(8, 8, mode="max")
    with pytest.raises(ValueError, match="positions"):
        eg.dist_alibi(4, positions=np.arange(5))


def test_old_geometry_names_point_to_the_bridge():
    with pytest.raises(ImportError, match="posjax.analysis.encoding_geometry"):
        from posjax.geometry import encoding_distances  # noqa: F401
    with pytest.raises(ImportError, match="moved to posjax.analysis.encoding_geometry"):
        geo.encoding_coordinates  # noqa: B018


def test_geometry_does_not_import_encodings():
    import ast
    import pathlib

    root = pathlib.Path(geo.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.startswith("posjax.encodings") for n in names), path


def test_orbit_distances_average_weight_rows_in_float64():
    # Two weight rows: the mean of the two single-row orbits, each a NumPy chord sum.
    n, w = 7, np.array([1.0, 0.3, 0.05])
    c = np.array([[1.0, 0.5, 2.0], [0.0, 1.0, 1.0]])
    with jax.enable_x64(True):
        E = np.asarray(geo.orbit_distances(n, w, c))
    delta = np.arange(n)[None, :] - np.arange(n)[:, None]
    s2 = 4.0 * np.sin(delta[..., None] * w / 2.0) ** 2
    want = np.mean([np.sqrt(s2 @ row) for row in c], axis=0)
    np.testing.assert_allclose(E, want, atol=1e-13)
    with pytest.raises(ValueError, match="weights"):
        geo.orbit_distances(n, w, c[:, :2])


def test_alibi_float64_slopes_and_mean():
    for h in (1, 6, 8, 12):
        s = pe.alibi_slopes(h, dtype=np.float64)
        assert s.dtype == np.float64
        np.testing.assert_allclose(np.asarray(pe.alibi_slopes(h)), s, rtol=1e-7)
        assert pe.alibi_mean_slope(h) == float(np.mean(s))
