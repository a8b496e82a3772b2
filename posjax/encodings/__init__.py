"""Positional encodings: pure functions, thin NNX modules, and a registry selectable by name.

>>> import posjax.encodings as pe
>>> pe.names()                      # every registered PE
>>> rope = pe.make("rope", head_dim=64, base=10000.0)
"""
from posjax.encodings.base import PEContext, PositionalEncoding, batch_positions, check_table_length
from posjax.encodings.registry import (PEInfo, aliases, build_options, canonical_name, info,
                                       make, names, register, register_alias)

# Importing a family module registers it.
from posjax.encodings.nope import NoPE
from posjax.encodings.sinusoidal import Sinusoidal, sinusoidal, sinusoidal_at, sinusoidal_frequencies
from posjax.encodings.learned import Learned, init_table
from posjax.encodings.rope import RoPE, apply_rope, rope_frequencies, rotary_dim, rotate_pairs
from posjax.encodings.alibi import Alibi, alibi_bias, alibi_mean_slope, alibi_slopes
from posjax.encodings.t5 import T5Bias, t5_bucket
from posjax.encodings.learned import RandomFixed
from posjax.encodings.grid2d import Rope2DAxial, Sinusoidal2D
from posjax.encodings.rope_plus_abs import RoPEPlusAbs  # arXiv 2505.13027
from posjax.encodings.mla import MLA, decoupled_rope  # arXiv 2405.04434, as in arXiv 2505.13027

__all__ = [
    "PEContext", "PEInfo", "PositionalEncoding", "batch_positions", "build_options",
    "check_table_length", "info", "make", "names", "register",
    "NoPE", "Sinusoidal", "Learned", "RoPE", "Alibi", "T5Bias",
    "sinusoidal", "sinusoidal_at", "sinusoidal_frequencies", "init_table", "apply_rope",
    "rope_frequencies", "rotary_dim", "rotate_pairs", "alibi_bias", "alibi_slopes",
    "alibi_mean_slope", "t5_bucket",
]

# The wider catalogue: one module per family.
from posjax.encodings.xpos import XPos, xpos_zeta
from posjax.encodings.kerple import KerpleLog, KerplePower, kerple_log_bias, kerple_power_bias
from posjax.encodings.fire import Fire, fire_inputs
from posjax.encodings.cape import Cape, cape_positions
from posjax.encodings.cpe import Cpe, depthwise_conv1d, depthwise_conv2d
from posjax.encodings.tupe import Tupe, tupe_position_logits
from posjax.encodings.lape import Lape
from posjax.encodings.complex_pe import ComplexPE, complex_embedding
from posjax.encodings.hope import HoPE, hope_frequencies
from posjax.encodings.pope import Pope, legendre, pope_table
from posjax.encodings.gridpe import GridPE, apply_gridpe, grid_wave_vectors, simplex_directions
from posjax.encodings.hype import Hype, hype_augment, hype_bias
from posjax.encodings.positional_attention import PositionalAttention
from posjax.encodings.rope_scaling import (RoPELinear, RoPELlama3, RoPENTK, RoPEYarn, ntk_base,
                                           ramp_frequencies, yarn_attention_factor)
from posjax.encodings.learned_interpolated import LearnedInterpolated, interpolate_rows

__all__ += [
    "XPos", "KerpleLog", "KerplePower", "Fire", "Cape", "Cpe", "Tupe", "Lape", "ComplexPE", "HoPE",
    "Pope", "GridPE", "Hype", "PositionalAttention", "RoPELinear", "RoPENTK", "RoPEYarn",
    "RoPELlama3", "LearnedInterpolated",
    "xpos_zeta", "kerple_log_bias", "kerple_power_bias", "fire_inputs", "cape_positions",
    "depthwise_conv1d", "depthwise_conv2d", "tupe_position_logits", "complex_embedding",
    "hope_frequencies", "legendre", "pope_table", "apply_gridpe", "grid_wave_vectors",
    "simplex_directions", "hype_augment", "hype_bias", "ntk_base", "ramp_frequencies",
    "yarn_attention_factor", "interpolate_rows",
]

# The MDS encoding of arXiv 2604.05217.
from posjax.encodings.mds import MDSEncoding, MDSOptions

__all__ += ["MDSEncoding", "MDSOptions", "MLA", "RoPEPlusAbs", "Rope2DAxial", "RandomFixed", "Sinusoidal2D"]

# LongRoPE (arXiv 2402.13753) and YaRN's index ramp.
from posjax.encodings.rope_scaling import (LongRoPE, RoPEProportional, index_ramp_frequencies,
                                           longrope_attention_factor, yarn_correction_range)

__all__ += ["LongRoPE", "RoPEProportional", "index_ramp_frequencies", "longrope_attention_factor",
            "yarn_correction_range"]
# PEs of 2022-2025 (one module per PE).
from posjax.encodings.sandwich import Sandwich, sandwich_bias, sandwich_ratios
from posjax.encodings.p_rope import PRoPE, p_rope_frequencies, p_rope_pairs
from posjax.encodings.mrope import (MRoPE, MRoPEYarn, apply_mrope, mrope_angles,
                                    mrope_components, mrope_sections)
from posjax.encodings.mrope_layout import (mrope_positions, mrope_positions_from_tokens,
                                           split_video_frames)

__all__ += ["Sandwich", "sandwich_bias", "sandwich_ratios", "PRoPE", "p_rope_frequencies",
            "p_rope_pairs", "MRoPE", "apply_mrope", "mrope_angles", "mrope_sections",
            "MRoPEYarn", "mrope_components", "mrope_positions", "mrope_positions_from_tokens",
            "split_video_frames"]
from posjax.encodings.fope import FoPE, apply_fope, fope_frequencies
from posjax.encodings.dynamic_position_bias import DynamicPositionBias, dpb_offsets
from posjax.encodings.polar_pope import PolarPoPE, polar_embed, polar_frequencies
from posjax.encodings.liere import LieRE, lie_rotate, rope_generator, skew
from posjax.encodings.comrope import ComRoPE
from posjax.encodings.string import String, cayley
from posjax.encodings.string_shift import StringShift, string_shift_distances

__all__ += ["FoPE", "apply_fope", "fope_frequencies", "DynamicPositionBias", "dpb_offsets",
            "PolarPoPE", "polar_embed", "polar_frequencies", "LieRE", "lie_rotate",
            "rope_generator", "skew", "ComRoPE", "String", "cayley", "StringShift",
            "string_shift_distances", "aliases", "canonical_name", "register_alias"]
from posjax.encodings.spans import span_sums
from posjax.encodings.fox import Fox, fox_bias, fox_log_gates
from posjax.encodings.cope import Cope, cope_bias, cope_positions
from posjax.encodings.dape import Dape
from posjax.encodings.path import Path, path_scores, path_vectors

__all__ += ["span_sums", "Fox", "fox_bias", "fox_log_gates", "Cope", "cope_bias",
            "cope_positions", "Dape", "Path", "path_scores", "path_vectors"]
