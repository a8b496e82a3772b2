"""``experiments.length_generalization``: train decoders on short algorithmic instances, test on
longer ones (arXiv 2305.19466) (see ``experiment.py``)."""
from experiments.length_generalization.config import (DECIDED, DEFAULT_OUT, EXCLUDED_PES, FULL_PES,
                                                      NEW_PES, PRESETS, QUICK, QUICK_PES,
                                                      REFERENCE_PES, ROPE_SCALINGS, SCHEDULE_PES,
                                                      LengthGeneralizationConfig)
from experiments.length_generalization.experiment import (evaluate_model, main, model_config,
                                                          pe_options, run, run_cell,
                                                          task_options, train_models, widths)
from experiments.length_generalization.report import (nope_claim, nope_verdict, summarise,
                                                      write_outputs)

__all__ = ["DECIDED", "DEFAULT_OUT", "evaluate_model", "EXCLUDED_PES", "FULL_PES",
           "LengthGeneralizationConfig", "main", "model_config", "NEW_PES", "nope_claim",
           "nope_verdict", "pe_options", "PRESETS", "QUICK", "QUICK_PES", "REFERENCE_PES",
           "ROPE_SCALINGS", "run", "run_cell", "SCHEDULE_PES", "summarise",
           "task_options", "train_models", "widths", "write_outputs"]
