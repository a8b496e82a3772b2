"""2-D PEs (sinusoidal2d, rope2d_axial, random_fixed) and the model configuration of arXiv 2406.08272."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import posjax.encodings as pe
from posjax.encodings.grid2d import apply_rope_2d, grid_coordinates, sinusoidal_2d


def test_sinusoidal_2d_matches_formula():
    d, width = 16, 4
    table = np.asarray(sinusoidal_2d(4, width, d))
    for p in range(16):
        r, c = divmod(p, width)
        for k in range(d // 4):
            w = 10000.0 ** (-2 * k / (d / 2))
            expect = [np.sin(c * w), np.cos(c * w)]
            assert table[p, 2 * k:2 * k + 2] == pytest.approx(expect, abs=1e-6)
            expect = [np.sin(r * w), np.cos(r * w)]
            assert table[p, d // 2 + 2 * k:d // 2 + 2 * k + 2] == pytest.approx(expect, abs=1e-6)


def test_sinusoidal2d_registry_and_options():
    m = pe.make("sinusoidal2d", d_model=160, max_len=16, grid_width=4)
    assert m.hook == "embed" and not m.is_relative
    np.testing.assert_allclose(m.table(jnp.arange(16)), sinusoidal_2d(4, 4, 160), atol=1e-7)
    assert pe.make("sinusoidal2d", d_model=8, max_len=16).grid_width == 4  # inferred
    x = jnp.zeros((2, 16, 8))
    np.testing.assert_allclose(m.embed(jnp.zeros((2, 16, 160)), jnp.arange(16)[None])[1],
                               sinusoidal_2d(4, 4, 160), atol=1e-7)
    with pytest.raises(ValueError, match="divisible by 4"):
        pe.make("sinusoidal2d", d_model=10, max_len=16)
    with pytest.raises(ValueError, match="grid_width"):
        pe.make("sinusoidal2d", d_model=8, max_len=12)
    with pytest.raises(ValueError, match="unknown option"):
        pe.make("sinusoidal2d", d_model=8, max_len=16, width=4)
    del x


def test_grid_coordinates():
    r, c = grid_coordinates(jnp.array([0, 3, 4, 15]), 4)
    assert r.tolist() == [0, 0, 1, 3] and c.tolist() == [0, 3, 0, 3]


def _dots(q, k, rows, cols, **kw):
    qr = apply_rope_2d(q, rows, cols, **kw)
    kr = apply_rope_2d(k, rows, cols, **kw)
    return jnp.einsum("thd,shd->hts", qr, kr)


@pytest.mark.parametrize("interleaved", [False, True])
def test_axial_rope_is_relative_in_each_axis(interleaved):
    with jax.enable_x64(True):
        key = jax.random.key(0)
        q = jax.random.normal(key, (10, 1, 16), jnp.float64)
        k = jax.random.normal(jax.random.key(1), (10, 1, 16), jnp.float64)
        rows = jnp.array([0, 1, 2, 3, 0, 2, 1, 3, 2, 0], jnp.float64)
        cols = jnp.array([0, 3, 1, 2, 2, 0, 1, 3, 3, 1], jnp.float64)
        base = _dots(q, k, rows, cols, interleaved=interleaved)
        for dr, dc in ((5, 0), (0, 7), (11, 13), (60, 40)):
            shifted = _dots(q, k, rows + dr, cols + dc, interleaved=interleaved)
            np.testing.assert_allclose(shifted, base, atol=1e-10)
        # not invariant when only one coordinate of one token moves
        moved = _dots(q, k, rows, cols.at[0].add(1.0), interleaved=interleaved)
        assert np.abs(np.asarray(moved - base)).max() > 1e-3
        # the first half sees only columns, the second only rows
        a = apply_rope_2d(q, rows, cols, interleaved=interleaved)
        b = apply_rope_2d(q, rows + 3, cols, interleaved=interleaved)
        np.testing.assert_allclose(a[..., :8], b[..., :8], atol=1e-12)
        assert np.abs(np.asarray(a[..., 8:] - b[..., 8:])).max() > 1e-3
        np.testing.assert_allclose(jnp.linalg.norm(a, axis=-1), jnp.linalg.norm(q, axis=-1), atol=1e-12)


def test_rope2d_module_uses_flat_positions():
    m = pe.make("rope2d_axial", num_heads=2, d_model=32, max_len=16, grid_width=4)
    assert m.hook == "rotate" and m.is_relative
    q = jax.random.normal(jax.random.key(0), (1, 16, 2, 16))
    p = jnp.arange(16)[None]
    qr, _ = m.rotate(q, q, p, p)
    r, c = divmod(np.arange(16), 4)
    np.testing.assert_allclose(qr, apply_rope_2d(q, jnp.asarray(r)[None], jnp.asarray(c)[None]),
                               atol=1e-6)
    with pytest.raises(ValueError, match="divisible by 4"):
        pe.make("rope2d_axial", num_heads=1, d_model=6, max_len=16)


def test_random_fixed_is_fixed_and_learned_is_exact_normal():
    m = pe.make("random_fixed", d_model=64, max_len=16, std=0.5, rngs=nnx.Rngs(3))
    assert not jax.tree.leaves(nnx.state(m, nnx.Param))
    tab = np.asarray(m.table(jnp.arange(16)))
    assert tab.shape == (16, 64) and abs(tab.std() - 0.5) < 0.05
    a = pe.make("learned", d_model=64, max_len=16, init="normal", std=0.2, rngs=nnx.Rngs(5))
    b = pe.make("learned", d_model=64, max_len=16, init="normal", std=2.0, rngs=nnx.Rngs(5))
    np.testing.assert_allclose(np.asarray(b.embedding[...]), 10 * np.asarray(a.embedding[...]),
                               rtol=1e-6)
    z = np.asarray(a.embedding[...]) / 0.2
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05


def _paper_b_config(pe_name, layers=4, **opts):
    from posjax.models import TransformerConfig

    return TransformerConfig(input_dim=5, num_layers=layers, d_model=16, num_heads=1, d_ff=64,
                             max_len=16, pe=pe_name, pe_options=opts, pre_norm=False,
                             pe_every_layer=True, mlp_trailing_activation=True, activation="gelu")


def test_paper_b_model_has_one_table_per_block_and_reads_last_token():
    from posjax.models import Classifier

    model = Classifier(_paper_b_config("learned", layers=3, init="normal", std=0.1), 4,
                       pooling="last", rngs=nnx.Rngs(0))
    t = model.transformer
    tabs = [np.asarray(t.layer_pe(i).embedding[...]) for i in range(3)]
    assert len({x.tobytes() for x in tabs}) == 3               # independent tables
    x = jax.random.normal(jax.random.key(1), (3, 16, 5))
    logits = model(x)
    assert logits.shape == (3, 4)
    # read-out = token 15: the logits equal the head applied to the last hidden state
    hidden = model.transformer(x)
    np.testing.assert_allclose(logits, model.head(hidden[:, -1]), atol=1e-6)
    grads = nnx.jit(nnx.grad(lambda m: m(x).sum()))(model)
    g = grads.transformer.pes
    assert all(float(jnp.abs(g[i].embedding[...]).sum()) > 0 for i in range(3))


@pytest.mark.parametrize("name,opts", [("sinusoidal2d", {"grid_width": 4}),
                                       ("rope2d_axial", {"grid_width": 4}),
                                       ("random_fixed", {"std": 1.0}), ("none", {})])
def test_paper_b_model_runs_with_2d_pes(name, opts):
    from posjax.models import Classifier

    model = Classifier(_paper_b_config(name, layers=2, **opts), 4, pooling="last",
                       rngs=nnx.Rngs(0))
    out = model(jnp.ones((2, 16, 5)), positions=jnp.arange(16))
    assert out.shape == (2, 4) and bool(jnp.isfinite(out).all())
