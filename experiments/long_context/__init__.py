"""``experiments.long_context``: perplexity, passkey / needle retrieval and attention diagnostics
of small causal LMs out to 8x their training length, per PE (see ``experiment.py``)."""
from experiments.long_context.config import (CPU_PES, DEFAULT_OUT, OTHER_PES, PRESETS, QUICK_PES,
                                             ROPE_SCALINGS, LongContextConfig)
from experiments.long_context.experiment import main, run

__all__ = ["CPU_PES", "DEFAULT_OUT", "LongContextConfig", "OTHER_PES", "PRESETS", "QUICK_PES",
           "ROPE_SCALINGS", "main", "run"]
