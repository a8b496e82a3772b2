"""Trigger-distance and counting generators of arXiv 2505.13027."""
import numpy as np
import pytest
from scipy import stats

from posjax.data import tasks


@pytest.fixture(scope="module")
def distance():
    return tasks.trigger_distance(20_000, seed=3)


@pytest.fixture(scope="module")
def count():
    return tasks.trigger_count(10_000, seed=5)


def test_distance_shapes_and_padding(distance):
    n = len(distance["labels"])
    assert n > 19_990  # dedup removes (almost) nothing
    assert distance["tokens"].shape == (n, 128) and distance["tokens"].dtype == np.int32
    assert distance["padding_mask"].shape == (n, 128)
    assert distance["trigger_positions"].shape == (n, 2)
    length = distance["padding_mask"].sum(1)
    # real tokens form a prefix; pads are pad_id = 0 and nothing runs past 120 tokens
    assert np.array_equal(distance["padding_mask"], np.arange(128)[None] < length[:, None])
    assert np.all(distance["tokens"][~distance["padding_mask"]] == 0)
    assert length.max() == 120 and length.min() == 5


def test_distance_labels_recomputed_from_the_tokens(distance):
    w = tasks.trigger_ids(3, 2)
    tok, pos = distance["tokens"], distance["trigger_positions"]
    rows = np.arange(len(tok))
    first, second = tok[rows, pos[:, 0]], tok[rows, pos[:, 1]]
    assert len(np.unique(first)) == 1 and len(np.unique(second)) == 1
    assert {first[0], second[0]} == set(w.tolist()) and first[0] != second[0]
    # exclude_triggers_from_fillers (default): the triggers occur exactly once, at those positions
    for wid, col in ((first[0], 0), (second[0], 1)):
        hits = tok == wid
        assert np.all(hits.sum(1) == 1)
        assert np.array_equal(hits.argmax(1), pos[:, col])
    assert np.array_equal(distance["labels"], pos[:, 1] - pos[:, 0])
    assert distance["labels"].min() == 2 and distance["labels"].max() == 71
    # left segment lengths U{1..25}
    assert pos[:, 0].min() == 1 and pos[:, 0].max() == 25


def test_distance_segments_have_no_repeated_ids(distance):
    tok, pos, mask = distance["tokens"], distance["trigger_positions"], distance["padding_mask"]
    for i in range(0, 500):
        p1, p2, n = pos[i, 0], pos[i, 1], mask[i].sum()
        for seg in (tok[i, :p1], tok[i, p1 + 1:p2], tok[i, p2 + 1:n]):
            assert len(np.unique(seg)) == len(seg)


def test_distance_classes_are_uniform(distance):
    counts = np.bincount(distance["labels"], minlength=72)[2:]
    assert counts.min() > 0 and len(counts) == 70
    assert stats.chisquare(counts).pvalue > 1e-3


def test_faithful_fillers_reproduce_the_extra_trigger_rate():
    # with triggers allowed among the fillers ≈ 19.6 % of samples hold an extra copy
    data = tasks.trigger_distance(20_000, seed=1, exclude_triggers_from_fillers=False)
    w = tasks.trigger_ids(1, 2)
    extra = (np.isin(data["tokens"], w) & data["padding_mask"]).sum(1) > 2
    assert abs(extra.mean() - 0.196) < 0.012


def test_generators_are_seeded():
    a = tasks.trigger_distance(300, seed=7)
    b = tasks.trigger_distance(300, seed=7)
    c = tasks.trigger_distance(300, seed=8)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["tokens"], c["tokens"])
    assert np.array_equal(tasks.trigger_count(50, seed=2)["tokens"],
                          tasks.trigger_count(50, seed=2)["tokens"])


