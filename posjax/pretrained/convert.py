"""BERT and RoBERTa checkpoints converted into posjax models.

The encoder (Devlin et al., BERT, arXiv 1810.04805; Liu et al., RoBERTa, arXiv 1907.11692) is
posjax's :class:`~posjax.models.Transformer` with post-LayerNorm blocks, erf GELU
(``activation="gelu_exact"``; "gelu_new" checkpoints get the tanh form), token-type embeddings,
the embedding LayerNorm and the checkpoint's ``layer_norm_eps``. Every weight is copied
(``nn.Linear``'s ``[out, in]`` transposed to ``nnx.Linear``'s ``[in, out]``). Heads:

* ``head=None``: the bare :class:`Transformer` (hidden states, as ``BertModel``'s
  ``last_hidden_state``).
* ``head="mlm"``: a :class:`LanguageModel` whose head is the checkpoint's masked-LM head
  (dense, activation, LayerNorm, decoder tied to the word embeddings, bias).
* ``head="classifier"``: a :class:`Classifier` pooling the first token through the checkpoint's
  pooler (BERT: dense + tanh) or a fresh one (RoBERTa's classification head: dense + tanh), then a
  linear layer to ``num_classes`` (the checkpoint's own when it has one of that size, else new).

``pe=`` swaps the positional encoding and keeps every other weight: ``None``/"learned" keeps the
checkpoint's table (RoBERTa's 2 offset rows removed), any registry name builds that PE with
``pe_options`` (e.g. ``pe="mds", pe_options={"coords": X}``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.models import Classifier, LanguageModel, Transformer, TransformerConfig
from posjax.pretrained.hub import find, load_checkpoint
from posjax.pretrained.tables import ROBERTA_LIKE, table_offset

ENCODERS = ("bert", *ROBERTA_LIKE)
HEADS = (None, "mlm", "classifier")
_ACTIVATIONS = {"gelu": "gelu_exact", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                "relu": "relu", "silu": "silu", "swish": "silu"}


class PoolerHead(nnx.Module):
    """``tanh(W_p h + b_p)`` then a linear layer to the classes: BERT's pooler + classifier
    (and RoBERTa's classification head). Input ``[B, d]`` (the pooled first token)."""

    def __init__(self, d_model: int, num_classes: int, *, rngs: nnx.Rngs):
        self.dense = nnx.Linear(d_model, d_model, rngs=rngs)
        self.out = nnx.Linear(d_model, num_classes, rngs=rngs)

    def __call__(self, x):
        return self.out(jnp.tanh(self.dense(x)))


class MaskedLMHead(nnx.Module):
    """BERT's masked-LM head: dense, activation, LayerNorm, then the word-embedding matrix
    (shared with the model's token embedding) plus a bias. ``[N, d] -> [N, V]``."""

    def __init__(self, embed: nnx.Embed, d_model: int, *, activation: str, eps: float,
                 rngs: nnx.Rngs):
        from posjax.models.transformer import _ACT
        self.embed = embed
        self.dense = nnx.Linear(d_model, d_model, rngs=rngs)
        self.act = _ACT[activation]
        self.norm = nnx.LayerNorm(d_model, epsilon=eps, rngs=rngs)
        self.bias = nnx.Param(jnp.zeros(embed.embedding.shape[0], jnp.float32))

    def __call__(self, x):
        h = self.norm(self.act(self.dense(x)))
        return h @ self.embed.embedding[...].astype(h.dtype).T + self.bias[...].astype(h.dtype)


def _set(param, value: np.ndarray) -> None:
    value = jnp.asarray(value, jnp.float32)
    if param.shape != value.shape:
        raise ValueError(f"shape mismatch while loading: model {param.shape}, checkpoint "
                         f"{value.shape}")
    param.value = value


def _linear(layer: nnx.Linear, weights: dict, name: str) -> None:
    _set(layer.kernel, find(weights, name + ".weight").T)
    _set(layer.bias, find(weights, name + ".bias"))


def _norm(layer: nnx.LayerNorm, weights: dict, name: str) -> None:
    gain = find(weights, name + ".weight", required=False)
    if gain is None:  # original BERT checkpoints name them gamma/beta
        gain, bias = find(weights, name + ".gamma"), find(weights, name + ".beta")
    else:
        bias = find(weights, name + ".bias")
    _set(layer.scale, gain)
    _set(layer.bias, bias)


def hf_transformer_config(config: dict[str, Any], *, pe: str | None = None,
                          pe_options: dict[str, Any] | None = None, dtype: str = "float32",
                          num_positions: int | None = None) -> TransformerConfig:
    """The :class:`TransformerConfig` of a BERT/RoBERTa ``config.json`` (with ``pe`` swapped)."""
    model_type = config.get("model_type")
    if model_type not in ENCODERS:
        raise ValueError(f"load_hf converts BERT and RoBERTa encoders (model_type in "
                         f"{ENCODERS}); got {model_type!r}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"position_embedding_type {config['position_embedding_type']!r} is not "
                         f"supported (only 'absolute')")
    act = config.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act {act!r}; supported: {sorted(_ACTIVATIONS)}")
    n = num_positions or int(config["max_position_embeddings"]) - table_offset(config)
    name = "learned" if pe in (None, "learned") else pe
    options = {"num_positions": n} if name == "learned" else dict(pe_options or {})
    return TransformerConfig(
        vocab_size=int(config["vocab_size"]), num_layers=int(config["num_hidden_layers"]),
        d_model=int(config["hidden_size"]), num_heads=int(config["num_attention_heads"]),
        d_ff=int(config["intermediate_size"]), max_len=n, pe=name, pe_options=options,
        causal=False, pre_norm=False, dropout=float(config.get("hidden_dropout_prob", 0.1)),
        attention_dropout=float(config.get("attention_probs_dropout_prob", 0.1)), dtype=dtype,
        activation=_ACTIVATIONS[act], norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        type_vocab_size=int(config.get("type_vocab_size", 2)), embed_norm=True,
        embed_init_std=float(config.get("initializer_range", 0.02)))


def _num_labels(config: dict, num_classes: int | None) -> int:
    if num_classes is not None:
        return int(num_classes)
    if config.get("id2label"):
        return len(config["id2label"])
    return int(config.get("num_labels", 2))


def load_hf(path_or_id: str | Path, *, head: str | None = None, num_classes: int | None = None,
            pe: str | None = None, pe_options: dict[str, Any] | None = None,
            dtype: str = "float32", seed: int = 0) -> tuple[nnx.Module, TransformerConfig]:
    """A BERT/RoBERTa checkpoint as a posjax model.

    Args:
      path_or_id: local checkpoint directory (offline) or Hugging Face hub id.
      head: None (``Transformer``), "mlm" (``LanguageModel``) or "classifier" (``Classifier``).
      num_classes: classes of the classifier head (default: the config's labels, else 2).
      pe: None/"learned" keeps the checkpoint's position table; another registry name swaps it.
      pe_options: options of the swapped-in PE.
      dtype: computation dtype (parameters stay float32).
      seed: PRNG seed of the weights the checkpoint does not have (new heads, a swapped PE).

    Returns:
      ``(model, config)``. Positions are 0..T-1 (RoBERTa's table offset already removed); the
      token type is 0 unless ``token_type_ids`` are passed to the ``Transformer``.
    """
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    hf, weights, _ = load_checkpoint(path_or_id)
    cfg = hf_transformer_config(hf, pe=pe, pe_options=pe_options, dtype=dtype)
    rngs = nnx.Rngs(seed)
    if head is None:
        model = Transformer(cfg, rngs=rngs)
        body = model
    elif head == "mlm":
        model = LanguageModel(cfg, rngs=rngs)
        body = model.transformer
    else:
        model = Classifier(cfg, _num_labels(hf, num_classes), "cls", rngs=rngs)
        body = model.transformer
    _set(body.embed.embedding, find(weights, "embeddings.word_embeddings.weight"))
    _set(body.type_embed.embedding, find(weights, "embeddings.token_type_embeddings.weight"))
    _norm(body.embed_norm, weights, "embeddings.LayerNorm")
    if cfg.pe == "learned":
        table = find(weights, "embeddings.position_embeddings.weight")[table_offset(hf):]
        _set(body.pe.embedding, table)
    for i, block in enumerate(body.blocks):
        p = f"encoder.layer.{i}."
        _linear(block.attn.query, weights, p + "attention.self.query")
        _linear(block.attn.key, weights, p + "attention.self.key")
        _linear(block.attn.value, weights, p + "attention.self.value")
        _linear(block.attn.out, weights, p + "attention.output.dense")
        _norm(block.norm1, weights, p + "attention.output.LayerNorm")
        _linear(block.mlp.up, weights, p + "intermediate.dense")
        _linear(block.mlp.down, weights, p + "output.dense")
        _norm(block.norm2, weights, p + "output.LayerNorm")
    if head == "mlm":
        _attach_mlm_head(model, body, hf, weights, cfg, rngs)
    elif head == "classifier":
        _attach_classifier_head(model, hf, weights, cfg, rngs)
    return model, cfg


def _attach_mlm_head(model, body, hf, weights, cfg, rngs) -> None:
    roberta = hf["model_type"] in ROBERTA_LIKE
    names = (("lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder.weight")
             if roberta else ("cls.predictions.transform.dense",
                              "cls.predictions.transform.LayerNorm", "cls.predictions.bias",
                              "cls.predictions.decoder.weight"))
    if find(weights, names[2], required=False) is None:
        raise ValueError("head='mlm' needs the checkpoint's masked-LM head (a *ForMaskedLM or "
                         "*ForPreTraining checkpoint); this one has none")
    lm_head = MaskedLMHead(body.embed, cfg.d_model, eps=cfg.norm_eps, rngs=rngs,
                           activation="gelu_exact" if roberta else cfg.activation)
    _linear(lm_head.dense, weights, names[0])
    _norm(lm_head.norm, weights, names[1])
    _set(lm_head.bias, find(weights, names[2]))
    decoder = find(weights, names[3], required=False)
    word = find(weights, "embeddings.word_embeddings.weight")
    if decoder is not None and not np.array_equal(decoder, word):
        raise ValueError("the checkpoint's MLM decoder is not tied to the word embeddings; "
                         "untied decoders are not supported")
    model.head = lm_head


def _attach_classifier_head(model, hf, weights, cfg, rngs) -> None:
    head = PoolerHead(cfg.d_model, model.num_classes, rngs=rngs)
    if hf["model_type"] in ROBERTA_LIKE:
        dense, out = "classifier.dense", "classifier.out_proj"
    else:
        dense, out = "pooler.dense", "classifier"
    if find(weights, dense + ".weight", required=False) is not None:
        _linear(head.dense, weights, dense)
    kernel = find(weights, out + ".weight", required=False)
    if kernel is not None and kernel.shape[0] == model.num_classes:
        _linear(head.out, weights, out)
    model.head = head


def param_count(model: nnx.Module) -> int:
    """Number of trainable parameters (shared tensors counted once)."""
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(nnx.state(model, nnx.Param))))
