"""Small random checkpoints in the exact Hugging Face layout (offline tests, examples, quick runs).

:func:`write_tiny_checkpoint` writes ``config.json`` and ``model.safetensors`` with the key names,
shapes and row offsets of the real architectures (BERT and RoBERTa with their masked-LM heads as
``BertForPreTraining`` / ``RobertaForMaskedLM`` save them, DistilBERT, GPT-2 and OPT embeddings
and first block), plus a WordPiece ``vocab.txt`` for BERT/DistilBERT when ``words`` are given.
Weights are N(0, 0.02^2) as in the architectures' initialisers, LayerNorm gains near 1.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
ARCHITECTURES = ("bert", "roberta", "distilbert", "gpt2", "opt")


def _block(rng, prefix: str, d: int, f: int, names: dict[str, str]) -> dict[str, np.ndarray]:
    out = {}
    for key, shape in (("q", (d, d)), ("k", (d, d)), ("v", (d, d)), ("o", (d, d)),
                       ("up", (f, d)), ("down", (d, f))):
        out[f"{prefix}{names[key]}.weight"] = rng.normal(0, 0.02, shape)
        out[f"{prefix}{names[key]}.bias"] = rng.normal(0, 0.02, shape[0])
    for key in ("ln1", "ln2"):
        out[f"{prefix}{names[key]}.weight"] = 1.0 + rng.normal(0, 0.1, d)
        out[f"{prefix}{names[key]}.bias"] = rng.normal(0, 0.02, d)
    return out


_BERT_BLOCK = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
               "o": "attention.output.dense", "ln1": "attention.output.LayerNorm",
               "up": "intermediate.dense", "down": "output.dense", "ln2": "output.LayerNorm"}


def write_tiny_checkpoint(directory: str | Path, model_type: str = "bert", *,
                          words: Sequence[str] = (), vocab_size: int | None = None,
                          hidden_size: int = 32, num_layers: int = 2, num_heads: int = 4,
                          intermediate_size: int = 64, max_positions: int = 64,
                          num_labels: int | None = None, seed: int = 0) -> Path:
    """Write a random checkpoint of ``model_type`` to ``directory``; returns the directory.

    Args:
      directory: created if missing.
      model_type: one of ``ARCHITECTURES``.
      words: WordPiece vocabulary after the special tokens (BERT/DistilBERT ``vocab.txt``).
      vocab_size: number of token ids (default: specials + ``words``, at least 32).
      hidden_size, num_layers, num_heads, intermediate_size: the sizes.
      max_positions: usable positions (RoBERTa/OPT tables get their 2 extra offset rows).
      num_labels: also write a sequence-classification head with this many classes.
      seed: NumPy seed of the weights.
    """
    if model_type not in ARCHITECTURES:
        raise ValueError(f"model_type must be one of {ARCHITECTURES}, got {model_type!r}")
    from safetensors.numpy import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab = list(SPECIAL) + [w for w in words if w not in SPECIAL]
    V = vocab_size or max(len(vocab), 32)
    vocab += [f"[unused{i}]" for i in range(V - len(vocab))]  # vocab.txt has V lines, as BERT's
    d, f, L = hidden_size, intermediate_size, num_layers
    w: dict[str, np.ndarray] = {}
    ln = lambda: (1.0 + rng.normal(0, 0.1, d), rng.normal(0, 0.02, d))
    if model_type in ("bert", "roberta"):
        p = f"{model_type}."
        offset = 2 if model_type == "roberta" else 0
        types = 1 if model_type == "roberta" else 2
        w[p + "embeddings.word_embeddings.weight"] = rng.normal(0, 0.02, (V, d))
        table = rng.normal(0, 0.02, (max_positions + offset, d))
        if model_type == "roberta":
            table[1] = 0.0  # the padding_idx row
        w[p + "embeddings.position_embeddings.weight"] = table
        w[p + "embeddings.token_type_embeddings.weight"] = rng.normal(0, 0.02, (types, d))
        w[p + "embeddings.LayerNorm.weight"], w[p + "embeddings.LayerNorm.bias"] = ln()
        for i in range(L):
            w.update(_block(rng, f"{p}encoder.layer.{i}.", d, f, _BERT_BLOCK))
        if model_type == "bert":
            w[p + "pooler.dense.weight"] = rng.normal(0, 0.02, (d, d))
            w[p + "pooler.dense.bias"] = rng.normal(0, 0.02, d)
            w["cls.predictions.transform.dense.weight"] = rng.normal(0, 0.02, (d, d))
            w["cls.predictions.transform.dense.bias"] = rng.normal(0, 0.02, d)
            (w["cls.predictions.transform.LayerNorm.weight"],
             w["cls.predictions.transform.LayerNorm.bias"]) = ln()
            w["cls.predictions.bias"] = rng.normal(0, 0.02, V)
            w["cls.seq_relationship.weight"] = rng.normal(0, 0.02, (2, d))
            w["cls.seq_relationship.bias"] = np.zeros(2)
            if num_labels:
                w["classifier.weight"] = rng.normal(0, 0.02, (num_labels, d))
                w["classifier.bias"] = np.zeros(num_labels)
        else:
            w["lm_head.dense.weight"] = rng.normal(0, 0.02, (d, d))
            w["lm_head.dense.bias"] = rng.normal(0, 0.02, d)
            w["lm_head.layer_norm.weight"], w["lm_head.layer_norm.bias"] = ln()
            w["lm_head.bias"] = rng.normal(0, 0.02, V)
            if num_labels:
                w["classifier.dense.weight"] = rng.normal(0, 0.02, (d, d))
                w["classifier.dense.bias"] = rng.normal(0, 0.02, d)
                w["classifier.out_proj.weight"] = rng.normal(0, 0.02, (num_labels, d))
                w["classifier.out_proj.bias"] = np.zeros(num_labels)
        config = {"architectures": ["BertForPreTraining" if model_type == "bert"
                                    else "RobertaForMaskedLM"],
                  "model_type": model_type, "vocab_size": V, "hidden_size": d,
                  "num_hidden_layers": L, "num_attention_heads": num_heads,
                  "intermediate_size": f, "hidden_act": "gelu",
                  "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                  "max_position_embeddings": max_positions + offset, "type_vocab_size": types,
                  "initializer_range": 0.02,
                  "layer_norm_eps": 1e-5 if model_type == "roberta" else 1e-12,
                  "pad_token_id": 1 if model_type == "roberta" else 0,
                  "position_embedding_type": "absolute"}
    elif model_type == "distilbert":
        p = "distilbert."
        w[p + "embeddings.word_embeddings.weight"] = rng.normal(0, 0.02, (V, d))
        w[p + "embeddings.position_embeddings.weight"] = rng.normal(0, 0.02, (max_positions, d))
        w[p + "embeddings.LayerNorm.weight"], w[p + "embeddings.LayerNorm.bias"] = ln()
        names = {"q": "attention.q_lin", "k": "attention.k_lin", "v": "attention.v_lin",
                 "o": "attention.out_lin", "ln1": "sa_layer_norm", "up": "ffn.lin1",
                 "down": "ffn.lin2", "ln2": "output_layer_norm"}
        for i in range(L):
            w.update(_block(rng, f"{p}transformer.layer.{i}.", d, f, names))
        config = {"architectures": ["DistilBertForMaskedLM"], "model_type": "distilbert",
                  "vocab_size": V, "dim": d, "n_layers": L, "n_heads": num_heads,
                  "hidden_dim": f, "max_position_embeddings": max_positions,
                  "activation": "gelu", "pad_token_id": 0}
    elif model_type == "gpt2":
        p = "transformer."
        w[p + "wte.weight"] = rng.normal(0, 0.02, (V, d))
        w[p + "wpe.weight"] = rng.normal(0, 0.01, (max_positions, d))
        for i in range(L):  # GPT-2's Conv1D stores weights as [in, out]
            q = f"{p}h.{i}."
            w[q + "ln_1.weight"], w[q + "ln_1.bias"] = ln()
            w[q + "attn.c_attn.weight"] = rng.normal(0, 0.02, (d, 3 * d))
            w[q + "attn.c_attn.bias"] = np.zeros(3 * d)
            w[q + "attn.c_proj.weight"] = rng.normal(0, 0.02, (d, d))
            w[q + "attn.c_proj.bias"] = np.zeros(d)
            w[q + "ln_2.weight"], w[q + "ln_2.bias"] = ln()
            w[q + "mlp.c_fc.weight"] = rng.normal(0, 0.02, (d, f))
            w[q + "mlp.c_fc.bias"] = np.zeros(f)
            w[q + "mlp.c_proj.weight"] = rng.normal(0, 0.02, (f, d))
            w[q + "mlp.c_proj.bias"] = np.zeros(d)
        w[p + "ln_f.weight"], w[p + "ln_f.bias"] = ln()
        config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
                  "n_embd": d, "n_layer": L, "n_head": num_heads, "n_positions": max_positions,
                  "n_inner": f, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    else:  # opt
        p = "model.decoder."
        w[p + "embed_tokens.weight"] = rng.normal(0, 0.02, (V, d))
        w[p + "embed_positions.weight"] = rng.normal(0, 0.02, (max_positions + 2, d))
        names = {"q": "self_attn.q_proj", "k": "self_attn.k_proj", "v": "self_attn.v_proj",
                 "o": "self_attn.out_proj", "ln1": "self_attn_layer_norm", "up": "fc1",
                 "down": "fc2", "ln2": "final_layer_norm"}
        for i in range(L):
            w.update(_block(rng, f"{p}layers.{i}.", d, f, names))
        w[p + "final_layer_norm.weight"], w[p + "final_layer_norm.bias"] = ln()
        config = {"architectures": ["OPTForCausalLM"], "model_type": "opt", "vocab_size": V,
                  "hidden_size": d, "num_hidden_layers": L, "num_attention_heads": num_heads,
                  "ffn_dim": f, "max_position_embeddings": max_positions,
                  "word_embed_proj_dim": d, "activation_function": "relu", "pad_token_id": 1}
    if num_labels:
        config["id2label"] = {str(i): f"LABEL_{i}" for i in range(num_labels)}
    save_file({k: np.ascontiguousarray(v, np.float32) for k, v in w.items()},
              directory / "model.safetensors", metadata={"format": "pt"})
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    if model_type in ("bert", "distilbert") and words:
        (directory / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return directory
