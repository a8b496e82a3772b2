"""Guard tests: they fail if the adapted neural-tangents silently computes wrong numbers.

Analytic kernels vs closed-form arc-cosine kernels, empirical NTK vs
an independent ``jax.jacrev`` J J^T on a posjax NNX model, analytic vs Monte Carlo with width.
"""
import os

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from ntk import kernels
from ntk._compat import load_neural_tangents
from posjax.models import Classifier, Transformer, TransformerConfig

SW, SB = 1.7, 0.4   # sigma_w, sigma_b of both Dense layers


def arccos_kernels(X: np.ndarray, sw: float, sb: float):
    """Closed-form NNGP / NTK of Dense -> Relu -> Dense in NTK parameterisation (numpy f64).

    K0 = sw^2 <x, x'> / n0 + sb^2 (= Theta0); with c = K0_xx' / sqrt(K0_xx K0_x'x'),
    theta = arccos(c): E[relu relu] = sqrt(K0_xx K0_x'x') (sin theta + (pi - theta) c) / (2 pi),
    E[relu' relu'] = (pi - theta) / (2 pi); K1 = sw^2 E[relu relu] + sb^2,
    Theta1 = K1 + sw^2 E[relu' relu'] Theta0.
    """
    X = np.asarray(X, np.float64)
    K0 = sw ** 2 * X @ X.T / X.shape[1] + sb ** 2
    d = np.sqrt(np.diag(K0))
    c = np.clip(K0 / np.outer(d, d), -1.0, 1.0)
    th = np.arccos(c)
    e_rr = np.outer(d, d) * (np.sin(th) + (np.pi - th) * c) / (2 * np.pi)
    e_dd = (np.pi - th) / (2 * np.pi)
    K1 = sw ** 2 * e_rr + sb ** 2
    return K1, K1 + sw ** 2 * e_dd * K0



def _relu_net(stax, width=1):
    return stax.serial(stax.Dense(width, W_std=SW, b_std=SB), stax.Relu(),
                       stax.Dense(1, W_std=SW, b_std=SB))


def test_analytic_relu_kernels_match_arccos_closed_form_f64():
    stax = load_neural_tangents().stax
    X = np.random.default_rng(0).normal(size=(5, 7))
    X[1] = -X[0]                   # theta = pi
    X[2] = 3.0 * X[3]              # theta = 0 (up to the bias)
    nngp_ref, ntk_ref = arccos_kernels(X, SW, SB)
    with jax.enable_x64(True):
        _, _, kernel_fn = _relu_net(stax)
        k = kernel_fn(jnp.asarray(X, jnp.float64), None, ("nngp", "ntk"))
        assert k.nngp.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(k.nngp), nngp_ref, rtol=0, atol=1e-10)
        np.testing.assert_allclose(np.asarray(k.ntk), ntk_ref, rtol=0, atol=1e-10)


def test_analytic_relu_kernels_match_closed_form_f32():
    stax = load_neural_tangents().stax
    X = np.random.default_rng(1).normal(size=(4, 3))
    nngp_ref, ntk_ref = arccos_kernels(X, SW, SB)
    _, _, kernel_fn = _relu_net(stax)
    k = kernel_fn(jnp.asarray(X, jnp.float32), None, ("nngp", "ntk"))
    scale = np.abs(ntk_ref).max()
    np.testing.assert_allclose(np.asarray(k.nngp), nngp_ref, atol=1e-5 * scale)
    np.testing.assert_allclose(np.asarray(k.ntk), ntk_ref, atol=1e-5 * scale)


