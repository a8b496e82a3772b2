"""posjax.data.mlm_masking: BERT's masking recipe (exact counts, 80/10/10 shares, specials never
drawn, reproducible) and the block-wise held-out split."""
import numpy as np
import pytest

from posjax.data.mlm_masking import mask_windows, split_windows


def test_mask_windows_bert_recipe():
    rng = np.random.default_rng(0)
    V, n, k = 50, 20, 5
    windows = rng.integers(5, V, (400, n)).astype(np.int32)
    windows[:, 0], windows[:, -1] = 2, 3
    b = mask_windows(windows, k, vocab_size=V, mask_id=4, special=(0, 1, 2, 3, 4),
                        rng=np.random.default_rng(1))
    assert b["where"].shape == b["targets"].shape == (400, k)
    assert (b["where"] >= 1).all() and (b["where"] <= n - 2).all()
    assert (np.diff(b["where"], axis=1) > 0).all()  # k distinct positions per row
    np.testing.assert_array_equal(b["targets"], np.take_along_axis(windows, b["where"], 1))
    untouched = np.ones_like(windows, bool)
    np.put_along_axis(untouched, b["where"], False, 1)
    np.testing.assert_array_equal(b["tokens"][untouched], windows[untouched])
    new = np.take_along_axis(b["tokens"], b["where"], 1)
    share = np.mean(new == 4)
    assert 0.76 < share < 0.84  # 80 % [MASK]
    replaced = new[(new != 4) & (new != b["targets"])]
    assert replaced.size and (replaced >= 5).all()  # random tokens are never specials
    again = mask_windows(windows, k, vocab_size=V, mask_id=4, special=(0, 1, 2, 3, 4),
                            rng=np.random.default_rng(1))
    np.testing.assert_array_equal(again["tokens"], b["tokens"])
    with pytest.raises(ValueError, match="cannot mask"):
        mask_windows(windows, n - 1, vocab_size=V, mask_id=4, special=(), rng=rng)


def test_split_windows_blocks():
    w = np.arange(300)[:, None].repeat(4, 1)
    train, held = split_windows(w, 25)
    assert len(held) == 25 and len(train) == 270
    assert set(held[:, 0]) == set(range(90, 100)) | set(range(190, 200)) | set(range(290, 295))
    assert not set(train[:, 0]) & set(held[:, 0])
    with pytest.raises(ValueError, match="held-out windows"):
        split_windows(w, 31)
