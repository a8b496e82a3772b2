"""Hugging Face checkpoints in posjax, without PyTorch.

* :func:`position_table`: the learned position table of BERT, RoBERTa, DistilBERT, GPT-2 or OPT.
* :func:`load_hf`: a BERT or RoBERTa encoder converted into posjax's ``Transformer`` /
  ``Classifier`` / ``LanguageModel`` (optionally with its PE swapped).
* :func:`rope_from_hf_config`: the posjax PE of a RoPE model's config.
* :func:`write_tiny_checkpoint`: a small random checkpoint in the exact Hugging Face layout
  (offline tests, examples, quick experiments).

See ``docs/pretrained.md``.
"""
from posjax.pretrained.rope_config import ROPE_TYPES, rope_from_hf_config, rope_head_dim

__all__ = ["ROPE_TYPES", "rope_from_hf_config", "rope_head_dim"]
