"""load_hf and position_table on tiny checkpoints written in the Hugging Face layout, against an
independent float64 NumPy forward (tests/pretrained/_numpy_bert.py)."""
from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from posjax.models import Classifier, LanguageModel, Transformer
from posjax.pretrained import load_hf, position_table, write_tiny_checkpoint
from _numpy_bert import bert_forward, classifier_logits, mlm_logits  # noqa: E402

TOKENS = np.array([[2, 7, 9, 11, 5, 3, 0, 0], [2, 13, 8, 21, 30, 17, 6, 3]])
TOL = 1e-4  # float32 conversion against the float64 reference


@pytest.fixture(scope="module", params=["bert", "roberta"])
def checkpoint(request, tmp_path_factory):
    path = write_tiny_checkpoint(tmp_path_factory.mktemp(request.param), request.param,
                                 num_labels=3, seed=1)
    return path, json.loads((path / "config.json").read_text()), load_file(path / "model.safetensors")


def test_encoder_hidden_states_match_the_numpy_reference(checkpoint):
    path, config, weights = checkpoint
    model, cfg = load_hf(path)
    assert isinstance(model, Transformer) and not cfg.pre_norm and cfg.activation == "gelu_exact"
    assert cfg.norm_eps == config["layer_norm_eps"]
    got = np.asarray(model(jnp.asarray(TOKENS)), np.float64)
    ref, _ = bert_forward(weights, config, TOKENS)
    assert np.max(np.abs(got - ref)) < TOL


def test_padding_mask_matches_the_reference_on_real_tokens(checkpoint):
    path, config, weights = checkpoint
    model, _ = load_hf(path)
    mask = TOKENS != 0
    mask[1] = True
    got = np.asarray(model(jnp.asarray(TOKENS), padding_mask=jnp.asarray(mask)), np.float64)
    ref, _ = bert_forward(weights, config, TOKENS, padding_mask=mask)
    assert np.max(np.abs(got - ref)[mask]) < TOL
    unmasked, _ = bert_forward(weights, config, TOKENS)
    assert np.max(np.abs(got[0, :6] - unmasked[0, :6])) > 1e-3  # the mask matters (negative control)


def test_mlm_head_matches_the_reference(checkpoint):
    path, config, weights = checkpoint
    model, _ = load_hf(path, head="mlm")
    assert isinstance(model, LanguageModel)
    got = np.asarray(model(jnp.asarray(TOKENS)), np.float64)
    ref = mlm_logits(weights, config, TOKENS)
    assert got.shape == ref.shape and np.max(np.abs(got - ref)) < TOL


def test_classifier_head_matches_the_reference(checkpoint):
    path, config, weights = checkpoint
    model, _ = load_hf(path, head="classifier")
    assert isinstance(model, Classifier) and model.num_classes == 3
    got = np.asarray(model(jnp.asarray(TOKENS)), np.float64)
    assert np.max(np.abs(got - classifier_logits(weights, config, TOKENS))) < TOL


def test_pe_swap_keeps_every_other_weight(checkpoint):
    path, config, weights = checkpoint
    learned, _ = load_hf(path)
    swapped, cfg = load_hf(path, pe="rope")
    assert cfg.pe == "rope"
    a = nnx.state(learned, nnx.Param).flat_state()
    b = nnx.state(swapped, nnx.Param).flat_state()
    shared = {k for k in dict(a) if k in dict(b)}
    assert {k for k in dict(a)} - shared == {("pes", 0, "embedding")}
    for k in shared:
        np.testing.assert_array_equal(np.asarray(dict(a)[k][...]), np.asarray(dict(b)[k][...]))
    none, _ = load_hf(path, pe="none")
    out = np.asarray(none(jnp.asarray(TOKENS[:, ::-1].copy())))
    ref = np.asarray(none(jnp.asarray(TOKENS)))  # no PE: permutation-equivariant
    np.testing.assert_allclose(out[:, ::-1], ref, atol=1e-5)


def test_position_table_offsets_and_layernorm(tmp_path):
    for arch, key, offset in [("bert", "bert.embeddings.position_embeddings.weight", 0),
                              ("roberta", "roberta.embeddings.position_embeddings.weight", 2),
                              ("distilbert", "distilbert.embeddings.position_embeddings.weight", 0),
                              ("gpt2", "transformer.wpe.weight", 0),
                              ("opt", "model.decoder.embed_positions.weight", 2)]:
        path = write_tiny_checkpoint(tmp_path / arch, arch, max_positions=24)
        raw = load_file(path / "model.safetensors")[key]
        table = position_table(path)
        assert table.shape == (24, 32)
        np.testing.assert_array_equal(table, raw[offset:])
    table = position_table(tmp_path / "bert", post_layernorm=True)
    w = load_file(tmp_path / "bert" / "model.safetensors")
    row = w["bert.embeddings.position_embeddings.weight"][5].astype(np.float64)
    z = (row - row.mean()) / np.sqrt(row.var() + 1e-12)
    expected = z * w["bert.embeddings.LayerNorm.weight"] + w["bert.embeddings.LayerNorm.bias"]
    np.testing.assert_allclose(table[5], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="no embedding LayerNorm"):
        position_table(tmp_path / "gpt2", post_layernorm=True)


def test_gamma_beta_names_and_bad_inputs(tmp_path):
    path = write_tiny_checkpoint(tmp_path / "old", "bert", seed=3)
    w = load_file(path / "model.safetensors")
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
               for k, v in w.items()}
    save_file(renamed, path / "model.safetensors")
    model, _ = load_hf(path)
    config = json.loads((path / "config.json").read_text())
    ref, _ = bert_forward(w, config, TOKENS)
    assert np.max(np.abs(np.asarray(model(jnp.asarray(TOKENS)), np.float64) - ref)) < TOL
    (path / "model.safetensors").rename(path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="safetensors"):
        load_hf(path)
    gpt2 = write_tiny_checkpoint(tmp_path / "gpt2", "gpt2")
    with pytest.raises(ValueError, match="BERT and RoBERTa"):
        load_hf(gpt2)
    with pytest.raises(ValueError, match="head must be"):
        load_hf(gpt2, head="lm")
    with pytest.raises(ValueError, match="hub download failed"):
        position_table(str(tmp_path / "no-such-dir"))
