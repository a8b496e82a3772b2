"""Reliability v3: corpora, LM targets, decoding, packing, generation and hyper-parameters never
give a wrong value without an error (one test per item, named after it)."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.training import TrainConfig, train_ensemble

import _tiny


# --- R7: finite hyper-parameters ------------------------------------------------------------
@pytest.mark.parametrize("field", ["learning_rate", "weight_decay", "b1", "b2", "eps",
                                   "momentum", "warmup_fraction", "grad_clip"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_r7_train_config_refuses_non_finite(field, bad):
    with pytest.raises(ValueError, match=f"TrainConfig.{field} must be finite"):
        TrainConfig(**{field: bad})


def test_r7_ensemble_member_hyperparameters_finite_and_keys_known():
    tiny = lambda: nnx.Linear(2, 2, rngs=nnx.Rngs(0))  # built before any step runs

    def ensemble(members):
        return train_ensemble(lambda m: tiny(), _tiny.classification_loss,
                              _tiny.BATCHES, _tiny.config(), members=members)

    with pytest.raises(ValueError, match=r"member 1 .*learning_rate must be finite, got nan"):
        ensemble([{"seed": 0}, {"seed": 1, "learning_rate": math.nan}])
    with pytest.raises(ValueError, match=r"member 0 .*weight_decay must be finite, got inf"):
        ensemble([{"weight_decay": math.inf}])
    with pytest.raises(ValueError, match=r"keys \['lr'\] are never read by make_model"):
        ensemble([{"seed": 0, "lr": 0.1}, {"seed": 1, "lr": 0.01}])
    # a key make_model reads is accepted (and builds before any step runs)
    read = []
    with pytest.raises(ValueError, match="sentinel"):
        train_ensemble(lambda m: read.append(m["std"]) or tiny(), _tiny.classification_loss,
                       lambda s: (_ for _ in ()).throw(ValueError("sentinel")), _tiny.config(),
                       members=[{"std": 0.1}, {"std": 0.2}])
    assert read == [0.1, 0.2]


# --- R2: LM targets: -100 ignored, anything else outside [0, V) an error or a NaN row --------
def _lm(chunked, vocab=16, causal=True, **kw):
    from posjax.models import LanguageModel, TransformerConfig
    cfg = TransformerConfig(vocab_size=vocab, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=16, causal=causal, chunked_lm_loss=chunked, **kw)
    return LanguageModel(cfg, rngs=nnx.Rngs(0))


def test_r2_lm_targets_ignore_index_and_out_of_range():
    from posjax.input_checks import collect, first_error, stack_rows
    from posjax.training.chunked_ce import IGNORE_INDEX

    rng = np.random.default_rng(0)
    tok = jnp.asarray(rng.integers(0, 16, (2, 6)), jnp.int32)
    tgt = jnp.asarray(rng.integers(0, 16, (2, 6)), jnp.int32)
    keep = np.ones((2, 6), bool)
    keep[0, 2] = keep[1, 5] = False
    ignored = jnp.where(keep, tgt, IGNORE_INDEX)
    out = {}
    for chunked in (False, True):
        m = _lm(chunked)
        graphdef, params, rest = nnx.split(m, nnx.Param, ...)
        loss = lambda p, t: nnx.merge(graphdef, p, rest).loss(tok, t, chunk_size=5)

        @jax.jit
        def checked(p, t, w):
            with collect() as found:
                values, grad = jax.value_and_grad(lambda p: (loss(p, t) * w).sum())(p)
            return values, grad, loss(p, t), stack_rows(found)

        # reference: valid targets everywhere, the ignored rows multiplied out afterwards
        ref, ref_grad, _, _ = checked(params, tgt, keep)
        got, grad, rows, checks = checked(params, ignored, np.ones_like(keep))
        rows = np.asarray(rows)
        assert first_error(checks) is None
        assert np.all(rows[~keep] == 0.0) and np.all(rows[keep] > 0)
        assert abs(float(got) - float(ref)) <= 1e-5 * abs(float(ref))
        for a, b in zip(jax.tree.leaves(grad), jax.tree.leaves(ref_grad)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        out[chunked] = grad
        for bad in (-1, 16, -99):
            wrong = tgt.at[1, 3].set(bad)
            with pytest.raises(ValueError, match=rf"labels must be in \[0, 16\) or -100.*target "
                                                 rf"{bad} (>= vocab_size 16|< 0)"):
                loss(params, wrong)
            _, _, values, checks = checked(params, wrong, np.ones_like(keep))
            values = np.asarray(values)
            assert np.isnan(values[1, 3]) and np.isfinite(np.delete(values.ravel(), 9)).all()
            assert first_error(checks) == (f"target {bad} >= vocab_size 16" if bad >= 16 else
                                           f"target {bad} < 0 (valid: 0 <= target < vocab_size 16)")
    # the dense and chunked gradients agree with ignored targets (they differed by 1.03 at -1)
    for a, b in zip(jax.tree.leaves(out[False]), jax.tree.leaves(out[True])):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
