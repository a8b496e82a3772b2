"""posjax.evals against oracles and closed forms: perplexity vs an independent log-softmax of
the logits, retrieval with copy and constant-logit oracles, attention statistics of uniform
attention, and the RoPE base bound of arXiv 2405.14591."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax import evals
from posjax.models import LanguageModel, TransformerConfig

V = 24


def _lm(pe="rope", causal=True, seed=0, **kw):
    cfg = TransformerConfig(vocab_size=V, num_layers=1, d_model=16, num_heads=2, d_ff=32,
                            max_len=64, pe=pe, causal=causal, **kw)
    return LanguageModel(cfg, rngs=nnx.Rngs(seed))


@pytest.fixture(scope="module")
def lm():
    return _lm()


def _reference_nll(model, w):
    """NLL of w[:, 1:] given w[:, :-1] from the model's logits, log-softmax in float64."""
    graphdef, state = nnx.split(model)
    z = np.asarray(jax.jit(lambda x: nnx.merge(graphdef, state)(x))(jnp.asarray(w[:, :-1])),
                   np.float64)
    logp = z - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - z.max(-1, keepdims=True)
    return -np.take_along_axis(logp, w[:, 1:, None], -1)[..., 0]


def test_perplexity_non_overlapping_matches_an_independent_log_softmax(lm):
    tokens = np.random.default_rng(0).integers(0, V, size=(2, 41))
    res = evals.perplexity_by_length(lm, tokens, [8, 20], batch_size=64)
    for L, ppl, count in zip(res["lengths"], res["perplexity"], res["tokens_scored"]):
        starts = np.arange(0, 41 - L, L)
        starts = starts[starts + L + 1 <= 41]
        w = np.concatenate([tokens[:, s:s + L + 1] for s in starts])
        ref = _reference_nll(lm, w)
        assert count == ref.size
        assert ppl == pytest.approx(math.exp(ref.mean()), rel=1e-6)
        np.testing.assert_allclose(res["nll_by_position"][L], ref.mean(0), rtol=1e-5)
        # and equals exp of the mean of LanguageModel.loss
        gd, st = nnx.split(lm)
        loss = np.asarray(jax.jit(lambda x, y: nnx.merge(gd, st).loss(x, y))(
            jnp.asarray(w[:, :-1]), jnp.asarray(w[:, 1:])))
        assert ppl == pytest.approx(math.exp(loss.mean()), rel=1e-6)


def test_sliding_windows_score_every_later_target_once(lm):
    tokens = np.random.default_rng(1).integers(0, V, size=(1, 50))
    L, s = 16, 4
    res = evals.perplexity_by_length(lm, tokens, [L], stride=s)
    starts = np.arange(0, 50 - L, s)
    starts = starts[starts + L + 1 <= 50]
    scored = np.concatenate([starts[0] + 1 + np.arange(L)]
                            + [st + 1 + np.arange(L - s, L) for st in starts[1:]])
    assert len(set(scored)) == len(scored) == res["tokens_scored"][0]   # each target once
    nll = _reference_nll(lm, np.concatenate([tokens[:, st:st + L + 1] for st in starts]))
    ref = np.concatenate([nll[0]] + [row[L - s:] for row in nll[1:]])
    assert res["perplexity"][0] == pytest.approx(math.exp(ref.mean()), rel=1e-6)
    with pytest.raises(ValueError, match="stride"):
        evals.perplexity_by_length(lm, tokens, [L], stride=L + 1)
    with pytest.raises(ValueError, match="needs streams"):
        evals.perplexity_by_length(lm, tokens, [60])


VOCAB = evals.RetrievalVocab(filler=tuple(range(10, 20)), symbols=tuple(range(0, 8)),
                             key_marker=20, query_marker=21, key_length=2)


def _copy_passkey(prompts):
    at = np.argmax(prompts == VOCAB.key_marker, axis=1)
    return np.stack([prompts[i, a + 1:a + 1 + VOCAB.key_length] for i, a in enumerate(at)])


def test_passkey_copy_oracle_scores_one_and_constant_logits_score_the_key_rate():
    res = evals.passkey_retrieval(_copy_passkey, VOCAB, [16, 32], [0.0, 0.5, 1.0], 20,
                                  np.random.default_rng(0))
    assert np.all(np.asarray(res["accuracy"]) == 1.0)
    model = _lm()
    head = model.head
    head.kernel[...] = jnp.zeros_like(head.kernel[...])
    head.bias[...] = jnp.zeros_like(head.bias[...])           # every logit 0: argmax is token 0
    one = evals.RetrievalVocab(VOCAB.filler, VOCAB.symbols, 20, 21, key_length=1)
    got = evals.passkey_retrieval(model, one, [16], [0.5], 40, np.random.default_rng(3))
    _, keys = evals.passkey_prompts(one, 16, 0.5, 40, np.random.default_rng(3))
    assert got["accuracy"][0][0] == pytest.approx(float(np.mean(keys[:, 0] == 0)), abs=0)
    assert got["chance"] == pytest.approx(1 / 8)


