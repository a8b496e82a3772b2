"""Analysis tools: head ablation, PE similarity, the PE -> geometry bridge
(:mod:`posjax.analysis.encoding_geometry`), the stress/spectrum/parameter tables
(:mod:`posjax.analysis.stress_tables`), the geometries and rows they are built from
(:mod:`posjax.analysis.stress_geometry`), their report rows, claims and figures
(:mod:`posjax.analysis.stress_report`, :mod:`posjax.analysis.stress_plots`); imported lazily
by name."""
from posjax import lazy_member

_LAZY = {
    "head_ablation": "posjax.analysis.ablation",
    "deposit_metrics": "posjax.analysis.ablation",
    "pe_similarity": "posjax.analysis.similarity",
    "pe_tables": "posjax.analysis.similarity",
    "dense_tables": "posjax.analysis.stress_tables",
    "matrix_free_tables": "posjax.analysis.stress_tables",
    "parameter_rows": "posjax.analysis.stress_tables",
}


def __getattr__(name):
    return lazy_member("posjax.analysis", name, _LAZY)
