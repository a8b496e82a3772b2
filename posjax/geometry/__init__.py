"""Geometry of positional encodings (G. Cirrincione, arXiv 2604.05217), in JAX.

Pipeline (Algorithm 1): corpus -> positional distributions ``P`` -> Hellinger matrix ``D`` ->
double-centred ``B`` -> classical MDS ``X_r`` -> low-rank encoding ``A W^T``; plus stress / strain /
SMACOF to compare any positional encoding with ``D``, and spectral diagnostics.

>>> import posjax.geometry as geo
>>> P, N = geo.positional_distributions(tokens, vocab_size=30522, pad_id=0)
>>> D = geo.hellinger_matrix(P)                       # chord metric, [n, n]
>>> mds = geo.classical_mds(D, rank_rule=("energy", 1e-3))
>>> geo.stress(D, coords=mds.coords)                  # normalised raw stress
>>> from posjax.analysis.encoding_geometry import encoding_distances
>>> E = encoding_distances("sinusoidal", D.shape[0], dim=768)
>>> geo.stress(D, distances=E, scale="optimal")

This package is a facade: it only re-exports names from its modules, and it imports nothing
from ``posjax.encodings``. The bridge from a PE to its distances and coordinates
(``encoding_distances``, ``encoding_coordinates``) is :mod:`posjax.analysis.encoding_geometry`;
the MDS encoding as an NNX module lives in :mod:`posjax.encodings.mds` (registered as ``"mds"``).
"""
from posjax.geometry.adapters import (dist_bias, dist_learned, dist_mds, dist_nope,
                                      offset_distances, orbit_distances)
from posjax.geometry.diagnostics import (dct_alignment, dct_modes, ramp_alignment,
                                         shift_invariance_score, spectrum_report)
from posjax.geometry.distributions import counts_summary, positional_distributions
from posjax.geometry.eigensolvers import eigh_descending, top_eigh
from posjax.geometry.hellinger import (METRICS, bhattacharyya_matrix, canonical_metric,
                                       hellinger_matrix, split_half_hellinger)
from posjax.geometry.matrix_free import b_trace, mds_from_distributions, topk_spectrum_report
from posjax.geometry.sqrt_rows import SqrtRows, sqrt_rows, sqrt_rows_from_counts
from posjax.geometry.streaming_stress import (StressEstimate, pair_stress_estimate, sample_pairs,
                                              stress_from_distributions)
from posjax.geometry.lowrank import (break_even_rank, lift_matrix, lift_to_width,
                                     low_rank_factors, param_count)
from posjax.geometry.mds import (EuclideanCheck, MDSResult, center_gram, check_euclidean,
                                 classical_mds, double_center, gram_from_sqrtP, negative_mass)
from posjax.geometry.rank import effective_rank
from posjax.geometry.smacof import guttman_transform, smacof
from posjax.geometry.stress import optimal_scale, pairwise_distances, strain, stress

__all__ = [
    # distributions and distances
    "positional_distributions", "counts_summary", "hellinger_matrix", "split_half_hellinger",
    "bhattacharyya_matrix", "canonical_metric", "METRICS",
    # MDS
    "double_center", "center_gram", "gram_from_sqrtP", "check_euclidean", "classical_mds",
    "MDSResult", "EuclideanCheck", "negative_mass", "eigh_descending", "top_eigh",
    "effective_rank",
    # stress
    "stress", "optimal_scale", "strain", "smacof", "guttman_transform", "pairwise_distances",
    # matrix-free (no [n, n] array)
    "mds_from_distributions", "stress_from_distributions", "StressEstimate", "b_trace",
    "topk_spectrum_report", "SqrtRows", "sqrt_rows", "sqrt_rows_from_counts", "sample_pairs",
    "pair_stress_estimate",
    # adapters
    "dist_mds", "dist_learned", "dist_bias", "dist_nope", "offset_distances", "orbit_distances",
    # low rank
    "low_rank_factors", "lift_to_width", "lift_matrix", "param_count", "break_even_rank",
    # diagnostics
    "spectrum_report", "dct_alignment", "dct_modes", "ramp_alignment", "shift_invariance_score",
]

#: Names that moved to :mod:`posjax.analysis.encoding_geometry` (the PE -> geometry bridge).
_MOVED = frozenset({"encoding_distances", "encoding_coordinates", "COORDINATE_ENCODINGS",
                    "dist_sinusoidal", "dist_rope", "dist_alibi", "alibi_scale",
                    "alibi_mean_slope"})


def __getattr__(name: str):
    if name in _MOVED:  # ImportError: `from posjax.geometry import x` keeps this message
        raise ImportError(
            f"posjax.geometry.{name} moved to posjax.analysis.encoding_geometry.{name} (the "
            "PE -> geometry bridge sits above posjax.encodings and posjax.geometry): use "
            f"`from posjax.analysis.encoding_geometry import {name}`")
    if name == "encoding_coords":
        raise ImportError("posjax.geometry.encoding_coords moved to "
                             "posjax.analysis.encoding_geometry")
    raise AttributeError(f"module 'posjax.geometry' has no attribute {name!r}")
