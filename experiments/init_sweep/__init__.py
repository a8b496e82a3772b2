"""``experiments.init_sweep``: σ sweep of the learned-PE initialisation on the Latin Square Task
(arXiv 2406.08272) (see ``experiment.py``)."""
from experiments.init_sweep.config import (COMPANION_SEEDS, DECIDED, FIXED_PES, PRESETS, REFERENCE,
                                           InitSweepConfig)
from experiments.init_sweep.experiment import (accuracies, build_model, groups, logits_fn,
                                               logits_of, main, make_loss, model_arrays, pe_spec,
                                               run_group)
from experiments.init_sweep.report import (claims, make_plots, summarise, write_report)

__all__ = ["accuracies", "build_model", "claims", "COMPANION_SEEDS", "DECIDED", "FIXED_PES",
           "groups", "InitSweepConfig", "logits_fn", "logits_of", "main", "make_loss", "make_plots",
           "model_arrays", "pe_spec", "PRESETS", "REFERENCE", "run_group", "summarise",
           "write_report"]