@pytest.fixture(scope="module")
def classifier_kernels():
    """NT kernels (both implementations, all parameters and the PE table) and the native
    jacrev references of one small posjax Classifier with a learned PE."""
    cfg = TransformerConfig(vocab_size=11, num_layers=1, d_model=8, num_heads=2, d_ff=16,
                            max_len=5, pe="learned", pe_options={"std": 0.5})
    model = Classifier(cfg, 3, pooling="mean", rngs=nnx.Rngs(0))
    x1 = jax.random.randint(jax.random.PRNGKey(1), (2, 5), 0, 11)
    x2 = jax.random.randint(jax.random.PRNGKey(2), (2, 5), 0, 11)
    apply_fn, params = kernels.nnx_bridge(model)
    J1, J2 = kernels.native_jacobian(apply_fn, params, [x1, x2])
    # The PE block uses the PE table's columns of the same Jacobians.
    mask = jax.tree_util.tree_map_with_path(
        lambda path, leaf: jnp.full(leaf.shape, "pes" in jax.tree_util.keystr(path)), params)
    cols = jax.flatten_util.ravel_pytree(mask)[0]
    out = {(None, "native"): kernels.jac_to_ntk(J1, J2, (2, 3), (2, 3)),
           ("pes", "native"): kernels.jac_to_ntk(J1 * cols, J2 * cols, (2, 3), (2, 3))}
    # Compiled NT path (jit=True): 9 outputs per pair, below the size where jit(jacrev) breaks.
    # Both implementations on the PE table; NTK_VECTOR_PRODUCTS also on every parameter.
    for filt, impl in (("pes", "JACOBIAN_CONTRACTION"), ("pes", "NTK_VECTOR_PRODUCTS"),
                       (None, "NTK_VECTOR_PRODUCTS")):
        out[filt, impl] = kernels.empirical_ntk(model, None, x1, x2, implementation=impl,
                                                param_filter=filt, jit=True)
    return out


def _rel(a, b):
    return float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))


@pytest.mark.parametrize("case", [("pes", "JACOBIAN_CONTRACTION"), ("pes", "NTK_VECTOR_PRODUCTS"),
                                  (None, "NTK_VECTOR_PRODUCTS")])
def test_empirical_ntk_matches_native_jacrev(classifier_kernels, case):
    theta, native = classifier_kernels[case], classifier_kernels[case[0], "native"]
    assert theta.shape == native.shape == (2, 2, 3, 3)
    assert _rel(theta, native) <= 1e-5


def test_positional_ntk_matches_native_and_batching():
    cfg = TransformerConfig(vocab_size=11, num_layers=1, d_model=8, num_heads=2, d_ff=16,
                            max_len=5, pe="learned", pe_options={"std": 0.5})
    model = Transformer(cfg, rngs=nnx.Rngs(3))
    x = jax.random.randint(jax.random.PRNGKey(4), (3, 5), 0, 11)
    theta = kernels.positional_ntk(model, x, batch_size=2, jit=True)     # lax.map path
    assert theta.shape == (3, 3, 5, 5)
    apply_fn, params = kernels.nnx_bridge(model, param_filter="pes")
    native = kernels.native_ntk(apply_fn, params, x)          # [N, N, T, T, d, d]
    native = jnp.einsum("abstcc->abst", native) / cfg.d_model  # NT's normalised trace
    assert _rel(theta, native) <= 1e-5         # 3 rows in blocks of 2: padding is dropped


def test_jit_selftest_reference_is_exact():
    # The self-test's closed form agrees with eager jacrev (so its verdict is about jit only).
    x = np.random.default_rng(0).normal(size=(48, 8)).astype(np.float32)
    f = lambda z: ((z - z.mean(-1, keepdims=True)) * z.mean(-1, keepdims=True)).reshape(-1)
    n, m = 8, x.mean(-1)
    ref = np.zeros((48, n, 48, n))
    for r in range(48):
        ref[r, :, r, :] = (np.eye(n) - 1 / n) * m[r] + (x[r] - m[r])[:, None] / n
    np.testing.assert_allclose(np.asarray(jax.jacrev(f)(x)).reshape(ref.shape), ref, atol=1e-6)
    assert isinstance(kernels.jit_jacobians_reliable(), bool)


def test_eager_fallback_when_jit_jacobians_are_unreliable(monkeypatch):
    def apply_fn(p, x):
        return jnp.tanh(x @ p["w"]) @ p["v"]
    params = {"w": jnp.full((3, 4), 0.3), "v": jnp.linspace(-1, 1, 8).reshape(4, 2)}
    x = jax.random.normal(jax.random.PRNGKey(0), (4, 3))
    compiled = kernels.empirical_ntk(apply_fn, params, x, jit=True)
    monkeypatch.setattr(kernels, "jit_jacobians_reliable", lambda: False)
    with pytest.warns(RuntimeWarning, match="eagerly"):
        eager = kernels.empirical_ntk(apply_fn, params, x)
    np.testing.assert_allclose(eager, compiled, rtol=1e-5, atol=1e-7)


