"""An independent float64 NumPy forward of BERT/RoBERTa from raw checkpoint tensors (the
reference of the conversion tests; written from the architecture, arXiv 1810.04805)."""
from __future__ import annotations

import math

import numpy as np

_erf = np.vectorize(math.erf)


def _ln(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _lin(w, name, x):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def bert_forward(weights, config, tokens, padding_mask=None):
    """Hidden states ``[B, T, d]`` (float64) of a BERT/RoBERTa checkpoint."""
    w = {k.split(".", 1)[1] if k.split(".", 1)[0] in ("bert", "roberta") else k:
         np.asarray(v, np.float64) for k, v in weights.items()}
    eps = config["layer_norm_eps"]
    offset = config["pad_token_id"] + 1 if config["model_type"] == "roberta" else 0
    B, T = tokens.shape
    x = (w["embeddings.word_embeddings.weight"][tokens]
         + w["embeddings.position_embeddings.weight"][offset + np.arange(T)][None]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = _ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    H = config["num_attention_heads"]
    dh = x.shape[-1] // H
    keep = np.ones((B, T), bool) if padding_mask is None else np.asarray(padding_mask, bool)
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        split = lambda y: y.reshape(B, T, H, dh).transpose(0, 2, 1, 3)
        q = split(_lin(w, p + "attention.self.query", x))
        k = split(_lin(w, p + "attention.self.key", x))
        v = split(_lin(w, p + "attention.self.value", x))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
        s = np.where(keep[:, None, None, :], s, -1e30)
        a = np.exp(s - s.max(-1, keepdims=True))
        a = a / a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, H * dh)
        x = _ln(x + _lin(w, p + "attention.output.dense", ctx),
                w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        h = _lin(w, p + "output.dense", _gelu(_lin(w, p + "intermediate.dense", x)))
        x = _ln(x + h, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x, w


def mlm_logits(weights, config, tokens):
    x, w = bert_forward(weights, config, tokens)
    if config["model_type"] == "roberta":
        h = _ln(_gelu(_lin(w, "lm_head.dense", x)), w["lm_head.layer_norm.weight"],
                w["lm_head.layer_norm.bias"], config["layer_norm_eps"])
        return h @ w["embeddings.word_embeddings.weight"].T + w["lm_head.bias"]
    h = _ln(_gelu(_lin(w, "cls.predictions.transform.dense", x)),
            w["cls.predictions.transform.LayerNorm.weight"],
            w["cls.predictions.transform.LayerNorm.bias"], config["layer_norm_eps"])
    return h @ w["embeddings.word_embeddings.weight"].T + w["cls.predictions.bias"]


def classifier_logits(weights, config, tokens):
    x, w = bert_forward(weights, config, tokens)
    if config["model_type"] == "roberta":
        return _lin(w, "classifier.out_proj", np.tanh(_lin(w, "classifier.dense", x[:, 0])))
    return _lin(w, "classifier", np.tanh(_lin(w, "pooler.dense", x[:, 0])))
