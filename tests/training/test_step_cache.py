"""Compiled training steps are shared by structure: init-only options never recompile."""
import jax
import numpy as np
import pytest
from flax import nnx

from posjax.models import Classifier, TransformerConfig
from posjax.training import ArrayBatches, TrainConfig, classification_loss, train
from posjax.training.step_cache import StructuralStep, program_key

_COMPILES: list[str] = []
_LISTENING = []


def _listen():
    if not _LISTENING:
        def on_event(event, duration, **kw):
            if event == "/jax/core/compile/backend_compile_duration":
                _COMPILES.append(event)
        jax.monitoring.register_event_duration_secs_listener(on_event)
        _LISTENING.append(on_event)


def _data():
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 16, (64, 8)).astype(np.int32)
    return {"tokens": tokens, "labels": (tokens[:, 0] > tokens[:, -1]).astype(np.int32)}


def _compiles_of(pe, pe_options, seed, lr=3e-3):
    """Backend compilations during one train() call (model built before counting)."""
    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, pe=pe, pe_options=pe_options, dropout=0.0)
    model = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(seed))
    batches = ArrayBatches(_data(), 16, seed=seed)
    tc = TrainConfig(steps=3, batch_size=16, learning_rate=lr, progress=False, seed=seed)
    train(model, classification_loss, batches, tc)  # warm eager ops of this shape
    model = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(seed + 100))
    _listen()
    before = len(_COMPILES)
    train(model, classification_loss, batches, tc.replace(seed=seed + 1))
    return len(_COMPILES) - before


def test_init_scale_and_seed_do_not_recompile():
    _compiles_of("learned", {"std": 0.1}, 0)  # compiles the learned-PE step once
    _listen()
    before = len(_COMPILES)
    for std, seed in ((0.5, 3), (2.0, 7)):  # other σ, other seeds: graphdefs differ
        cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                                max_len=8, pe="learned", pe_options={"std": std}, dropout=0.0)
        model = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(seed))
        tc = TrainConfig(steps=3, batch_size=16, learning_rate=3e-3, progress=False, seed=seed)
        train(model, classification_loss, ArrayBatches(_data(), 16, seed=seed), tc)
    assert len(_COMPILES) == before


def test_computation_changes_do_recompile():
    # negative controls: RoPE's pairing and a learning rate change the program
    assert _compiles_of("rope", {"base": 100.0}, 0) == 0  # same options: cached
    _listen()
    before = len(_COMPILES)
    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=8, pe="rope", pe_options={"base": 100.0, "interleaved": True},
                            dropout=0.0)
    model = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(0))
    tc = TrainConfig(steps=2, batch_size=16, learning_rate=3e-3, progress=False)
    train(model, classification_loss, ArrayBatches(_data(), 16), tc)
    assert len(_COMPILES) > before
    before = len(_COMPILES)
    train(model, classification_loss, ArrayBatches(_data(), 16), tc.replace(learning_rate=1e-2))
    assert len(_COMPILES) > before


def test_a_changed_constant_is_never_served_a_stale_step():
    # RoPE bases 100 and 1e4 may share one executable (XLA can pass the frequencies as runtime
    # constants), but each model must train with its own frequencies: equal seeds, data and
    # parameters at init, different losses.
    losses = []
    for base in (100.0, 10000.0):
        cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                                max_len=8, pe="rope", pe_options={"base": base}, dropout=0.0)
        model = Classifier(cfg, 2, pooling="mean", rngs=nnx.Rngs(0))
        tc = TrainConfig(steps=2, batch_size=16, learning_rate=3e-3, progress=False)
        losses.append(train(model, classification_loss, ArrayBatches(_data(), 16), tc))
    assert losses[0].metrics["loss"] != losses[1].metrics["loss"]


def test_program_key_ignores_values_not_shapes():
    f = lambda x, y: x * 2.0 + y
    a = program_key(f, np.ones(3, np.float32), np.zeros(3, np.float32))[0]
    b = program_key(f, np.full(3, 7.0, np.float32), np.ones(3, np.float32))[0]
    c = program_key(f, np.ones(4, np.float32), np.zeros(4, np.float32))[0]
    g = lambda x, y: x * 3.0 + y
    d = program_key(g, np.ones(3, np.float32), np.zeros(3, np.float32))[0]
    assert a == b and a != c and a != d
    step = StructuralStep(f)
    np.testing.assert_allclose(step(np.ones(3, np.float32), np.ones(3, np.float32)), 3.0)


def test_bounded_cache_drops_the_oldest_and_builds_unhashable_keys_afresh():
    from posjax.training.step_cache import BoundedCache

    cache, built = BoundedCache(2), []

    def build(v):
        return lambda: built.append(v) or v

    assert [cache.get(k, build(k)) for k in ("a", "b", "a")] == ["a", "b", "a"]
    assert built == ["a", "b"] and len(cache) == 2  # the second "a" was a hit
    cache.get("c", build("c"))  # full: "a" (the oldest) goes
    assert "a" not in cache and "b" in cache and "c" in cache
    assert cache.get(["unhashable"], build("u")) == "u" and len(cache) == 2
    assert cache.get(["unhashable"], build("u")) == "u" and built.count("u") == 2
    with pytest.raises(ValueError, match="maxsize"):
        BoundedCache(0)
