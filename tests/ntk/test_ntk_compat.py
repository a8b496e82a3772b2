"""The import-time adaptation of neural-tangents (described in docs/ntk.md)."""
import subprocess
import sys
import types

import jax
import jax.core
import jax.extend.core
import pytest

from ntk import _compat


def test_import_of_ntk_is_light():
    code = ("import sys, ntk; bad = [m for m in ('neural_tangents', 'jax', 'flax') "
            "if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_loads_working_module_without_tensorflow():
    nt = _compat.load_neural_tangents()
    for name in ("stax", "predict", "empirical_ntk_fn", "empirical_kernel_fn", "linearize",
                 "NtkImplementation", "monte_carlo_kernel_fn", "Kernel", "taylor_expand"):
        assert hasattr(nt, name), name
    assert nt.__version__ == _compat.versions()["neural_tangents"] != "not installed"
    assert "tensorflow" not in sys.modules
    assert "tf2jax" not in sys.modules
    assert _compat.load_neural_tangents() is nt        # applied once, cached


def test_versions_recorded():
    v = _compat.versions()
    assert v["jax"] == jax.__version__
    assert {"jax", "neural_tangents", "flax", "numpy", "jaxlib"} <= set(v)


def test_aliases_point_at_extend_core_and_nothing_is_overwritten():
    _compat.load_neural_tangents()
    for name in _compat._CORE_ALIASES:
        assert getattr(jax.core, name) is getattr(jax.extend.core, name)
    # Attributes that jax.core still has were left alone.
    assert jax.core.ShapedArray.__module__.startswith("jax")
    for name in _compat.adapted_names():
        assert name.startswith(("jax.core.", "jax.util", "jax.interpreters.ad.",
                                "neural_tangents."))


def test_strict_safe_map_and_zip():
    assert _compat._strict_zip([1, 2], "ab") == [(1, "a"), (2, "b")]
    assert _compat._strict_map(lambda a, b: a + b, [1, 2], [10, 20]) == [11, 22]
    with pytest.raises(ValueError):
        _compat._strict_zip([1, 2], [1])
    with pytest.raises(ValueError):
        _compat._strict_map(lambda a, b: a, [1, 2], [1])


def test_placeholder_primitives_are_inert():
    _compat.load_neural_tangents()
    from jax.interpreters import ad
    for name in ("zeros_like_p", "add_jaxvals_p"):
        prim = getattr(ad, name)
        if prim.name.startswith("ntk_placeholder"):
            with pytest.raises(NotImplementedError):
                prim.bind(1.0)


def test_missing_attribute_fails_loudly_naming_it(monkeypatch):
    with pytest.raises(_compat.AdaptationError, match=r"jax\.extend\.core\.Jaxpr"):
        _compat._require(types.SimpleNamespace(), "Jaxpr", "jax.extend.core")
    monkeypatch.delattr(jax.core, "Jaxpr", raising=False)
    monkeypatch.delattr(jax.extend.core, "Jaxpr")
    with pytest.raises(_compat.AdaptationError, match=r"jax\.extend\.core\.Jaxpr is missing"):
        _compat._alias_core([])
