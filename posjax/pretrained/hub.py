"""Read a Hugging Face checkpoint: ``config.json`` and ``model.safetensors`` as NumPy arrays.

A local directory is read as is (offline). Anything else is taken as a hub id and downloaded with
``huggingface_hub.snapshot_download`` (config, safetensors weights and tokenizer files only); when
the hub cannot be reached the error says how to place the files locally instead.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

CHECKPOINT_FILES = ("config.json", "*.safetensors", "model.safetensors.index.json",
                    "tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                    "merges.txt", "special_tokens_map.json")


def resolve(path_or_id: str | Path) -> Path:
    """The local directory of a checkpoint: ``path_or_id`` itself when it is a directory, else
    the hub snapshot of that id (downloaded once into the Hugging Face cache)."""
    path = Path(path_or_id).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise ValueError(f"{path} is a file; pass the checkpoint directory (config.json + "
                         f"model.safetensors)")
    name = str(path_or_id)
    try:
        from huggingface_hub import snapshot_download
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ValueError("huggingface_hub is needed to download hub ids") from e
    try:
        return Path(snapshot_download(name, allow_patterns=list(CHECKPOINT_FILES)))
    except Exception as e:  # noqa: BLE001 - every failure gets the same actionable message
        raise ValueError(
            f"cannot read checkpoint {name!r}: it is not a local directory and the Hugging Face "
            f"hub download failed ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}). "
            f"Offline, place config.json, model.safetensors and the tokenizer files "
            f"(tokenizer.json or vocab.txt) in a directory and pass its path.") from None


def read_config(directory: Path) -> dict[str, Any]:
    """The parsed ``config.json`` of a checkpoint directory."""
    file = Path(directory) / "config.json"
    if not file.is_file():
        raise ValueError(f"{directory} has no config.json (not a Hugging Face checkpoint)")
    return json.loads(file.read_text())


def read_weights(directory: Path) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint as NumPy arrays (single or sharded safetensors)."""
    from safetensors.numpy import load_file

    directory = Path(directory)
    single = directory / "model.safetensors"
    index = directory / "model.safetensors.index.json"
    if single.is_file():
        return load_file(single)
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        weights: dict[str, np.ndarray] = {}
        for shard in shards:
            weights.update(load_file(directory / shard))
        return weights
    others = sorted(p.name for p in directory.glob("*.safetensors"))
    if len(others) == 1:
        return load_file(directory / others[0])
    if any(directory.glob("*.bin")) or any(directory.glob("*.pt")) or any(directory.glob("*.h5")):
        raise ValueError(f"{directory} holds only PyTorch/TF weights (.bin/.pt/.h5); posjax reads "
                         f"safetensors. Convert once with transformers: "
                         f"AutoModel.from_pretrained(dir).save_pretrained(dir, "
                         f"safe_serialization=True)")
    raise ValueError(f"{directory} has no model.safetensors")


def load_checkpoint(path_or_id: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray], Path]:
    """``(config, weights, directory)`` of a checkpoint directory or hub id."""
    directory = resolve(path_or_id)
    return read_config(directory), read_weights(directory), directory


def find(weights: dict[str, np.ndarray], suffix: str, *, required: bool = True
         ) -> np.ndarray | None:
    """The tensor whose key is ``suffix`` or ends with ``.suffix`` (any model prefix)."""
    hits = [k for k in weights if k == suffix or k.endswith("." + suffix)]
    if len(hits) > 1:  # prefer the shortest prefix (the base model over a head)
        hits.sort(key=len)
    if not hits:
        if required:
            raise ValueError(f"checkpoint has no tensor named *{suffix}")
        return None
    return weights[hits[0]]
