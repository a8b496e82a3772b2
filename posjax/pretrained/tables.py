"""The learned position table of a Hugging Face checkpoint, as a NumPy array ``[n, d]``.

Row ``i`` is the vector added at the ``i``-th token of a sequence (position 0 first):

| model_type | tensor | rows dropped |
|---|---|---|
| bert | ``embeddings.position_embeddings.weight`` | none |
| roberta, xlm-roberta, camembert | ``embeddings.position_embeddings.weight`` | the first ``pad_token_id + 1`` (2): RoBERTa numbers positions from ``padding_idx + 1`` |
| distilbert | ``embeddings.position_embeddings.weight`` | none |
| gpt2 | ``wpe.weight`` | none |
| opt | ``decoder.embed_positions.weight`` | the first 2 (OPT's fixed offset) |

``post_layernorm=True`` (BERT, RoBERTa, DistilBERT) returns ``LN(P_i)`` row by row with the
checkpoint's embedding LayerNorm (gain, bias, epsilon): the table as the first block would see it
if no token or segment vector were added. In the models the LayerNorm acts on the sum
word + position (+ type), so this is one reading of "the position table after the LayerNorm";
see ``docs/pretrained.md``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np


ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")
TABLES = {"bert": "embeddings.position_embeddings.weight",
          "distilbert": "embeddings.position_embeddings.weight",
          "gpt2": "wpe.weight", "opt": "decoder.embed_positions.weight",
          **{m: "embeddings.position_embeddings.weight" for m in ROBERTA_LIKE}}


def find_unique(weights: dict[str, np.ndarray], suffix: str, *, required: bool = True,
                used: set[str] | None = None) -> np.ndarray | None:
    """The one tensor whose key is ``suffix`` or ends with ``.suffix`` (any model prefix).

    Unlike :func:`posjax.pretrained.hub.find` it never picks among several: two matching keys
    (e.g. ``bert.embeddings.position_embeddings.weight`` and an unprefixed duplicate) raise a
    ``ValueError`` naming both. ``used`` collects the key that was read.
    """
    hits = sorted(k for k in weights if k == suffix or k.endswith("." + suffix))
    if len(hits) > 1:
        raise ValueError(f"ambiguous checkpoint: {len(hits)} tensors match *{suffix}: "
                         f"{', '.join(hits)}; remove all but one")
    if not hits:
        if required:
            raise ValueError(f"checkpoint has no tensor named *{suffix}")
        return None
    if used is not None:
        used.add(hits[0])
    return weights[hits[0]]


def table_offset(config: dict) -> int:
    """Rows before position 0 in the checkpoint's table (RoBERTa: pad_token_id + 1; OPT: 2)."""
    model_type = config.get("model_type")
    if model_type in ROBERTA_LIKE:
        pad = config.get("pad_token_id", 1)
        if isinstance(pad, bool) or not isinstance(pad, int) or pad < 0:
            raise ValueError(f"config.json field 'pad_token_id' must be a non-negative integer "
                             f"for {model_type} (its position table starts at pad_token_id + "
                             f"1), got {pad!r}")
        return pad + 1
    return 2 if model_type == "opt" else 0


def load_checkpoint_checked(path_or_id: str | Path) -> tuple[dict, dict[str, np.ndarray], Path]:
    """``(config, weights, directory)`` as :func:`posjax.pretrained.hub.load_checkpoint`, with
    every failure a ``ValueError`` naming the file: ``config.json`` that is not JSON (line and
    column) or not a JSON object, a truncated, empty or otherwise unreadable safetensors file."""
    import json

    from posjax.pretrained.hub import read_weights, resolve

    directory = resolve(path_or_id)
    file = Path(directory) / "config.json"
    if not file.is_file():
        raise ValueError(f"{directory} has no config.json (not a Hugging Face checkpoint)")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{file}: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{file}:{e.lineno}:{e.colno}: not valid JSON ({e.msg})") from None
    if not isinstance(config, dict):
        raise ValueError(f"{file}: must hold a JSON object (field: value), got a JSON "
                         f"{type(config).__name__}")
    try:
        weights = read_weights(directory)
    except ValueError as e:
        if "safetensors" in str(e) or "has no" in str(e):
            raise
        raise ValueError(f"cannot read the safetensors weights in {directory}: {e}") from None
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
        names = sorted(p.name for p in Path(directory).glob("*.safetensors"))
        raise ValueError(f"cannot read the safetensors weights {', '.join(names) or ''} in "
                         f"{directory} (truncated, empty or not safetensors): "
                         f"{type(e).__name__}: {str(e)[:200]}") from None
    return config, weights, Path(directory)


def layer_norm_rows(x: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm of every row of ``x`` (float64)."""
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gain + bias


def embedding_layer_norm(weights: dict, config: dict) -> tuple[np.ndarray, np.ndarray, float]:
    """(gain, bias, eps) of the embedding LayerNorm (accepts the old gamma/beta names)."""
    gain = find_unique(weights, "embeddings.LayerNorm.weight", required=False)
    if gain is None:
        gain = find_unique(weights, "embeddings.LayerNorm.gamma")
        bias = find_unique(weights, "embeddings.LayerNorm.beta")
    else:
        bias = find_unique(weights, "embeddings.LayerNorm.bias")
    eps = float(config.get("layer_norm_eps", 1e-12))
    return gain, bias, eps


def position_table(path_or_id: str | Path, *, post_layernorm: bool = False) -> np.ndarray:
    """The learned absolute position table ``[n, d]`` (float32) of a checkpoint.

    Args:
      path_or_id: a local checkpoint directory or a Hugging Face hub id.
      post_layernorm: apply the embedding LayerNorm to each row (BERT-family only).

    Raises:
      ValueError: an architecture without a learned table (e.g. a RoPE model: see
        :func:`posjax.pretrained.rope_from_hf_config`), or a missing tensor.
    """
    config, weights, _ = load_checkpoint_checked(path_or_id)
    model_type = config.get("model_type")
    if model_type not in TABLES:
        raise ValueError(f"no learned position table known for model_type {model_type!r}; "
                         f"supported: {', '.join(sorted(TABLES))}")
    table = find_unique(weights, TABLES[model_type])[table_offset(config):]
    if post_layernorm:
        if model_type in ("gpt2", "opt"):
            raise ValueError(f"{model_type} has no embedding LayerNorm; post_layernorm needs a "
                             f"BERT-family checkpoint")
        table = layer_norm_rows(table, *embedding_layer_norm(weights, config))
    return np.asarray(table, np.float32)