def test_needle_task_has_distractors_and_the_copy_oracle_finds_the_asked_needle():
    prompts, answers = evals.needle_prompts(VOCAB, 40, 0.3, 10, np.random.default_rng(0),
                                            num_needles=3)
    assert prompts.shape == (10, 40) and np.all(prompts[:, -2] == VOCAB.query_marker)
    assert np.all((prompts == VOCAB.key_marker).sum(1) == 3)

    def oracle(p, first_only=False):
        out = []
        for row in p:
            name = row[-1]
            spots = np.flatnonzero(row[:-2] == VOCAB.key_marker)
            hit = spots[0] if first_only else next(s for s in spots if row[s + 1] == name)
            out.append(row[hit + 2:hit + 2 + VOCAB.key_length])
        return np.stack(out)
    res = evals.needle_retrieval(oracle, VOCAB, [40], [0.0, 0.5, 1.0], 12,
                                 np.random.default_rng(1))
    assert np.all(np.asarray(res["accuracy"]) == 1.0)
    fooled = evals.needle_retrieval(lambda p: oracle(p, first_only=True), VOCAB, [40], [1.0],
                                    30, np.random.default_rng(2))
    assert fooled["accuracy"][0][0] < 1.0                     # the distractors matter


def _uniform(causal):
    model = _lm(pe="none", causal=causal)
    attn = model.transformer.blocks[0].attn
    for lin in (attn.query, attn.key):
        lin.kernel[...] = jnp.zeros_like(lin.kernel[...])
        lin.bias[...] = jnp.zeros_like(lin.bias[...])
    return model


def test_uniform_attention_statistics_match_closed_forms():
    T = 12
    tokens = np.random.default_rng(0).integers(0, V, size=(2, T))
    bi = evals.attention_diagnostics(_uniform(False), tokens, lengths=[6, T], local_window=2)
    i, j = np.arange(T)[:, None], np.arange(T)[None]
    np.testing.assert_allclose(bi[T]["entropy"], math.log(T), rtol=1e-5)
    np.testing.assert_allclose(bi[T]["sink"], 1.0 / T, rtol=1e-5)
    np.testing.assert_allclose(bi[T]["distance"], np.abs(i - j).mean(), rtol=1e-5)
    np.testing.assert_allclose(bi[T]["local"], (np.abs(i - j) <= 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(bi[6]["entropy"], math.log(6), rtol=1e-5)
    ca = evals.attention_diagnostics(_uniform(True), tokens)
    np.testing.assert_allclose(ca[T]["entropy"], np.mean(np.log(np.arange(1, T + 1))),
                               rtol=1e-5)
    np.testing.assert_allclose(ca[T]["sink"], np.mean(1.0 / np.arange(1, T + 1)), rtol=1e-5)


def test_rope_base_bound_matches_the_paper_at_head_dim_128():
    b = evals.rope_base_bound(1024, 128)
    assert f"{b:.1e}" == "4.3e+03"                            # arXiv 2405.14591, L = 1k
    assert evals.rope_discrimination(b, 1024, 128).min() >= 0
    assert evals.rope_discrimination(b * 0.999, 1024, 128).min() < 0
    with pytest.raises(ValueError, match="even"):
        evals.rope_base_bound(1024, 127)


def test_rope_wavelengths_follow_the_base_and_scalings_lengthen_them():
    w = evals.rope_wavelengths("rope", head_dim=32, target_length=256)
    np.testing.assert_allclose(w["wavelengths"],
                               2 * np.pi * 10000.0 ** (2 * np.arange(16) / 32), rtol=1e-12)
    assert w["beyond_target"] == int(np.sum(w["wavelengths"] > 256))
    lin = evals.rope_wavelengths("rope_linear", {"factor": 4.0}, head_dim=32)
    np.testing.assert_allclose(lin["wavelengths"], 4 * w["wavelengths"], rtol=1e-12)
    assert "rope" in evals.rotary_pe_names() and "alibi" not in evals.rotary_pe_names()
    with pytest.raises(ValueError, match="not a registered rotary PE"):
        evals.rope_wavelengths("alibi", head_dim=32)
