"""rope_from_hf_config: inverse frequencies and attention factors equal the reference library's.

GOLDEN holds, for each config of ``_rope_cases.CASES``, ``(attention_factor, inv_freq)`` as computed
by Hugging Face transformers 5.18.0 (``ROPE_INIT_FUNCTIONS``, PyTorch 2.13.0 CPU, float32) with
``tests/pretrained/rope_golden_reference.py`` in a throwaway environment, pasted here as literals
(9 significant digits).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from posjax import encodings as pe_lib
from posjax.pretrained import rope_from_hf_config, rope_head_dim
from _rope_cases import CASES  # noqa: E402  (tests/pretrained on sys.path)

GOLDEN = {
    'default': (1.0, [1.0, 0.562341332, 0.316227764, 0.177827939, 0.100000001, 0.0562341288, 0.0316227786, 0.0177827943, 0.00999999978, 0.00562341325, 0.00316227786, 0.00177827943, 0.00100000005, 0.000562341302, 0.000316227786, 0.00017782794]),
    'default_partial': (1.0, [1.0, 0.316227764, 0.100000001, 0.0316227786, 0.00999999978, 0.00316227786, 0.00100000005, 0.000316227786]),
    'linear': (1.0, [0.25, 0.140585333, 0.079056941, 0.0444569848, 0.0250000004, 0.0140585322, 0.00790569466, 0.00444569858, 0.00249999994, 0.00140585331, 0.000790569466, 0.000444569858, 0.000250000012, 0.000140585325, 7.90569466e-05, 4.44569851e-05]),
    'dynamic_init': (1.0, [1.0, 0.562341332, 0.316227764, 0.177827939, 0.100000001, 0.0562341288, 0.0316227786, 0.0177827943, 0.00999999978, 0.00562341325, 0.00316227786, 0.00177827943, 0.00100000005, 0.000562341302, 0.000316227786, 0.00017782794]),
    'dynamic_4096': (1.0, [1.0, 0.505128682, 0.255154967, 0.128886074, 0.065104045, 0.0328859203, 0.0166116208, 0.00839100499, 0.00423853705, 0.00214100652, 0.00108148379, 0.000546288386, 0.000275945931, 0.000139388183, 7.04089689e-05, 3.55655866e-05]),
    'yarn': (1.138629436111989, [1.0, 0.562341332, 0.316227764, 0.177827939, 0.100000001, 0.0502090417, 0.02484647, 0.0120668961, 0.00571428565, 0.0026108704, 0.00112938497, 0.000444569858, 0.000250000012, 0.000140585325, 7.90569466e-05, 4.44569851e-05]),
    'yarn_partial_mscale': (1.0648216253695715, [1.0, 0.316227764, 0.100000001, 0.023717083, 0.00499999989, 0.000790569466, 0.000250000012, 7.90569466e-05]),
    'yarn_no_factor': (1.138629436111989, [1.0, 0.562341332, 0.316227764, 0.177827939, 0.100000001, 0.0502090417, 0.02484647, 0.0120668961, 0.00571428565, 0.0026108704, 0.00112938497, 0.000444569858, 0.000250000012, 0.000140585325, 7.90569466e-05, 4.44569851e-05]),
    'longrope_short': (1.087114613009218, [1.0, 0.551315069, 0.301169306, 0.161661774, 0.0833333358, 0.0432570241, 0.0210818499, 0.0104604671, 0.00499999989, 0.00244496227, 0.00121626072, 0.00059275981, 0.000303030305, 0.000156205933, 8.32178412e-05, 4.44569851e-05]),
    'longrope_long': (1.087114613009218, [1.0, 0.511219382, 0.243252128, 0.111142464, 0.0500000007, 0.022493653, 0.00988211762, 0.00444569858, 0.00200000009, 0.000937235542, 0.000421637029, 0.000197586603, 9.09090886e-05, 4.32570232e-05, 2.10818507e-05, 1.11142463e-05]),
    'llama3': (1.0, [1.0, 0.440366626, 0.193922758, 0.0853971019, 0.0376060307, 0.0165604409, 0.00729266508, 0.00321144611, 0.000524846022, 7.78465546e-05, 3.42810235e-05, 1.50962178e-05, 6.64786967e-06, 2.92749974e-06, 1.28917316e-06, 5.6770881e-07]),
    'proportional': (1.0, [1.0, 0.562341332, 0.316227764, 0.177827939, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    'proportional_factor': (1.0, [0.5, 0.281170666, 0.158113882, 0.0889139697, 0.0500000007, 0.0281170644, 0.0158113893, 0.00889139716, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
}


def build(config, seq_len=None):
    name, options = rope_from_hf_config(config)
    pe = pe_lib.make(name, head_dim=rope_head_dim(config), num_heads=config["num_attention_heads"],
                     max_len=config["max_position_embeddings"], **options)
    return name, pe


def frequencies_at(name, pe, config, seq_len):
    if seq_len is None:
        return pe.frequencies()
    L = config["max_position_embeddings"]
    if name == "rope_ntk":  # HF dynamic: s_eff = s * T / L - (s - 1)
        s = pe.options.factor
        return pe.frequencies(s * max(seq_len, L) / L - (s - 1))
    if name == "longrope":
        return pe.frequencies(long=seq_len > pe.original_len())
    raise AssertionError(name)


@pytest.mark.parametrize("case", sorted(CASES))
def test_frequencies_and_attention_factor_equal_the_reference_library(case):
    config, seq_len = CASES[case]
    factor, inv_freq = GOLDEN[case]
    name, pe = build(config)
    got = np.asarray(frequencies_at(name, pe, config, seq_len), np.float64)
    np.testing.assert_allclose(got, inv_freq, rtol=2e-6, atol=1e-12)
    magnitude = pe.magnitude() if hasattr(pe, "magnitude") else 1.0
    assert magnitude == pytest.approx(factor, rel=1e-9)


def test_every_case_is_checked_and_every_type_is_covered():
    from posjax.pretrained.rope_config import ROPE_TYPES
    assert set(GOLDEN) == set(CASES)
    types = {c["rope_parameters"]["rope_type"] for c, _ in CASES.values()}
    assert types == set(ROPE_TYPES)


def test_yarn_index_ramp_differs_from_the_papers_ratio_ramp_inside_the_band():
    """The ratio ramp (paper, arXiv 2309.00071 Eq. 18-19) against a float64 closed form, and the
    index ramp (the default, golden above) differing from it only inside the band."""
    config, _ = CASES["yarn"]
    name, options = rope_from_hf_config(config)
    ratio = pe_lib.make(name, head_dim=32, max_len=8192, **{**options, "ramp": "ratio"})
    index = pe_lib.make(name, head_dim=32, max_len=8192, **options)
    theta = 10000.0 ** (-np.arange(16) * 2 / 32)
    rho = 2048 * theta / (2 * math.pi)
    gamma = np.clip((rho - 1.0) / (32.0 - 1.0), 0, 1)
    expected = (1 - gamma) * theta / 4 + gamma * theta
    np.testing.assert_allclose(np.asarray(ratio.frequencies(), np.float64), expected, rtol=2e-6)
    got_index = np.asarray(index.frequencies(), np.float64)
    np.testing.assert_allclose(got_index, GOLDEN["yarn"][1], rtol=2e-6)
    # pairs 0-4 are in neither band (kept), pairs 11-15 in both (divided by s): equal there
    same = (np.arange(16) < 5) | (np.arange(16) > 10)
    np.testing.assert_allclose(got_index[same], expected[same], rtol=2e-6)
    assert np.max(np.abs(got_index[~same] / expected[~same] - 1)) > 0.5  # inside: far apart


@pytest.mark.parametrize("rope", [{"rope_type": "su_v2", "factor": 2.0}, {"type": "mrope"}])
def test_unknown_rope_type_is_an_error_not_plain_rope(rope):
    with pytest.raises(ValueError, match="unsupported RoPE type"):
        rope_from_hf_config({"hidden_size": 64, "num_attention_heads": 4, "rope_scaling": rope})


def test_missing_fields_are_named():
    with pytest.raises(ValueError, match="factor"):
        rope_from_hf_config({"head_dim": 8, "rope_scaling": {"rope_type": "linear"}})
    with pytest.raises(ValueError, match="layer_type"):
        rope_from_hf_config({"head_dim": 8, "rope_parameters": {
            "full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "default"}}})
    with pytest.raises(ValueError, match="head_dim"):
        rope_from_hf_config({"rope_theta": 1e4})


def test_legacy_rope_scaling_key_and_top_level_theta():
    config = {"hidden_size": 128, "num_attention_heads": 4, "rope_theta": 500000.0,
              "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}
    name, options = rope_from_hf_config(config)
    assert name == "rope_linear" and options["base"] == 500000.0 and options["factor"] == 2.0
