"""General reliability tests over every field and argument, not only the named examples:

(a) every field of every experiment config is read by the experiment code, or ``--set`` refuses
    it (a field declared with ``experiments.common.described``);
(b) changing any constructor argument of ``Transformer``, ``Classifier`` or ``LanguageModel``
    (from ``inspect.signature``) refuses to resume in the same ``out_dir``.
"""
from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
CONFIGS = [("additive_vs_multiplicative", "AdditiveVsMultiplicativeConfig"),
           ("finetune_pe", "FinetunePEConfig"), ("init_sweep", "InitSweepConfig"),
           ("length_generalization", "LengthGeneralizationConfig"),
           ("network_simulation", "NetworkSimulationConfig"), ("stress_table", "StressConfig")]


def _reads(tree: ast.AST, skip: ast.AST | None = None) -> set[str]:
    """Attribute names read (``x.name``) and string constants (``getattr(x, "name")``,
    ``d["name"]``) in ``tree``, outside the node ``skip`` (the dataclass body itself)."""
    skipped = set()
    for node in (skip.body if skip is not None else ()):  # field declarations and validation
        if isinstance(node, ast.AnnAssign) or (isinstance(node, ast.FunctionDef)
                                               and node.name == "__post_init__"):
            skipped |= set(map(id, ast.walk(node)))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.add(node.value)
    return out


def _sources(root: Path = EXPERIMENTS) -> dict[str, ast.AST]:
    files = sorted(root.rglob("*.py"))
    return {str(p.relative_to(root)): ast.parse(p.read_text()) for p in files}


LIBRARY = EXPERIMENTS.parent / "posjax"


@pytest.mark.parametrize("module, name", CONFIGS)
def test_general_a_every_config_field_is_read_or_refused(module, name):
    import importlib

    from experiments.common import described_fields, nested_fields, parse_set

    cls = getattr(importlib.import_module(f"experiments.{module}"), name)
    trees = _sources()
    body = next(n for t in trees.values() for n in ast.walk(t)
                if isinstance(n, ast.ClassDef) and n.name == name)
    read = set().union(*(_reads(t, body) for t in trees.values()))
    fixed = described_fields(cls)
    unread = [f.name for f in dataclasses.fields(cls) if f.name not in read | set(fixed)
              and not _refuses_other_values(cls, f)]
    assert not unread, (f"{name} fields no experiment code reads (declare them with "
                        f"experiments.common.described, or use them): {unread}")
    for field in fixed:
        with pytest.raises(ValueError, match=f"'{field}' describes what the code does"):
            parse_set(cls, [f"{field}=x"])
    # nested library configs (model: TransformerConfig, train: TrainConfig): every dotted key is
    # read by the experiment or by the library that receives the config, or refused
    nested = nested_fields(cls)
    if nested:
        library = _sources(LIBRARY)
        unread = []
        for part, sub in nested.items():
            body = next(n for t in library.values() for n in ast.walk(t)
                        if isinstance(n, ast.ClassDef) and n.name == sub.__name__)
            sub_read = read | set().union(*(_reads(t, body) for t in library.values()))
            unread += [f"{part}.{f.name}" for f in dataclasses.fields(sub)
                       if f.name not in sub_read and not _refuses_nested(cls, part, f)]
        assert not unread, f"{name} dotted keys no code reads: {unread}"


def _refuses_nested(cls, part, field) -> bool:
    """Whether ``cls`` refuses a changed value of ``part.field`` (a field the experiment
    decides itself): then ``--set`` cannot silently change nothing."""
    base = cls()
    sub = getattr(base, part)
    value = getattr(sub, field.name)
    if type(value) not in (int, float, str):
        return False
    other = value + "_another" if isinstance(value, str) else 2 * value + 1 * (value == 0)
    try:
        dataclasses.replace(base, **{part: dataclasses.replace(sub, **{field.name: other})})
    except ValueError:
        return True
    return False


def _refuses_other_values(cls, field) -> bool:
    """Whether the config refuses a non-default value of a string field (a one-choice option,
    validated in ``__post_init__``): then ``--set`` cannot change it either."""
    if field.type not in (str, "str"):
        return False
    try:
        cls(**{field.name: "__another_value__"})
    except ValueError:
        return True
    return False


def test_general_a_negative_control():
    """The walk finds an unread field (the check can fail)."""
    tree = ast.parse("import dataclasses\n@dataclasses.dataclass\nclass C:\n    a: int = 1\n"
                     "    b: int = 2\ndef f(c):\n    return c.a\n")
    body = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
    assert {"a", "b"} - _reads(tree, body) == {"b"}
    # the nested walk: a dotted key neither read nor refused is found
    tree = ast.parse("def g(c):\n    return c.model.d_model\n")
    assert {"d_model", "d_ff"} - _reads(tree) == {"d_ff"}
    from experiments.length_generalization import LengthGeneralizationConfig as LG

    fields = {f.name: f for f in dataclasses.fields(type(LG().model))}
    assert _refuses_nested(LG, "model", fields["max_len"])       # decided by the experiment
    assert not _refuses_nested(LG, "model", fields["d_model"])   # set freely


# --- (b) every constructor argument is part of the run record -------------------------------
def _loss(model, batch, key):
    out = model(batch["tokens"])
    return jnp.mean(jnp.square(out.astype(jnp.float32))), {}


def _train(model, out_dir):
    from posjax.training import ArrayBatches, TrainConfig, train

    tokens = np.random.default_rng(0).integers(0, 16, (8, 8)).astype(np.int32)
    return train(model, _loss, ArrayBatches({"tokens": tokens}, 4, seed=0),
                 TrainConfig(steps=1, batch_size=4, log_every=1, progress=False),
                 out_dir=out_dir)


def test_general_b_every_constructor_argument_refuses_resume(tmp_path):
    from posjax.models import Classifier, LanguageModel, Transformer, TransformerConfig

    cfg = TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2, d_ff=16,
                            max_len=8)
    base = {Transformer: {"config": cfg},
            LanguageModel: {"config": cfg, "tie_embeddings": False},
            Classifier: {"config": cfg, "num_classes": 2, "pooling": "mean"}}
    other = {"config": cfg.replace(d_ff=32), "tie_embeddings": True, "num_classes": 3,
             "pooling": "cls"}
    for cls, kwargs in base.items():
        params = [p for p in inspect.signature(cls.__init__).parameters
                  if p not in ("self", "rngs")]
        assert set(params) == set(kwargs), f"a new {cls.__name__} argument needs a value here"
        out = str(tmp_path / cls.__name__)
        _train(cls(**kwargs, rngs=nnx.Rngs(0)), out)
        for name in params:
            changed = cls(**{**kwargs, name: other[name]}, rngs=nnx.Rngs(0))
            with pytest.raises(ValueError, match="different configuration"):
                _train(changed, out)
        assert _train(cls(**kwargs, rngs=nnx.Rngs(0)), out).resumed_from == 1  # same: resumes
