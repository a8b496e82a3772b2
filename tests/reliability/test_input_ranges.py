"""Out-of-range token ids, table positions and labels: eager ValueError, reported under jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from posjax import encodings
from posjax.input_checks import collect, first_error, stack_rows
from posjax.models import Transformer, TransformerConfig
from posjax.training import InvalidBatch, evaluate_classifier

from _tiny import CFG, data, model, poisoned, run


def _tokens(bad):
    t = np.zeros((2, 8), np.int32)
    t[1, 3] = bad
    return t


@pytest.mark.parametrize("bad, message", [(99, "token id 99 >= vocab_size 16"),
                                          (16, "token id 16 >= vocab_size 16"),
                                          (-1, "token id -1 < 0")])
def test_eager_bad_token_id_raises(bad, message):
    with pytest.raises(ValueError, match=message):
        model()(_tokens(bad))
    model()(_tokens(15))  # the largest valid id is accepted


def test_jitted_bad_token_id_is_reported_and_never_wraps():
    m = Transformer(CFG, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(m)

    @jax.jit
    def forward(state, tokens):
        with collect() as rows:
            hidden = nnx.merge(graphdef, state)(tokens)
        return hidden, stack_rows(rows)

    hidden, rows = forward(state, _tokens(99))
    assert first_error(rows) == "token id 99 >= vocab_size 16"
    # documented fallback: the bad row is NaN, other sequences are untouched
    assert not np.isfinite(np.asarray(hidden[1])).any()
    assert np.isfinite(np.asarray(hidden[0])).all()
    hidden, rows = forward(state, _tokens(-1))
    assert first_error(rows).startswith("token id -1 < 0")
    assert not np.isfinite(np.asarray(hidden[1])).any()  # -1 is not id 15
    hidden, rows = forward(state, _tokens(15))
    assert first_error(rows) is None and np.isfinite(np.asarray(hidden)).all()


def test_jitted_position_past_learned_table_is_reported():
    pe = encodings.make("learned", d_model=8, max_len=8)

    @jax.jit
    def f(p):
        with collect() as rows:
            out = pe.embed(jnp.zeros((1, 8, 8)), p)
        return out, stack_rows(rows)

    out, rows = f(jnp.arange(8)[None] + 5)
    assert first_error(rows) == "position 12 >= 'learned' table max_len 8"
    assert not np.isfinite(np.asarray(out[0, 3:])).any() and np.isfinite(np.asarray(out[0, :3])).all()
    out, rows = f(jnp.arange(8)[None] - 1)
    assert first_error(rows).startswith("position -1 < 0")
    assert not np.isfinite(np.asarray(out[0, 0])).any()  # -1 is not wrapped to row 7
    assert first_error(f(jnp.arange(8)[None])[1]) is None


def test_evaluate_classifier_names_bad_ids_and_labels():
    m, d = model(), data()
    d["tokens"][40, 2] = 99
    d["labels"][:] = 0
    with pytest.raises(ValueError, match=r"token id 99 >= vocab_size 16 in evaluation batch 1 "
                                         r"\(examples 32..63\)"):
        evaluate_classifier(m, d, batch_size=32)
    d = data()
    d["labels"][5] = 2
    with pytest.raises(ValueError, match="label 2 >= num_classes 2 in evaluation batch 0"):
        evaluate_classifier(m, d, batch_size=32)


def test_training_reports_bad_token_id_with_its_step():
    bad = np.where(np.arange(8) == 1, 99, 0).astype(np.int32)[None].repeat(16, 0)
    with pytest.raises(InvalidBatch, match="token id 99 >= vocab_size 16 in batch at step 2"):
        run(None, poisoned(2, tokens=bad))


def test_training_reports_position_past_table_with_its_step():
    with pytest.raises(InvalidBatch, match="position 12 >= 'learned' table max_len 8 in batch at "
                                           "step 3"):
        run(None, poisoned(3, positions=np.arange(8) + 5))


def _table_size(name):
    try:
        return encodings.make(name, d_model=16, num_heads=2, max_len=8).max_positions
    except ValueError:  # needs options this context lacks (e.g. MDS coordinates)
        return None


TABLE_PES = [n for n in encodings.names() if _table_size(n) is not None]


@pytest.mark.parametrize("name", TABLE_PES)
def test_every_table_pe_reports_positions_past_its_table_under_jit(name):
    m = Transformer(TransformerConfig(vocab_size=16, num_layers=1, d_model=16, num_heads=2,
                                      d_ff=16, max_len=8, pe=name), rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(m)

    @jax.jit
    def forward(state, positions):
        with collect() as rows:
            nnx.merge(graphdef, state)(jnp.zeros((1, 8), jnp.int32), positions=positions)
        return stack_rows(rows)

    limit = m.pe.max_positions
    assert first_error(forward(state, jnp.arange(8)[None] + limit - 7)) is not None
    assert first_error(forward(state, jnp.arange(8)[None] - 1)) is not None
    assert first_error(forward(state, jnp.arange(8)[None])) is None
