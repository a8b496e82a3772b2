"""Conversion error of ``posjax.pretrained.load_hf`` against Hugging Face transformers (PyTorch).

Two steps, because posjax does not depend on PyTorch:

1. in the posjax environment: ``python -m benchmarks.hf_conversion_check write DIR`` writes tiny
   BERT and RoBERTa checkpoints (``write_tiny_checkpoint``) and posjax's outputs;
2. in an environment with ``torch`` and ``transformers``:
   ``python benchmarks/hf_conversion_check.py compare DIR`` runs ``BertForPreTraining`` /
   ``RobertaForMaskedLM`` / ``*ForSequenceClassification`` on the same tokens and prints the max
   absolute differences (hidden states, MLM logits, classifier logits; float32).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

TOKENS = np.array([[2, 7, 9, 11, 5, 3, 4, 8], [2, 13, 8, 21, 30, 17, 6, 3]])


def write(root: Path) -> None:
    import jax.numpy as jnp

    from posjax.pretrained import load_hf, write_tiny_checkpoint
    for arch in ("bert", "roberta"):
        path = write_tiny_checkpoint(root / arch, arch, hidden_size=64, num_layers=3,
                                     num_heads=4, intermediate_size=128, num_labels=2, seed=7)
        out = {}
        for head in (None, "mlm", "classifier"):
            model, _ = load_hf(path, head=head)
            out[str(head)] = np.asarray(model(jnp.asarray(TOKENS)), np.float32)
        np.savez(root / f"{arch}_posjax.npz", **out)


def compare(root: Path) -> None:
    import torch
    from transformers import (BertForPreTraining, BertForSequenceClassification,
                              RobertaForMaskedLM, RobertaForSequenceClassification)
    classes = {"bert": (BertForPreTraining, BertForSequenceClassification),
               "roberta": (RobertaForMaskedLM, RobertaForSequenceClassification)}
    ids = torch.tensor(TOKENS)
    for arch, (lm_cls, clf_cls) in classes.items():
        ours = np.load(root / f"{arch}_posjax.npz")
        with torch.no_grad():
            lm = lm_cls.from_pretrained(root / arch).eval()
            out = lm(ids, output_hidden_states=True)
            hidden = out.hidden_states[-1].numpy()
            logits = (out.prediction_logits if arch == "bert" else out.logits).numpy()
            clf = clf_cls.from_pretrained(root / arch).eval()
            clf_logits = clf(ids).logits.numpy()
        for name, ref, got in (("hidden", hidden, ours["None"]), ("mlm", logits, ours["mlm"]),
                               ("classifier", clf_logits, ours["classifier"])):
            print(f"{arch:8s} {name:10s} max|diff| = {np.max(np.abs(ref - got)):.2e} "
                  f"(max|ref| = {np.max(np.abs(ref)):.2f})")


if __name__ == "__main__":
    {"write": write, "compare": compare}[sys.argv[1]](Path(sys.argv[2]))
