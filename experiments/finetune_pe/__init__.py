"""``experiments.finetune_pe``: fine-tune a pretrained encoder with its PE swapped
(arXiv 2604.05217; see ``experiment.py``)."""
from experiments.finetune_pe.config import (PAPER_IMDB, PES, PRESETS, QUICK_WORDS,
                                            FinetunePEConfig, make_config, negation_corpus,
                                            write_quick_assets)
from experiments.finetune_pe.experiment import finetune_cell, geometry, main, run, table_norm
from experiments.finetune_pe.report import report, summarise, table

__all__ = ["PAPER_IMDB", "PES", "PRESETS", "QUICK_WORDS", "FinetunePEConfig", "finetune_cell",
           "geometry", "main", "make_config", "negation_corpus", "report", "run", "summarise",
           "table", "table_norm", "write_quick_assets"]
