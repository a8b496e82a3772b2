"""Positional encodings: pure functions, thin NNX modules, and a registry selectable by name.

>>> import posjax.encodings as pe
>>> pe.names()                      # every registered PE
>>> rope = pe.make("rope", head_dim=64, base=10000.0)

One module per PE family; importing a module registers its PEs. The imports below are grouped
by what the PEs do (the hook they act through), not by when they were added.
"""
# --- The contract and the registry ------------------------------------------------------------
from posjax.encodings.base import PEContext, PositionalEncoding, batch_positions, check_table_length
from posjax.encodings.registry import (PEInfo, aliases, build_options, canonical_name, info,
                                       make, names, register, register_alias)

# --- No positional encoding -------------------------------------------------------------------
from posjax.encodings.nope import NoPE

# --- Absolute, added to the embeddings (hook ``embed``) ----------------------------------------
from posjax.encodings.sinusoidal import Sinusoidal, sinusoidal, sinusoidal_at, sinusoidal_frequencies
from posjax.encodings.learned import Learned, RandomFixed, init_table
from posjax.encodings.learned_interpolated import LearnedInterpolated, interpolate_rows
from posjax.encodings.cape import Cape, cape_positions
from posjax.encodings.pope import Pope, legendre, pope_table
from posjax.encodings.complex_pe import ComplexPE, complex_embedding
from posjax.encodings.mds import MDSEncoding, MDSOptions  # arXiv 2604.05217

# --- Relative (and untied) logit biases (hook ``bias``) ----------------------------------------
from posjax.encodings.alibi import Alibi, alibi_bias, alibi_mean_slope, alibi_slopes
from posjax.encodings.t5 import T5Bias, t5_bucket
from posjax.encodings.kerple import KerpleLog, KerplePower, kerple_log_bias, kerple_power_bias
from posjax.encodings.sandwich import Sandwich, sandwich_bias, sandwich_ratios
from posjax.encodings.fire import Fire, fire_inputs
from posjax.encodings.hype import Hype, hype_augment, hype_bias
from posjax.encodings.dynamic_position_bias import DynamicPositionBias, dpb_offsets
from posjax.encodings.tupe import Tupe, tupe_position_logits

# --- Rotary: q and k rotated by position (hook ``rotate``) ------------------------------------
from posjax.encodings.rope import RoPE, apply_rope, rope_frequencies, rotary_dim, rotate_pairs
from posjax.encodings.rope_plus_abs import RoPEPlusAbs  # arXiv 2505.13027
from posjax.encodings.mla import MLA, decoupled_rope  # arXiv 2405.04434, as in arXiv 2505.13027
from posjax.encodings.xpos import XPos, xpos_zeta
from posjax.encodings.hope import HoPE, hope_frequencies
from posjax.encodings.p_rope import PRoPE, p_rope_frequencies, p_rope_pairs
from posjax.encodings.fope import FoPE, apply_fope, fope_frequencies
from posjax.encodings.polar_pope import PolarPoPE, polar_embed, polar_frequencies
from posjax.encodings.gridpe import GridPE, apply_gridpe, grid_wave_vectors, simplex_directions
# learned rotations
from posjax.encodings.liere import LieRE, lie_rotate, rope_generator, skew
from posjax.encodings.comrope import ComRoPE
from posjax.encodings.string import String, cayley

# --- Rotary context extension (RoPE with rescaled frequencies) -------------------------------
from posjax.encodings.rope_scaling import (LongRoPE, RoPELinear, RoPELlama3, RoPENTK,
                                           RoPEProportional, RoPEYarn, index_ramp_frequencies,
                                           longrope_attention_factor, ntk_base, ramp_frequencies,
                                           yarn_attention_factor, yarn_correction_range)

# --- Data-dependent: logit terms that read q and k (hook ``logits``) -------------------------
from posjax.encodings.spans import span_sums
from posjax.encodings.cope import Cope, cope_bias, cope_positions
from posjax.encodings.fox import Fox, fox_bias, fox_log_gates
from posjax.encodings.dape import Dape
from posjax.encodings.path import Path, path_scores, path_vectors
from posjax.encodings.string_shift import StringShift, string_shift_distances

# --- Structural: attention inputs and block outputs (``attention_input``, ``block_output``) --
from posjax.encodings.positional_attention import PositionalAttention
from posjax.encodings.lape import Lape
from posjax.encodings.cpe import Cpe, depthwise_conv1d, depthwise_conv2d

# --- 2-D and multimodal positions -------------------------------------------------------------
from posjax.encodings.grid2d import Rope2DAxial, Sinusoidal2D
from posjax.encodings.mrope import (MRoPE, MRoPEYarn, apply_mrope, mrope_angles,
                                    mrope_components, mrope_sections)
from posjax.encodings.mrope_layout import (mrope_positions, mrope_positions_from_tokens,
                                           split_video_frames)

__all__ = [
    # contract and registry
    "PEContext", "PEInfo", "PositionalEncoding", "aliases", "batch_positions", "build_options",
    "canonical_name", "check_table_length", "info", "make", "names", "register",
    "register_alias",
    # no PE
    "NoPE",
    # absolute (embed)
    "Sinusoidal", "sinusoidal", "sinusoidal_at", "sinusoidal_frequencies",
    "Learned", "RandomFixed", "init_table", "LearnedInterpolated", "interpolate_rows",
    "Cape", "cape_positions", "Pope", "legendre", "pope_table", "ComplexPE", "complex_embedding",
    "MDSEncoding", "MDSOptions",
    # logit biases (bias)
    "Alibi", "alibi_bias", "alibi_mean_slope", "alibi_slopes", "T5Bias", "t5_bucket",
    "KerpleLog", "KerplePower", "kerple_log_bias", "kerple_power_bias",
    "Sandwich", "sandwich_bias", "sandwich_ratios", "Fire", "fire_inputs",
    "Hype", "hype_augment", "hype_bias", "DynamicPositionBias", "dpb_offsets",
    "Tupe", "tupe_position_logits",
    # rotary (rotate)
    "RoPE", "apply_rope", "rope_frequencies", "rotary_dim", "rotate_pairs", "RoPEPlusAbs",
    "MLA", "XPos", "xpos_zeta", "HoPE", "hope_frequencies",
    "PRoPE", "p_rope_frequencies", "p_rope_pairs", "FoPE", "apply_fope", "fope_frequencies",
    "PolarPoPE", "polar_embed", "polar_frequencies",
    "GridPE", "apply_gridpe", "grid_wave_vectors", "simplex_directions",
    "LieRE", "lie_rotate", "rope_generator", "skew", "ComRoPE", "String", "cayley",
    # rotary context extension
    "RoPELinear", "RoPENTK", "RoPEYarn", "RoPELlama3", "LongRoPE", "RoPEProportional",
    "ntk_base", "ramp_frequencies", "yarn_attention_factor", "index_ramp_frequencies",
    "longrope_attention_factor", "yarn_correction_range",
    # data-dependent (logits)
    "span_sums", "Cope", "cope_bias", "cope_positions", "Fox", "fox_bias", "fox_log_gates",
    "Dape", "Path", "path_scores", "path_vectors", "StringShift", "string_shift_distances",
    # structural
    "PositionalAttention", "Lape", "Cpe", "depthwise_conv1d", "depthwise_conv2d",
    # 2-D and multimodal
    "Rope2DAxial", "Sinusoidal2D", "MRoPE", "MRoPEYarn", "apply_mrope", "mrope_angles",
    "mrope_components", "mrope_sections", "mrope_positions", "mrope_positions_from_tokens",
    "split_video_frames",
]
