"""Head ablation, deposit metrics and NoPE permutation invariance (arXiv 2505.13027)."""
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax.analysis import ablation
from posjax.data import tasks
from posjax.models import Classifier, TransformerConfig
from posjax.training import evaluate_classifier

CFG = dict(vocab_size=574, num_layers=2, d_model=32, num_heads=4, d_ff=64, max_len=16,
           embed_init_std=1.0)


@pytest.fixture(scope="module")
def data():
    d = tasks.trigger_distance(150, seed=0, seq_len=16, max_tokens=16, left_range=(1, 4),
                               between_range=(1, 6), right_range=(1, 4))
    return d


_plain = nnx.jit(lambda m, t, p: m(t, padding_mask=p))


@pytest.fixture(scope="module")
def nope():
    return Classifier(TransformerConfig(pe="none", **CFG), 8, "mean", rngs=nnx.Rngs(0))


def test_nope_is_permutation_invariant_on_padded_task_inputs(nope, data):
    tok, mask = data["tokens"][:40], data["padding_mask"][:40]
    # permute only the real tokens of each row (pads stay at the end)
    rng = np.random.default_rng(0)
    keys = np.where(mask, rng.random(mask.shape), 2.0)
    perm = np.argsort(keys, axis=1)
    shuffled = np.take_along_axis(tok, perm, axis=1)
    assert not np.array_equal(shuffled, tok)
    np.testing.assert_allclose(np.asarray(_plain(nope, shuffled, mask)),
                               np.asarray(_plain(nope, tok, mask)), atol=1e-5)


def test_all_ones_mask_equals_unablated_accuracy(nope, data):
    ablated, baseline = ablation.head_ablation(nope, data, batch_size=64, return_baseline=True)
    assert ablated.shape == (2, 4)
    assert baseline == pytest.approx(evaluate_classifier(nope, data)["accuracy"], abs=1e-12)


def test_zeroing_a_layer_changes_outputs(nope, data):
    fwd = nnx.jit(lambda m, t, p, h: m(t, padding_mask=p, head_mask=h))
    tok, mask = data["tokens"][:40], data["padding_mask"][:40]
    full = fwd(nope, tok, mask, jnp.ones((2, 4)))
    plain = _plain(nope, tok, mask)
    np.testing.assert_allclose(np.asarray(full), np.asarray(plain), atol=1e-6)
    off = fwd(nope, tok, mask, jnp.ones((2, 4)).at[0].set(0.0))
    assert float(jnp.abs(off - full).max()) > 1e-3
    one = fwd(nope, tok, mask, jnp.ones((2, 4)).at[1, 2].set(0.0))
    assert float(jnp.abs(one - full).max()) > 1e-5


def test_head_ablation_compiles_once_for_all_masks_and_batches(data):
    model = Classifier(TransformerConfig(pe="alibi", **CFG), 8, "mean", rngs=nnx.Rngs(1))
    calls = []
    original = Classifier.__call__

    def counting(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    Classifier.__call__ = counting
    try:
        ablated = ablation.head_ablation(model, data, batch_size=64)  # 150 = 64 + 64 + 22 rows
    finally:
        Classifier.__call__ = original
    assert len(calls) == 1  # one trace: masks are data, the short last batch is padded
    assert ablated.shape == (2, 4) and np.all((0 <= ablated) & (ablated <= 1))


def test_single_head_masks():
    m = ablation.single_head_masks(2, 3)
    assert m.shape == (7, 2, 3) and np.all(m[0] == 1)
    assert np.all(m[1:].sum((1, 2)) == 5)
    assert m[1 + 3 * 1 + 2][1, 2] == 0


def test_deposit_metrics_on_a_synthetic_deposit():
    baseline = 0.90
    ablated = np.full((3, 4), 0.89)
    ablated[0, 2] = 0.30          # one layer-0 head: -60 points
    ablated[1] = [0.80, 0.85, 0.92, 0.90]
    m = ablation.deposit_metrics(ablated, baseline)
    np.testing.assert_allclose(m["drops"][0], [1, 1, 60, 1], atol=1e-9)
    assert m["argmax_head"][0] == 2 and m["max_drop"][0] == pytest.approx(60)
    assert m["concentration"][0] == pytest.approx(60 / 63)
    assert m["dominance"][0] == pytest.approx(60)
    assert m["deposit"]
    assert m["concentration"][1] == pytest.approx(10 / 15) and m["dominance"][1] == pytest.approx(2)
    # thresholds are parameters
    assert not ablation.deposit_metrics(ablated, baseline, drop_threshold=70)["deposit"]
    assert not ablation.deposit_metrics(ablated, baseline, dominance_threshold=100)["deposit"]
    assert ablation.deposit_metrics(ablated, baseline, deposit_layer=1)["deposit"] is False


def test_deposit_metrics_edge_cases_and_errors():
    m = ablation.deposit_metrics(np.array([[0.5, 0.7], [0.7, 0.7]]), 0.7)
    assert m["dominance"][0] == float("inf") and m["concentration"][0] == pytest.approx(1.0)
    assert np.isnan(m["dominance"][1]) and np.isnan(m["concentration"][1])
    assert m["max_drop"][0] == pytest.approx(20) and m["deposit"] is False  # below 30 points
    with pytest.raises(ValueError, match="layers, heads"):
        ablation.deposit_metrics(np.zeros(4), 0.5)
    with pytest.raises(ValueError, match="deposit_layer"):
        ablation.deposit_metrics(np.zeros((2, 2)), 0.5, deposit_layer=2)


def test_attention_mass_on_triggers(nope, data):
    mass = ablation.attention_mass(nope, data, data["trigger_positions"], batch_size=64)
    assert mass.shape == (2, 4)
    assert np.all((mass > 0) & (mass < 1))
    with pytest.raises(ValueError, match="key_positions"):
        ablation.attention_mass(nope, data, data["trigger_positions"][:5])


def test_lazy_facade_and_bad_inputs(nope, data):
    import posjax.analysis as analysis
    assert analysis.head_ablation is ablation.head_ablation
    assert analysis.deposit_metrics is ablation.deposit_metrics
    with pytest.raises(ValueError, match="head_masks"):
        ablation.masked_accuracies(nope, data, np.ones((1, 3, 4)))
    with pytest.raises(ValueError, match="tokens"):
        ablation.head_ablation(nope, {"labels": data["labels"]})
