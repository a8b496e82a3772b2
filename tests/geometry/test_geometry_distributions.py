"""Positional distributions: counting, streaming, padding, specials, top-k, min_count, halves."""
import numpy as np
import pytest

import posjax.geometry as geo

PAD, CLS, SEP = 0, 1, 2


def numpy_counts(tokens, n, V, pad=None):
    C = np.zeros((n, V), np.int64)
    for seq in tokens:
        for i, t in enumerate(seq[:n]):
            if pad is None or t != pad:
                C[i, t] += 1
    return C


@pytest.fixture
def corpus():
    rng = np.random.default_rng(0)
    toks = rng.integers(3, 12, size=(50, 8))
    lengths = rng.integers(4, 9, size=50)
    toks[np.arange(8)[None, :] >= lengths[:, None]] = PAD
    toks[:, 0] = CLS
    return toks, lengths


def test_counts_match_a_direct_count_and_rows_sum_to_one(corpus):
    toks, _ = corpus
    P, N = geo.positional_distributions(toks, vocab_size=12, pad_id=PAD, batch_size=16)
    C = numpy_counts(toks, 8, 12, pad=PAD)
    np.testing.assert_array_equal(np.asarray(N), C.sum(1))
    np.testing.assert_allclose(np.asarray(P), C / C.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(P[0, CLS]), 1.0)  # keep_special: P_0 = delta_[CLS]


def test_streaming_batches_equal_one_array(corpus):
    toks, lengths = corpus
    P, N = geo.positional_distributions(toks, vocab_size=12, pad_id=PAD)
    short = lengths <= 6  # a narrower first batch: the count array grows with later batches
    batches = [toks[short][:, :6], toks[~short][:20], toks[~short][20:]]
    P2, N2 = geo.positional_distributions(iter(batches), vocab_size=12, pad_id=PAD)
    np.testing.assert_array_equal(np.asarray(N2), np.asarray(N))
    np.testing.assert_allclose(np.asarray(P2), np.asarray(P))
    ragged = [seq[:L] for seq, L in zip(toks, lengths)]  # an iterable of single sequences
    P3, N3 = geo.positional_distributions(ragged, vocab_size=12)
    np.testing.assert_array_equal(np.asarray(N3), np.asarray(N))
    P4, N4 = geo.positional_distributions(toks, vocab_size=12, lengths=lengths)
    np.testing.assert_array_equal(np.asarray(N4), np.asarray(N))


def test_pad_count_mode_and_strip_specials(corpus):
    toks, _ = corpus
    _, N = geo.positional_distributions(toks, vocab_size=12, pad_id=PAD, pad_mode="count")
    assert np.all(np.asarray(N) == 50)
    P, N, info = geo.positional_distributions(
        toks, vocab_size=12, pad_id=PAD, keep_special=False, special_ids=(CLS, SEP),
        return_info=True, on_empty="truncate")
    stripped = [[t for t in seq if t not in (PAD, CLS, SEP)] for seq in toks]
    C = np.zeros((7, 12))
    for seq in stripped:
        for i, t in enumerate(seq):
            C[i, t] += 1
    np.testing.assert_array_equal(np.asarray(N), C.sum(1)[: P.shape[0]])
    assert float(P[:, CLS].sum()) == 0.0
    assert info["keep_special"] is False and info["counts"]["max"] == 50


def test_top_k_other_bucket_and_smoothing(corpus):
    toks, _ = corpus
    P, N, info = geo.positional_distributions(toks, vocab_size=12, pad_id=PAD, top_k=3,
                                              return_info=True)
    assert P.shape == (8, 4) and len(info["top_k_ids"]) == 3
    assert info["top_k_ids"][0] == CLS  # the most frequent token overall
    np.testing.assert_allclose(np.asarray(P).sum(1), 1.0, rtol=1e-6)
    Ps, _ = geo.positional_distributions(toks, vocab_size=12, pad_id=PAD, smoothing=1.0)
    C = numpy_counts(toks, 8, 12, pad=PAD)
    np.testing.assert_allclose(np.asarray(Ps), (C + 1) / (C.sum(1, keepdims=True) + 12), rtol=1e-6)


def test_empty_positions_are_reported_never_nan(corpus):
    toks, _ = corpus
    with pytest.raises(ValueError, match="fewer than min_count"):
        geo.positional_distributions(toks, vocab_size=12, pad_id=PAD, num_positions=10)
    with pytest.warns(UserWarning, match="truncated"):
        P, N = geo.positional_distributions(toks, vocab_size=12, pad_id=PAD, num_positions=10,
                                            min_count=20, on_empty="truncate")
    assert np.all(np.asarray(N) >= 20) and P.shape[0] == N.shape[0] < 8
    assert not np.isnan(np.asarray(P)).any()


def test_split_halves(corpus):
    toks, _ = corpus
    P, N = geo.positional_distributions(toks, vocab_size=12, pad_id=PAD, split_half=True)
    assert P.shape == (2, 8, 12) and N.shape == (2, 8)
    np.testing.assert_array_equal(np.asarray(N).sum(0), numpy_counts(toks, 8, 12, PAD).sum(1))
    A = numpy_counts(toks[0::2], 8, 12, PAD)
    np.testing.assert_allclose(np.asarray(P[0]), A / A.sum(1, keepdims=True), rtol=1e-6)
    D = geo.hellinger_matrix(P, debias="split_half")
    assert D.shape == (8, 8)


@pytest.mark.parametrize("kwargs, match", [
    (dict(vocab_size=5), "outside"),
    (dict(vocab_size=12, pad_mode="skip"), "pad_mode"),
    (dict(vocab_size=12, keep_special=False), "special_ids"),
    (dict(vocab_size=12, top_k=12), "top_k"),
    (dict(vocab_size=12, smoothing=-1.0), "smoothing"),
])
def test_bad_options_raise(corpus, kwargs, match):
    toks, _ = corpus
    with pytest.raises(ValueError, match=match):
        geo.positional_distributions(toks, pad_id=PAD, **kwargs)


def test_float_tokens_and_empty_corpus_raise():
    with pytest.raises(ValueError, match="integer"):
        geo.positional_distributions(np.ones((2, 3)), vocab_size=4)
    with pytest.raises(ValueError, match="empty"):
        geo.positional_distributions(iter([]), vocab_size=4)
