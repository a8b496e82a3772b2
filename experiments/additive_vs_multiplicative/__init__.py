"""``experiments.additive_vs_multiplicative``: additive vs multiplicative PEs on trigger
distance and counting, and the single-head deposit (arXiv 2505.13027) (see
``experiment.py``)."""
from experiments.additive_vs_multiplicative.config import (DECIDED, PES, PRESETS, QUICK, REPORTED,
                                                           AdditiveVsMultiplicativeConfig)
from experiments.additive_vs_multiplicative.experiment import (main, make_data, pe_options,
                                                               run_cell, seed_pairs)
from experiments.additive_vs_multiplicative.report import (claims, summarise)

__all__ = ["AdditiveVsMultiplicativeConfig", "claims", "DECIDED", "main", "make_data", "pe_options",
           "PES", "PRESETS", "QUICK", "REPORTED", "run_cell", "seed_pairs", "summarise"]
