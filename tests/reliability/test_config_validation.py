"""Configuration errors fail at construction with a ValueError naming field and expected type."""
import dataclasses
import typing

import pytest

from posjax import encodings
from posjax.config_types import check_field_types
from posjax.encodings.registry import build_options
from posjax.models import TransformerConfig
from posjax.training import TrainConfig


def _scalar_fields(cls):
    """(field, bad value, expected words) for every bool/int/float field of an options class."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        arms = set(typing.get_args(hints[f.name])) or {hints[f.name]}
        arms.discard(type(None))
        if arms == {bool}:
            out.append((f.name, "no", "a bool"))
        elif arms == {int}:
            out += [(f.name, 2.5, "an int"), (f.name, "3", "an int")]
        elif arms == {float}:
            out += [(f.name, "10000", "a float"), (f.name, True, "a float")]
    return out


CASES = [(name, *case) for name in encodings.names()
         for case in _scalar_fields(encodings.info(name).options)]


def test_every_pe_has_checked_fields():
    assert {name for name, *_ in CASES} >= {"rope", "learned", "alibi", "t5"}


@pytest.mark.parametrize("name, field, bad, expected", CASES)
def test_wrong_option_type_is_named_for_every_pe(name, field, bad, expected):
    with pytest.raises(ValueError, match=f"PE '{name}' option {field} must be {expected}"):
        build_options(name, {field: bad})


def test_issue_examples():
    with pytest.raises(ValueError, match="TransformerConfig.pe: unknown positional encoding 'ropee'"):
        TransformerConfig(pe="ropee")
    with pytest.raises(ValueError, match="d_model must be a positive int, got -8"):
        encodings.make("learned", d_model=-8, max_len=8)
    with pytest.raises(ValueError, match="option base must be a float, got '10000'"):
        encodings.make("rope", head_dim=8, base="10000")
    with pytest.raises(ValueError, match="TransformerConfig.pe_options must be a dict, got None"):
        TransformerConfig(pe="rope", pe_options=None)
    with pytest.raises(ValueError, match="option interleaved must be a bool, got 'no'"):
        encodings.make("rope", head_dim=8, interleaved="no")
    with pytest.raises(ValueError, match="option num_rotary_heads must be an int or None, got 2.5"):
        TransformerConfig(pe="rope", pe_options={"num_rotary_heads": 2.5})


@pytest.mark.parametrize("field, value, message", [
    ("d_model", 16.0, "TransformerConfig.d_model must be an int"),
    ("num_layers", 0, "TransformerConfig.num_layers must be positive"),
    ("max_len", -1, "TransformerConfig.max_len must be positive"),
    ("causal", "yes", "TransformerConfig.causal must be a bool"),
    ("dropout", "0.1", "TransformerConfig.dropout must be a float"),
    ("pe", 3, "TransformerConfig.pe must be a str"),
])
def test_transformer_config_fields(field, value, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{field: value})


def test_options_checked_against_the_model_context_at_construction():
    with pytest.raises(ValueError, match="TransformerConfig.pe_options: num_rotary_heads=5"):
        TransformerConfig(pe="rope", num_heads=4, pe_options={"num_rotary_heads": 5})
    with pytest.raises(ValueError, match="unknown option"):
        TransformerConfig(pe="rope", pe_options={"bse": 10.0})


def test_train_config_fields():
    with pytest.raises(ValueError, match="TrainConfig.steps must be an int, got 1.5"):
        TrainConfig(steps=1.5)
    with pytest.raises(ValueError, match="TrainConfig.learning_rate must be a float, got '1e-3'"):
        TrainConfig(learning_rate="1e-3")


def test_checker_accepts_numpy_scalars_and_int_for_float():
    import numpy as np

    @dataclasses.dataclass
    class Opts:
        n: int = 1
        x: float = 1.0
        flag: bool = False
        maybe: "int | None" = None

    check_field_types(Opts(n=np.int64(3), x=2, flag=np.bool_(True), maybe=None), "")
    check_field_types(Opts(x=np.float32(0.5), maybe=4), "")