def test_count_labels_recomputed_by_counting_trigger_ids(count):
    trig = tasks.trigger_ids(5, 30)
    assert len(np.unique(trig)) == 30 and trig.min() >= 5
    tok, mask = count["tokens"], count["padding_mask"]
    assert tok.shape == (10_000, 128) and np.all(mask.sum(1) == 120)
    assert np.array_equal(np.isin(tok, trig).sum(1), count["labels"])
    assert count["labels"].min() == 0 and count["labels"].max() == 100
    hist = np.bincount(count["labels"], minlength=101)
    assert stats.chisquare(hist).pvalue > 1e-3


def test_count_is_shuffled_and_ignore_label0_drops_zeros(count):
    trig = tasks.trigger_ids(5, 30)
    first_hit = np.isin(count["tokens"], trig)
    # triggers are spread over all positions, not packed at the front
    assert first_hit[:, 100:120].mean() > 0.3
    faithful = tasks.trigger_count(3000, seed=5, ignore_label0=True)
    assert faithful["labels"].min() == 1
    assert len(faithful["labels"]) < 3000


def test_split_is_a_seeded_partition(distance):
    train, test = tasks.split(distance)
    n = len(distance["labels"])
    assert len(train["labels"]) == int(0.7 * n) and len(train["labels"]) + len(test["labels"]) == n
    again, _ = tasks.split(distance, split_seed=42)
    assert np.array_equal(train["tokens"], again["tokens"])
    rows = {r.tobytes() for r in train["tokens"]}
    assert not any(r.tobytes() in rows for r in test["tokens"])


def test_order_blind_baselines():
    data = tasks.trigger_distance(4000, seed=0, seq_len=32, max_tokens=32, left_range=(1, 6),
                                  between_range=(1, 16), right_range=(1, 6))
    base = tasks.order_blind_baselines(*tasks.split(data))
    assert base["chance"] == pytest.approx(1 / 16)
    # the number of tokens tells the distance apart better than chance, but far from fully
    assert base["chance"] < base["length_prior"] < 0.4


@pytest.mark.parametrize("kwargs,match", [
    (dict(between_range=(1, 119)), "max_tokens"),
    (dict(left_range=(3, 2)), "left_range"),
    (dict(seq_len=100), "max_tokens"),
    (dict(filler_ids="odd"), "filler_ids"),
    (dict(num_special=574), "num_special"),
])
def test_distance_bad_input_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tasks.trigger_distance(10, seed=0, **kwargs)


def test_count_and_split_bad_input_raise():
    with pytest.raises(ValueError, match="count_range"):
        tasks.trigger_count(10, seed=0, count_range=(0, 121))
    with pytest.raises(ValueError, match="fractions"):
        tasks.split({"labels": np.arange(4)}, (0.5, 0.6))
    with pytest.raises(ValueError, match="num_samples"):
        tasks.trigger_count(0, seed=0)


def test_shift_task_is_bag_invariant_and_bayes_separable():
    from posjax.data.tasks import bayes_accuracy, shift_task

    rng = np.random.default_rng(0)
    n, V = 8, 30
    P = rng.dirichlet(np.full(V, 0.1), size=n)
    data = shift_task(P, 4000, 2, seed=0)
    assert data["tokens"].shape == (4000, n) and data["labels"].sum() == 2000
    # class-1 rows use P[(i + 2) % n]: same multiset of distributions, so equal token frequencies
    f0 = np.bincount(data["tokens"][data["labels"] == 0].ravel(), minlength=V) / (2000 * n)
    f1 = np.bincount(data["tokens"][data["labels"] == 1].ravel(), minlength=V) / (2000 * n)
    assert np.abs(f0 - f1).max() < 0.02
    assert bayes_accuracy(P, data, 2) > 0.95
    # the rule with the exact P: an independent log-likelihood ratio per sequence
    logp = np.log(P)
    t, y = data["tokens"][:50], data["labels"][:50]
    llr = np.array([sum(logp[i, w] - logp[(i + 2) % n, w] for i, w in enumerate(row))
                    for row in t])
    sub = {"tokens": t, "labels": y}
    assert bayes_accuracy(P, sub, 2) == pytest.approx(np.mean((llr < 0) == y))
    with pytest.raises(ValueError, match="shift"):
        shift_task(P, 10, n, seed=0)
