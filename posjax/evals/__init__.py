"""``posjax.evals``: the evaluations PE papers report, for any causal posjax ``LanguageModel``.

* :func:`perplexity_by_length` - token NLL / perplexity by context length and position,
  non-overlapping or sliding windows.
* :func:`passkey_retrieval`, :func:`needle_retrieval` - exact-match retrieval accuracy over a
  length x depth grid (arXiv 2305.16300; the RULER family, arXiv 2404.06654).
* :func:`attention_diagnostics` - entropy, mean distance, sink mass and local mass of attention
  per layer and head, by length.
* :func:`rope_base_bound` - the smallest RoPE base for a context length (arXiv 2405.14591);
  :func:`rope_wavelengths` - the wavelengths of a rotary PE against a target length.
"""
from posjax.evals.attention_stats import attention_diagnostics, attention_statistics
from posjax.evals.perplexity import perplexity_by_length, token_nll
from posjax.evals.retrieval import (RetrievalVocab, needle_prompts, needle_retrieval,
                                    passkey_prompts, passkey_retrieval)
from posjax.evals.rope_bounds import (rope_base_bound, rope_discrimination, rope_wavelengths,
                                      rotary_pe_names)

__all__ = ["perplexity_by_length", "token_nll", "passkey_retrieval", "needle_retrieval",
           "passkey_prompts", "needle_prompts", "RetrievalVocab", "attention_diagnostics",
           "attention_statistics", "rope_base_bound", "rope_discrimination", "rope_wavelengths",
           "rotary_pe_names"]
