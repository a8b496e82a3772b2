"""``experiments.pe_swap``: swap the PE of a real pretrained encoder and continue MLM training
(arXiv 2604.05217; see ``experiment.py``)."""
from experiments.pe_swap.config import PRESETS, UNTESTED, VARIANTS, PESwapConfig, make_config
from experiments.pe_swap.experiment import head_stage, main, run, variant_cell
from experiments.pe_swap.geometry import (corpus_geometry, model_rows, stress_of,
                                          variant_distances, variant_pe)
from experiments.pe_swap.mlm import Data, build_model, prepare_data, train_mlm
from experiments.pe_swap.report import plateau, report, spearman_ci, summarise, table
from posjax.data.mlm_masking import mask_windows, split_windows

__all__ = ["PRESETS", "UNTESTED", "VARIANTS", "Data", "PESwapConfig", "build_model",
           "corpus_geometry", "head_stage", "main", "make_config", "mask_windows", "model_rows",
           "plateau", "prepare_data", "report", "run", "spearman_ci", "split_windows",
           "stress_of", "summarise", "table", "train_mlm", "variant_cell", "variant_distances",
           "variant_pe"]
