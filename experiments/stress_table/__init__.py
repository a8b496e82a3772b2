"""Flagship experiment of arXiv 2604.05217 ("On the Geometry of Positional Encodings in
Transformers", G. Cirrincione): stress of every positional encoding against the Hellinger
geometry of positional statistics, on a synthetic corpus, SST-2 and IMDB.

    python -m experiments.stress_table --dataset synthetic|sst2|imdb|text|stdlib [--preset quick|gpu|paper]
        [--seeds N] [--out DIR] [--data-dir DIR] [--vocab-file VOCAB] [--set key=value ...]

Writes ``DIR/results.json`` (every interpretation option recorded), ``DIR/report.md`` and PNG
plots. Tables (keys of results.json): ``stress`` per encoding (raw and optimal scale; plug-in,
split-half and, on the synthetic corpus, exact ``P``), ``spectrum`` of B, ``parameters`` (dense
against low rank), ``accuracy`` of an encoder trained with each PE (mean ± 95 % CI over seeds), and the sample-size sensitivity analysis. Finished cells (trained
models, sensitivity cells) are stored under ``DIR/cells`` and skipped on rerun.

Public API (docs/stress_table.md): :class:`StressConfig`, :data:`PRESETS`, :func:`make_config`,
:func:`run`, :func:`main`. Modules: ``config`` (options, presets), ``data`` (the corpus of a
dataset), ``train`` (one trained encoder per PE and seed), ``report`` (report.md, plots, the
accuracy claims), ``experiment`` (the driver). The geometry, its tables and claims are
:mod:`posjax.analysis.stress_geometry`, :mod:`posjax.analysis.stress_tables` and
:mod:`posjax.analysis.stress_report`.
"""
from experiments.common import run_cli
from experiments.stress_table.config import DATASETS, PRESETS, StressConfig, make_config
from experiments.stress_table.experiment import main, run

__all__ = ["DATASETS", "PRESETS", "StressConfig", "make_config", "run", "main", "run_cli"]
