"""Write ``minilm_reference.npz``: transformers' ``BertModel`` on the real all-MiniLM-L6-v2.

Run once in a throwaway environment that has torch and transformers (the project's does not)::

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install torch==2.13.0 transformers safetensors tokenizers numpy
    /tmp/refenv/bin/python tests/pretrained/data/make_minilm_reference.py \
        --checkpoint ~/.cache/posjax/all-minilm-l6-v2-0.1.2

(the directory is what ``posjax.pretrained.fetch("all-minilm-l6-v2")`` returns). It tokenises
three real sentences (docstrings of the standard library) with the checkpoint's own
``tokenizer.json``, pads them to the longest (so two of them carry padding), runs
``BertModel`` (eager attention, ``output_hidden_states=True``) in float64 and in float32, and
stores every hidden state (the embedding output and the 6 layers) at the real tokens, and the
mean-pooled sentence embeddings (sentence-transformers' pooling: mean over the real tokens of
the last layer). ``tests/pretrained/test_minilm_reference.py`` compares posjax against it, so
the suite needs no torch. This script imports neither posjax nor jax.
"""
from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np

# Real sentences from the standard library's docstrings (posjax.data.stdlib_text): asyncio's
# locks, pickle, idlelib; different lengths, so the shorter two are padded.
SENTENCES = (
    "Worse, this can cause IDLE to become very slow, even to the point of being completely "
    "unusable.",
    "The protocol version of the pickle is detected automatically.",
    "Acquire a semaphore, decrementing the internal counter by one.",
)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main() -> None:
    import tokenizers
    import torch
    import transformers
    from transformers import BertModel

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--out", type=Path,
                        default=Path(__file__).with_name("minilm_reference.npz"))
    args = parser.parse_args()
    ckpt = args.checkpoint.expanduser()

    tok = tokenizers.Tokenizer.from_file(str(ckpt / "tokenizer.json"))
    tok.no_truncation()
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest
    enc = tok.encode_batch(list(SENTENCES))
    ids = np.asarray([e.ids for e in enc], np.int64)
    mask = np.asarray([e.attention_mask for e in enc], np.int64)

    out = {}
    for dtype, suffix in ((torch.float64, "64"), (torch.float32, "32")):
        model = BertModel.from_pretrained(str(ckpt), attn_implementation="eager",
                                          torch_dtype=torch.float32)
        model = model.to(dtype).eval()
        with torch.no_grad():
            res = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                        token_type_ids=torch.zeros_like(torch.from_numpy(ids)),
                        output_hidden_states=True)
        hidden = np.stack([h.numpy() for h in res.hidden_states])  # [L+1, B, T, d]
        keep = mask.astype(bool)
        out["hidden" + suffix] = hidden[:, keep]  # [L+1, N_real, d] (row-major over B, T)
        last = hidden[-1]
        out["pooled" + suffix] = (last * keep[..., None]).sum(1) / keep.sum(1, keepdims=True)
    out["hidden32"] = out["hidden32"].astype(np.float32)
    out["pooled32"] = out["pooled32"].astype(np.float32)
    np.savez_compressed(
        args.out, sentences=np.asarray(SENTENCES), input_ids=ids.astype(np.int32),
        attention_mask=mask.astype(bool), **out,
        safetensors_sha256=np.asarray(_sha256(ckpt / "model.safetensors")),
        versions=np.asarray(f"torch {torch.__version__}, transformers "
                            f"{transformers.__version__}, tokenizers {tokenizers.__version__}"))
    gap = np.abs(out["hidden64"] - out["hidden32"]).max(axis=(1, 2))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB); tokens per sentence "
          f"{mask.sum(1).tolist()}; transformers float32 vs float64 per hidden state: "
          + ", ".join(f"{g:.2e}" for g in gap))


if __name__ == "__main__":
    main()
