"""Transformer models with pluggable positional encodings."""
from posjax.models.attention import SelfAttention, attention_weights
from posjax.models.config import TransformerConfig
from posjax.models.heads import Classifier, LanguageModel, TokenRegressor, pool
from posjax.models.transformer import Block, Transformer, make_mask
from posjax.models.generate import generate, kv_cache_supported
from posjax.models.packing import segment_pool, segment_positions, segment_runs
from posjax.models.pe_swap import rebuild_with_config, replace_pe

__all__ = ["Block", "Classifier", "LanguageModel", "SelfAttention", "Transformer",
           "TransformerConfig", "attention_weights", "make_mask", "pool",
           "TokenRegressor", "generate", "kv_cache_supported", "rebuild_with_config", "replace_pe", "segment_pool", "segment_positions", "segment_runs"]
