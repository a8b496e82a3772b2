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

import re
import warnings
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from posjax.models import Classifier, LanguageModel, Transformer, TransformerConfig
from posjax.pretrained.tables import (ROBERTA_LIKE, find_unique, load_checkpoint_checked,
                                      table_offset)

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


class _Weights:
    """The checkpoint's tensors, looked up by suffix (one match or an error); remembers which
    keys were read so that :func:`load_hf` can account for the rest."""

    def __init__(self, weights: dict[str, np.ndarray]):
        self.weights = weights
        self.used: set[str] = set()
        self.key: dict[str, str] = {}  # suffix -> the key read

    def get(self, suffix: str, required: bool = True) -> np.ndarray | None:
        before = set(self.used)
        value = find_unique(self.weights, suffix, required=required, used=self.used)
        for key in self.used - before:
            self.key[suffix] = key
        return value

    def set(self, param, suffix: str, value: np.ndarray | None = None) -> None:
        """Copy tensor ``suffix`` (or ``value``, read under that name) into ``param``."""
        value = self.get(suffix) if value is None else value
        value = np.asarray(value)
        if tuple(param.shape) != tuple(value.shape):
            raise ValueError(f"tensor {self.key.get(suffix, suffix)} has shape "
                             f"{tuple(value.shape)}; the model built from config.json needs "
                             f"{tuple(param.shape)}")
        param[...] = jnp.asarray(value, jnp.float32)


def _linear(layer: nnx.Linear, weights: _Weights, name: str) -> None:
    weights.set(layer.kernel, name + ".weight", weights.get(name + ".weight").T)
    weights.set(layer.bias, name + ".bias")


def _norm(layer: nnx.LayerNorm, weights: _Weights, name: str) -> None:
    if weights.get(name + ".weight", required=False) is None:
        # original BERT checkpoints name them gamma/beta
        weights.set(layer.scale, name + ".gamma")
        weights.set(layer.bias, name + ".beta")
    else:
        weights.set(layer.scale, name + ".weight")
        weights.set(layer.bias, name + ".bias")


def hf_transformer_config(config: dict[str, Any], *, pe: str | None = None,
                          pe_options: dict[str, Any] | None = None, dtype: str = "float32",
                          num_positions: int | None = None) -> TransformerConfig:
    """The :class:`TransformerConfig` of a BERT/RoBERTa ``config.json`` (with ``pe`` swapped)."""
    if not isinstance(config, dict):
        raise ValueError(f"config.json must hold a JSON object, got a {type(config).__name__}")
    model_type = config.get("model_type")
    if model_type not in ENCODERS:
        raise ValueError(f"load_hf converts BERT and RoBERTa encoders (model_type in "
                         f"{ENCODERS}); got {model_type!r}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"position_embedding_type {config['position_embedding_type']!r} is not "
                         f"supported (only 'absolute')")
    act = config.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in _ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act {act!r}; supported: {sorted(_ACTIVATIONS)}")
    def field(name, default=None, kind=int):
        value = config.get(name, default)
        if value is None:
            raise ValueError(f"config.json of model_type {model_type!r} has no field {name!r} "
                             f"(are these weights of another architecture?)")
        try:
            if isinstance(value, (bool, str)) or not isinstance(value, (int, float)):
                raise TypeError
            if kind is int and float(value) != int(value):
                raise TypeError
            return kind(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"config.json field {name!r} must be {kind.__name__}, got "
                             f"{value!r}") from None

    n = num_positions or field("max_position_embeddings") - table_offset(config)
    name = "learned" if pe in (None, "learned") else pe
    options = dict(pe_options or {})
    if name == "learned":
        n = _learned_rows(options, n)
        options["num_positions"] = n
    return TransformerConfig(
        vocab_size=field("vocab_size"), num_layers=field("num_hidden_layers"),
        d_model=field("hidden_size"), num_heads=field("num_attention_heads"),
        d_ff=field("intermediate_size"), max_len=n, pe=name, pe_options=options,
        causal=False, pre_norm=False, dropout=field("hidden_dropout_prob", 0.1, float),
        attention_dropout=field("attention_probs_dropout_prob", 0.1, float), dtype=dtype,
        activation=_ACTIVATIONS[act], norm_eps=field("layer_norm_eps", 1e-12, float),
        type_vocab_size=field("type_vocab_size", 2), embed_norm=True,
        embed_init_std=field("initializer_range", 0.02, float))