def test_default_path_is_right_where_jit_jacobians_break():
    # 32 x 8 = 256 outputs through a row mean broadcast back (as in LayerNorm): the size where
    # jit(jacrev) breaks on jax 0.10.2 CPU. The default (jit=None) must still be right.
    def apply_fn(p, x):
        z = x * p["s"]
        return (z - z.mean(-1, keepdims=True)) * z.mean(-1, keepdims=True)
    params = {"s": jnp.linspace(0.5, 1.5, 8)}
    x = jax.random.normal(jax.random.PRNGKey(4), (1, 32, 8))
    with pytest.warns(None if kernels.jit_jacobians_reliable() else RuntimeWarning):
        theta = kernels.empirical_ntk(apply_fn, params, x)
    native = kernels.native_ntk(apply_fn, params, x)
    assert _rel(theta, native) <= 1e-5


def test_linearize_is_the_first_order_taylor_expansion():
    nt = load_neural_tangents()
    f = lambda p, x: jnp.tanh(x @ p["w"]) @ p["v"]                    # noqa: E731
    p0 = {"w": jnp.full((3, 4), 0.3), "v": jnp.linspace(-1, 1, 8).reshape(4, 2)}
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 3))
    dp = jax.tree_util.tree_map(lambda a: 0.1 * jnp.cos(jnp.arange(a.size).reshape(a.shape)), p0)
    f_lin = nt.linearize(f, p0)
    errs = []
    for eps in (1.0, 0.5, 0.25):
        p = jax.tree_util.tree_map(lambda a, b: a + eps * b, p0, dp)
        step = jax.tree_util.tree_map(lambda b: eps * b, dp)
        _, jvp = jax.jvp(lambda q: f(q, x), (p0,), (step,))
        np.testing.assert_allclose(f_lin(p, x), f(p0, x) + jvp, rtol=1e-5, atol=1e-6)
        errs.append(float(jnp.max(jnp.abs(f_lin(p, x) - f(p, x)))))
    # The remainder is second order: halving the step quarters it.
    assert 3.0 < errs[0] / errs[1] < 5.0 and 3.0 < errs[1] / errs[2] < 5.0


def test_apply_fn_with_pytree_filter_matches_native():
    def apply_fn(p, x):
        return jnp.tanh(x @ p["a"]["w"] + p["b"]) @ p["a"]["v"]
    params = {"a": {"w": jnp.ones((3, 4)) * 0.3, "v": jnp.arange(8.0).reshape(4, 2) / 8},
              "b": jnp.linspace(-1, 1, 4)}
    x = jax.random.normal(jax.random.PRNGKey(0), (5, 3))
    theta = kernels.empirical_ntk(apply_fn, params, x, param_filter="w", jit=True)
    selected, rebuild = kernels.split_params(params, "w")
    native = kernels.native_ntk(lambda s, xx: apply_fn(rebuild(s), xx), selected, x)
    assert _rel(theta, native) <= 1e-5
    with pytest.raises(ValueError, match="selects no parameter"):
        kernels.empirical_ntk(apply_fn, params, x, param_filter="nothing")


@pytest.mark.parametrize("impl", ["AUTO", "STRUCTURED_DERIVATIVES", 0, 3])
def test_wrapper_refuses_broken_implementations(impl):
    with pytest.raises(ValueError, match="not supported"):
        kernels.resolve_implementation(impl)


def test_wrapper_defaults_to_vector_products():
    nt = load_neural_tangents()
    assert kernels.DEFAULT_IMPLEMENTATION == "NTK_VECTOR_PRODUCTS"
    assert kernels.resolve_implementation() == nt.NtkImplementation.NTK_VECTOR_PRODUCTS
    with pytest.raises(ValueError, match="unknown"):
        kernels.resolve_implementation("FASTEST")


def test_monte_carlo_ntk_converges_to_analytic_with_width():
    nt = load_neural_tangents()
    x = jax.random.normal(jax.random.PRNGKey(0), (4, 6))
    widths, errors = (64, 256, 1024), []
    for w in widths:
        init_fn, apply_fn, kernel_fn = _relu_net(nt.stax, w)
        exact = kernel_fn(x, None, "ntk")
        mc = nt.monte_carlo_kernel_fn(init_fn, apply_fn, jax.random.PRNGKey(1), n_samples=16,
                                      implementation=2, trace_axes=(-1,))(x, None, "ntk")
        errors.append(float(jnp.linalg.norm(mc - exact) / jnp.linalg.norm(exact)))
    slope = np.polyfit(np.log(widths), np.log(errors), 1)[0]
    assert slope < -0.25, (errors, slope)          # theory: -1/2


