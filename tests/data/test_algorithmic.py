"""Task generators of posjax.data.algorithmic (arXiv 2305.19466)."""
import numpy as np
import pytest

from posjax.data import algorithmic as alg


def rows(task, lengths, **kw):
    d = alg.make_dataset(task, lengths, seed=0, **kw)
    out = []
    for i in range(len(lengths)):
        toks = d["tokens"][i]
        p, t = d["prefix_len"][i], d["target_len"][i]
        out.append((toks[1:p - 1], toks[p:p + t], d, i))
    return out


def digits(tokens):
    return [int(alg.VOCAB[t]) for t in tokens]


def test_format_and_loss_mask():
    d = alg.make_dataset("copy", [1, 4, 2], seed=3)
    assert d["tokens"].shape == (3, alg.sequence_length("copy", 4))
    for i in range(3):
        toks, p, t = d["tokens"][i], d["prefix_len"][i], d["target_len"][i]
        assert toks[0] == alg.BOS and toks[p - 1] == alg.SEP and toks[p + t] == alg.EOS
        assert np.all(toks[p + t + 1:] == alg.PAD)
        np.testing.assert_array_equal(np.flatnonzero(d["loss_mask"][i]), np.arange(p, p + t + 1))


@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_copy_and_reverse(task):
    for x, y, _, _ in rows(task, [5, 1, 7]):
        assert list(y) == (list(x) if task == "copy" else list(x[::-1]))


@pytest.mark.parametrize("order", ["msb_first", "lsb_first"])
def test_addition_is_correct(order):
    for x, y, _, _ in rows("addition", [1, 3, 6, 6, 6], digit_order=order):
        plus = list(x).index(alg.TOKEN["+"])
        a = int("".join(map(str, digits(x[:plus]))))
        b = int("".join(map(str, digits(x[plus + 1:]))))
        got = digits(y) if order == "msb_first" else digits(y)[::-1]
        assert int("".join(map(str, got))) == a + b
        assert len(got) == len(str(a + b))
        assert plus == len(x) - plus - 1


def test_parity_counting_summation():
    for x, y, _, _ in rows("parity", [4, 9]):
        assert digits(y) == [sum(digits(x)) % 2]
    for x, y, _, _ in rows("parity", [6], scratchpad="running"):
        assert digits(y) == list(np.cumsum(digits(x)) % 2)
    for x, y, _, _ in rows("counting", [12, 3]):
        assert x[-2] == alg.TOKEN["?"]
        assert int("".join(map(str, digits(y)))) == int(np.sum(x[:-2] == x[-1]))
    for x, y, _, _ in rows("summation", [7]):
        assert digits(y) == [sum(digits(x)) % 10]


def test_seeded_and_lengths_respected():
    lengths = alg.train_lengths(200, 5, seed=1)
    assert lengths.min() >= 1 and lengths.max() <= 5 and len(np.unique(lengths)) == 5
    a = alg.make_dataset("reverse", lengths, seed=4)
    b = alg.make_dataset("reverse", lengths, seed=4)
    np.testing.assert_array_equal(a["tokens"], b["tokens"])
    np.testing.assert_array_equal(a["length"], lengths)
    np.testing.assert_array_equal(alg.eval_lengths([2, 3], 2), [2, 2, 3, 3])


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="task"):
        alg.make_dataset("sorting", [3], seed=0)
    with pytest.raises(ValueError, match="width"):
        alg.make_dataset("copy", [5], seed=0, width=6)
    with pytest.raises(ValueError, match="digit_order"):
        alg.make_dataset("addition", [2], seed=0, digit_order="middle")
    with pytest.raises(ValueError, match="lengths"):
        alg.make_dataset("copy", [0], seed=0)
