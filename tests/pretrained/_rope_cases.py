"""Hugging Face-style configs whose RoPE frequencies are checked against golden values.

Each entry is ``(config, seq_len)``: a ``config.json`` dict (head_dim 32, 16 rotary pairs, so that
the ramps of YaRN and Llama 3.1 have a visible middle band) and the sequence length at which the
frequencies are read (None: at initialisation; only dynamic NTK and LongRoPE depend on it).
"""
BASE = {"hidden_size": 128, "num_attention_heads": 4, "head_dim": 32,
        "max_position_embeddings": 8192}
SHORT = [1.0, 1.02, 1.05, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0, 2.3, 2.6, 3.0, 3.3, 3.6, 3.8, 4.0]
LONG = [1.0, 1.1, 1.3, 1.6, 2.0, 2.5, 3.2, 4.0, 5.0, 6.0, 7.5, 9.0, 11.0, 13.0, 15.0, 16.0]


def _cfg(rope, **extra):
    return {**BASE, **extra, "rope_parameters": rope}


CASES = {
    "default": (_cfg({"rope_type": "default", "rope_theta": 10000.0}), None),
    "default_partial": (_cfg({"rope_type": "default", "rope_theta": 10000.0,
                              "partial_rotary_factor": 0.5}), None),
    "linear": (_cfg({"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}), None),
    "dynamic_init": (_cfg({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0},
                          max_position_embeddings=2048), None),
    "dynamic_4096": (_cfg({"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0},
                          max_position_embeddings=2048), 4096),
    "yarn": (_cfg({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                   "original_max_position_embeddings": 2048}), None),
    "yarn_partial_mscale": (_cfg({"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                  "original_max_position_embeddings": 2048, "mscale": 1.0,
                                  "mscale_all_dim": 0.5, "partial_rotary_factor": 0.5,
                                  "beta_fast": 16.0, "beta_slow": 2.0}), None),
    "yarn_no_factor": (_cfg({"rope_type": "yarn", "rope_theta": 10000.0, "factor": None,
                             "original_max_position_embeddings": 2048}), None),
    "longrope_short": (_cfg({"rope_type": "longrope", "rope_theta": 10000.0,
                             "short_factor": SHORT, "long_factor": LONG},
                            original_max_position_embeddings=2048), None),
    "longrope_long": (_cfg({"rope_type": "longrope", "rope_theta": 10000.0,
                            "short_factor": SHORT, "long_factor": LONG},
                           original_max_position_embeddings=2048), 4096),
    "llama3": (_cfg({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                     "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
                    max_position_embeddings=131072), None),
    "proportional": (_cfg({"rope_type": "proportional", "rope_theta": 10000.0,
                           "partial_rotary_factor": 0.25}), None),
    "proportional_factor": (_cfg({"rope_type": "proportional", "rope_theta": 10000.0,
                                  "partial_rotary_factor": 0.5, "factor": 2.0}), None),
}