def test_infinite_attention_kernel_positional_options():
    perm = np.array([3, 0, 4, 1, 2])
    decay = lambda d: jnp.exp(-d / 4)
    with jax.enable_x64(True):
        xs = jax.random.normal(jax.random.PRNGKey(2), (3, 5, 4), jnp.float64)
        none = kernels.infinite_attention_kernel(xs, pos_emb_type="NONE")
        none_p = kernels.infinite_attention_kernel(xs, xs[:, perm], pos_emb_type="NONE")
        sum_ = kernels.infinite_attention_kernel(xs, pos_emb_type="SUM", decay_fn=decay)
        sum_p = kernels.infinite_attention_kernel(xs, xs[:, perm], pos_emb_type="SUM",
                                                  decay_fn=decay)
    for k in (none, sum_):
        for m in k.values():
            m = np.asarray(m)
            assert m.dtype == np.float64
            np.testing.assert_allclose(m, m.T, rtol=1e-12)
            assert np.linalg.eigvalsh(m).min() > -1e-12
    # Without a PE the mean-pooled attention network ignores the order of its input; with an
    # (i.i.d. or decaying) Gaussian PE it does not.
    assert _rel(none_p["ntk"], none["ntk"]) < 1e-8          # float64 tolerance
    assert _rel(none_p["nngp"], none["nngp"]) < 1e-8
    assert _rel(sum_p["ntk"], sum_["ntk"]) > 1e-3
    with pytest.raises(ValueError, match="pos_emb_type"):
        kernels.infinite_attention_kernel(xs, pos_emb_type="ROPE")


REFERENCE = np.load(os.path.join(os.path.dirname(__file__), "data", "attention_reference.npz"))
REF_CASES = {
    "none": dict(pos_emb_type="NONE"),
    "sum_decay": dict(pos_emb_type="SUM", decay_fn=lambda d: jnp.exp(-d / 4)),
    "sum_decay_values": dict(pos_emb_type="SUM", decay_fn=lambda d: jnp.exp(-d / 4), W_std=1.3,
                             b_std=0.2, val_pos_emb=True),
}


@pytest.mark.parametrize("case", sorted(REF_CASES))
def test_attention_kernel_matches_stored_native_reference(case):
    # Stored values: neural-tangents 0.6.5 imported natively on jax 0.4.30 (no adaptation),
    # made by tests/ntk/data/make_attention_reference.py.
    with jax.enable_x64(True):
        k = kernels.infinite_attention_kernel(jnp.asarray(REFERENCE["x"]), **REF_CASES[case])
    for name in ("nngp", "ntk"):
        ref = REFERENCE[f"{case}_{name}"]
        assert np.max(np.abs(np.asarray(k[name]) - ref)) <= 1e-8 * np.max(np.abs(ref))


def test_attention_monte_carlo_converges_to_analytic():
    # The readout has `w` channels (traced), so the Monte Carlo NNGP averages over them and its
    # error shrinks like w^-1/2; with one output channel it would not shrink at all.
    nt = load_neural_tangents()
    x = jax.random.normal(jax.random.PRNGKey(0), (3, 4, 3))
    decay = lambda d: jnp.exp(-d / 4)                                  # noqa: E731
    exact = kernels.infinite_attention_kernel(x, pos_emb_type="SUM", decay_fn=decay,
                                              get=("nngp",))["nngp"]
    widths, errors = (16, 64, 256), []
    for w in widths:
        layers = kernels.attention_network(pos_emb_type="SUM", decay_fn=decay, width=w)[:-1]
        init_fn, apply_fn, kernel_fn = nt.stax.serial(*layers, nt.stax.Dense(w))
        assert _rel(kernel_fn(x, None, "nngp"), exact) < 1e-6        # same analytic kernel
        mc = nt.monte_carlo_kernel_fn(init_fn, apply_fn, jax.random.PRNGKey(1), n_samples=4,
                                      trace_axes=(-1,))(x, None, "nngp")
        errors.append(float(jnp.linalg.norm(mc - exact) / jnp.linalg.norm(exact)))
    slope = np.polyfit(np.log(widths), np.log(errors), 1)[0]
    assert errors[-1] < 0.25 and slope < -0.25, (errors, slope)       # theory: -1/2