def _learned_rows(options: dict[str, Any], rows: int) -> int:
    """Rows of the checkpoint's table to keep for ``pe="learned"`` with ``pe_options``: options
    that would only shape a fresh initialisation have no effect on a loaded table and are
    refused; ``num_positions`` may keep the first rows only; ``trainable`` is passed on."""
    idle = sorted(set(options) & {"init", "std", "scale"})
    if idle:
        raise ValueError(f"pe_options {idle} have no effect with pe='learned': the table is "
                         f"loaded from the checkpoint (only num_positions and trainable apply)")
    if options.get("per_layer"):
        raise ValueError("pe_options per_layer=True: the checkpoint has one position table, "
                         "not one per layer")
    k = options.get("num_positions")
    if k is None:
        return rows
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 < k <= rows:
        raise ValueError(f"pe_options num_positions must be an integer in [1, {rows}] (the "
                         f"checkpoint's table has {rows} rows), got {k!r}")
    return int(k)


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
      pe_options: options of the swapped-in PE; with ``pe`` None/"learned", ``num_positions``
        (keep the table's first rows) and ``trainable`` (``False`` freezes it) apply, options
        that only shape a fresh initialisation (``init``, ``std``, ``scale``) are refused.
      dtype: computation dtype (parameters stay float32).
      seed: PRNG seed of the weights the checkpoint does not have (new heads, a swapped PE).

    Returns:
      ``(model, config)``. Positions are 0..T-1 (RoBERTa's table offset already removed); the
      token type is 0 unless ``token_type_ids`` are passed to the ``Transformer``.

    Every tensor is looked up by its name under any model prefix; two tensors matching one name
    (e.g. a prefixed and an unprefixed position table) raise ``ValueError``. Tensors that are not
    loaded are accounted for: layers beyond ``num_hidden_layers`` and a second position table
    raise ``ValueError``; ``pooler.*``, ``embeddings.position_ids``, BERT's NSP head, the
    tensors of a head other than ``head`` and (with a swapped PE) the position table are
    expected and skipped silently; any other unused tensor is named in a ``UserWarning``.
    """
    if head not in HEADS:
        raise ValueError(f"head must be one of {HEADS}, got {head!r}")
    hf, weights, _ = load_checkpoint_checked(path_or_id)
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
    w = _Weights(weights)
    w.set(body.embed.embedding, "embeddings.word_embeddings.weight")
    w.set(body.type_embed.embedding, "embeddings.token_type_embeddings.weight")
    _norm(body.embed_norm, w, "embeddings.LayerNorm")
    if cfg.pe == "learned":
        table = w.get("embeddings.position_embeddings.weight")
        offset = table_offset(hf)
        w.set(body.pe.embedding, "embeddings.position_embeddings.weight",
              table[offset:offset + cfg.pe_options["num_positions"]])
    for i, block in enumerate(body.blocks):
        p = f"encoder.layer.{i}."
        _linear(block.attn.query, w, p + "attention.self.query")
        _linear(block.attn.key, w, p + "attention.self.key")
        _linear(block.attn.value, w, p + "attention.self.value")
        _linear(block.attn.out, w, p + "attention.output.dense")
        _norm(block.norm1, w, p + "attention.output.LayerNorm")
        _linear(block.mlp.up, w, p + "intermediate.dense")
        _linear(block.mlp.down, w, p + "output.dense")
        _norm(block.norm2, w, p + "output.LayerNorm")
    if head == "mlm":
        _attach_mlm_head(model, body, hf, w, cfg, rngs)
    elif head == "classifier":
        _attach_classifier_head(model, hf, w, cfg, rngs)
    _account_for_unused(w, cfg, head, path_or_id)
    return model, cfg


# Tensors a BERT/RoBERTa checkpoint may hold that load_hf does not need, by design: the pooler
# (used by head="classifier" only), the position-id buffer, the NSP head of BertForPreTraining,
# and the tensors of a head other than the one requested.
_KNOWN_EXTRAS = re.compile(r"(^|\.)(pooler\.|embeddings\.position_ids$)|^cls\.seq_relationship\.")
_HEAD_TENSORS = {"mlm": re.compile(r"^(cls\.predictions|lm_head)\."),
                 "classifier": re.compile(r"^classifier\.")}
_LAYER = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")
_POSITION_TABLE = re.compile(r"(position_embeddings|embed_positions|wpe)\.weight$")


def _account_for_unused(w: _Weights, cfg: TransformerConfig, head: str | None, source) -> None:
    """Raise on unused tensors that change what the model computes if dropped (layers beyond
    ``num_hidden_layers``, a second position table); warn listing any other unused tensor."""
    unused = sorted(set(w.weights) - w.used)
    layers = [k for k in unused if _LAYER.search(k)]
    if layers:
        ids = sorted({int(_LAYER.search(k).group(1)) for k in layers})
        raise ValueError(f"checkpoint {source} holds tensors of layer(s) {ids} that load_hf "
                         f"would not load (config.json num_hidden_layers = {cfg.num_layers}); "
                         f"e.g. {layers[0]}. Fix num_hidden_layers or the weights")
    tables = [k for k in unused if _POSITION_TABLE.search(k)]
    if tables and cfg.pe == "learned":
        raise ValueError(f"checkpoint {source} holds a second position table {tables} besides "
                         f"{w.key['embeddings.position_embeddings.weight']}; remove one")
    silent = [_KNOWN_EXTRAS] + [rx for name, rx in _HEAD_TENSORS.items() if name != head]
    other = [k for k in unused if not any(rx.search(k) for rx in silent)
             and not (cfg.pe != "learned" and _POSITION_TABLE.search(k))]
    if other:
        shown = ", ".join(other[:8]) + (f", ... ({len(other)} in all)" if len(other) > 8 else "")
        warnings.warn(f"load_hf: {len(other)} tensor(s) of checkpoint {source} were not "
                      f"loaded: {shown}", UserWarning, stacklevel=3)


def _attach_mlm_head(model, body, hf, w: _Weights, cfg, rngs) -> None:
    roberta = hf["model_type"] in ROBERTA_LIKE
    names = (("lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder")
             if roberta else ("cls.predictions.transform.dense",
                              "cls.predictions.transform.LayerNorm", "cls.predictions.bias",
                              "cls.predictions.decoder"))
    bias = w.get(names[2], required=False)
    if bias is None:
        raise ValueError("head='mlm' needs the checkpoint's masked-LM head (a *ForMaskedLM or "
                         "*ForPreTraining checkpoint); this one has none")
    lm_head = MaskedLMHead(body.embed, cfg.d_model, eps=cfg.norm_eps, rngs=rngs,
                           activation="gelu_exact" if roberta else cfg.activation)
    _linear(lm_head.dense, w, names[0])
    _norm(lm_head.norm, w, names[1])
    w.set(lm_head.bias, names[2])
    word = w.get("embeddings.word_embeddings.weight")
    for suffix, tied, what in ((".weight", word, "word embeddings"), (".bias", bias, names[2])):
        value = w.get(names[3] + suffix, required=False)
        if value is not None and not np.array_equal(value, tied):
            raise ValueError(f"the checkpoint's MLM decoder {w.key[names[3] + suffix]} is not "
                             f"tied to the {what}; untied decoders are not supported")
    model.head = lm_head


def _attach_classifier_head(model, hf, w: _Weights, cfg, rngs) -> None:
    head = PoolerHead(cfg.d_model, model.num_classes, rngs=rngs)
    if hf["model_type"] in ROBERTA_LIKE:
        dense, out = "classifier.dense", "classifier.out_proj"
    else:
        dense, out = "pooler.dense", "classifier"
    if w.get(dense + ".weight", required=False) is not None:
        _linear(head.dense, w, dense)
    kernel = find_unique(w.weights, out + ".weight", required=False)
    if kernel is not None and kernel.shape[0] == model.num_classes:
        _linear(head.out, w, out)
    model.head = head


def param_count(model: nnx.Module) -> int:
    """Number of trainable parameters (shared tensors counted once)."""
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(nnx.state(model, nnx.Param))))
