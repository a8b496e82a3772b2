"""experiments.length_generalization: evaluation equivalences, a tiny resumable run, the CLI."""
import json
import os
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo root: `experiments`
from experiments import length_generalization as lg  # noqa: E402
from posjax.data import algorithmic as alg  # noqa: E402


def bigram_language_model(next_token: dict[int, int], default: int):
    """A real causal LanguageModel (NoPE, one block) rigged into a bigram model: the blocks'
    output projections are zeroed (each block is the identity on the residual stream), the
    embedding is one-hot and the head maps token v to ``next_token.get(v, default)``."""
    from posjax.models import LanguageModel, TransformerConfig

    V = alg.vocab_size()
    cfg = TransformerConfig(vocab_size=V, num_layers=1, d_model=32, num_heads=2, d_ff=16,
                            max_len=64, pe="none", causal=True, pre_norm=True, dropout=0.0)
    model = LanguageModel(cfg, rngs=nnx.Rngs(0))
    block = model.transformer.blocks[0]
    for layer in (block.attn.out, block.mlp.down):
        layer.kernel[...] = jnp.zeros_like(layer.kernel[...])
        layer.bias[...] = jnp.zeros_like(layer.bias[...])
    model.transformer.embed.embedding[...] = jnp.eye(V, 32)
    head = np.zeros((32, V), np.float32)
    head[np.arange(V), [next_token.get(v, default) for v in range(V)]] = 10.0
    model.head.kernel[...] = jnp.asarray(head)
    model.head.bias[...] = jnp.zeros(V)
    return model


def test_greedy_generate_and_teacher_forced_exact_match_agree():
    """Copy with a bigram model that answers 3 after <sep> and <eos> after 3: exactly the
    length-1 instances of the digit 3 are right, by greedy decoding (posjax.models.generate,
    with and without the key/value cache) and by the teacher-forced argmax."""
    model = bigram_language_model({alg.SEP: alg.TOKEN["3"], alg.TOKEN["3"]: alg.EOS},
                                  default=alg.TOKEN["0"])
    data = alg.make_dataset("copy", alg.eval_lengths(range(1, 4), 40), seed=0)
    truth = (data["length"] == 1) & (data["tokens"][:, 1] == alg.TOKEN["3"])
    assert 0 < truth.sum() < (data["length"] == 1).sum()  # both outcomes among length 1
    from posjax.training import lm_exact_match

    tf = lm_exact_match(model, data["tokens"], data["loss_mask"], batch=64)
    np.testing.assert_array_equal(tf, truth)
    from posjax.models import kv_cache_supported
    from posjax.training.evaluation import greedy_exact_match

    args = data["tokens"], data["prefix_len"], data["target_len"]
    assert kv_cache_supported(model)
    greedy, cached = greedy_exact_match(model, *args)
    assert cached  # NoPE decodes from the cache
    np.testing.assert_array_equal(greedy, truth)
    greedy, cached = greedy_exact_match(model, *args, use_cache=False)
    assert not cached
    np.testing.assert_array_equal(greedy, truth)
    with pytest.raises(ValueError, match="exceeds the sequence width"):
        greedy_exact_match(model, data["tokens"][:, :-1], data["prefix_len"], data["target_len"])


def test_pe_choices_cover_the_registry():
    from posjax import encodings

    names = set(encodings.names())
    assert set(lg.FULL_PES) | set(lg.EXCLUDED_PES) == names  # a new PE must be placed
    assert not set(lg.FULL_PES) & set(lg.EXCLUDED_PES)
    assert set(lg.QUICK_PES) <= set(lg.FULL_PES) and len(set(lg.FULL_PES)) == len(lg.FULL_PES)
    assert set(lg.ROPE_SCALINGS) <= set(lg.QUICK_PES)


def test_lm_loss_masks_non_target_tokens():
    class Const(nnx.Module):
        def __call__(self, tokens, **kwargs):
            return jnp.zeros((*tokens.shape, alg.vocab_size()))

    data = alg.make_dataset("copy", [3, 2], seed=0)
    from posjax.training import masked_lm_loss

    loss, metrics = masked_lm_loss(Const(), {k: jnp.asarray(v) for k, v in data.items()},
                                   jax.random.key(0))
    assert float(loss) == pytest.approx(np.log(alg.vocab_size()), rel=1e-6)


def test_scaling_options_use_the_training_width():
    cfg = lg.PRESETS["quick"]
    tw, sw = lg.widths(cfg, "copy")
    assert (tw, sw) == (2 * 8 + 3, 2 * 32 + 3)
    o = lg.pe_options("rope_yarn", cfg, tw, sw)
    assert o["original_max_len"] == tw and o["factor"] == pytest.approx(sw / tw)
    assert lg.pe_options("learned", cfg, tw, sw) == {"num_positions": sw}
    assert lg.pe_options("hope", cfg, tw, sw) == {"train_length": tw}
    assert lg.pe_options("longrope", cfg, tw, sw) == {"factor": sw / tw, "original_max_len": tw}


def tiny_config(*, pes, num_layers, seeds, **own):
    """A config small enough for the default suite (library fields nested)."""
    import dataclasses

    from posjax.models import TransformerConfig
    from posjax.training import TrainConfig

    return lg.LengthGeneralizationConfig(
        tasks=("copy",), pes=pes, train_max_length=2, test_factor=2, n_train=32, per_length=2,
        eval_batch=8, greedy_check_per_length=1, seeds=seeds, **own,
        model=TransformerConfig(num_layers=num_layers, d_model=8, num_heads=2, d_ff=8, pe="none",
                                causal=True, pre_norm=True, dropout=0.0),
        train=dataclasses.replace(lg.PRESETS["quick"].train, steps=1, batch_size=8,
                                  warmup_steps=0))


def test_tiny_run_writes_outputs_and_resumes(tmp_path):
    cfg = tiny_config(pes=("rope_linear",), num_layers=1, seeds=2)
    out = str(tmp_path)
    res = lg.run(cfg, out)
    for name in ("results.json", "report.md", "curves_copy.png"):
        assert os.path.exists(os.path.join(out, name))
    saved = json.load(open(os.path.join(out, "results.json")))
    assert saved["config"]["unseen_rows"] == "init" and "versions" in saved
    assert [c["seed"] for c in res["cells"]] == [0, 1]  # two seeds, one ensemble
    cells = {c["pe"]: c for c in res["cells"]}
    cell = cells["rope_linear"]  # evaluated on the RoPE model trained for it
    assert set(cell["per_length"]) == {"1", "2", "3", "4"}
    # greedy decoding (generate, from the cache) agrees with the teacher-forced exact match
    check = cell["greedy_check"]
    assert check["n"] == 4 and check["agree"] == 4 and check["kv_cache"] is True
    assert cell["trained_as"] == "rope"
    assert cell["pe_options"]["factor"] == pytest.approx(11 / 7)  # test width / train width
    assert "acc@1xL" in open(os.path.join(out, "report.md")).read()
    again = lg.run(cfg, out)  # every cell is read back, nothing retrained
    assert again["cells"] == res["cells"]


def test_schedules_are_rows_through_set_pes(tmp_path):
    """--set pes=sched_<preset> selects a per-layer schedule (quick preset unchanged)."""
    from experiments.common import experiment_parser, resolve_config
    from posjax.models.schedules import PRESETS

    assert not set(lg.SCHEDULE_PES) & set(lg.PRESETS["quick"].pes)
    assert set(lg.SCHEDULE_PES.values()) == {p for p in PRESETS if PRESETS[p]["causal"]}
    args = experiment_parser("x", default_out=str(tmp_path)).parse_args(
        ["--quick", "--set", "pes=none,sched_gemma3", "schedule_span=4"])
    cfg = resolve_config(args, lg.PRESETS)
    assert cfg.pes == ("none", "sched_gemma3") and cfg.schedule_span == 4
    mcfg = lg.model_config(cfg, "sched_gemma3", {}, 40)
    assert mcfg.kinds == ("sliding", "full") and mcfg.sliding_window == 4 and mcfg.causal
    assert mcfg.layer_pe_spec("full") == ("rope", {"base": 1e6})
    with pytest.raises(ValueError, match="schedules: sched_llama4_irope"):
        lg.LengthGeneralizationConfig(pes=("sched_nope",))


def test_dotted_schedule_reaches_the_model(tmp_path):
    """--set model.layer_types=... model.sliding_window=... reaches every cell's
    TransformerConfig; the flat key fails with "did you mean model.layer_types?"."""
    from experiments.common import experiment_parser, resolve_config

    args = experiment_parser("x", default_out=str(tmp_path)).parse_args(
        ["--quick", "--set", "model.layer_types=sliding,full", "--set", "model.sliding_window=8",
         "model.layer_pe={\"full\": \"none\"}", "train.learning_rate=1e-3"])
    cfg = resolve_config(args, lg.PRESETS)
    assert cfg.model.layer_types == ("sliding", "full") and cfg.train.learning_rate == 1e-3
    mcfg = lg.model_config(cfg, "rope", {}, 40)
    assert mcfg.kinds == ("sliding", "full") and mcfg.sliding_window == 8
    assert mcfg.layer_pe_spec("full") == ("none", {}) and mcfg.layer_pe_spec("sliding")[0] == "rope"
    assert mcfg.max_len == 40 and mcfg.causal and mcfg.d_model == 64   # the quick decoder
    for flat in ("layer_types=sliding,full", "sliding_window=8", "d_model=32"):
        key = flat.partition("=")[0]
        with pytest.raises(ValueError, match=f"did you mean model.{key}\\?"):
            lg.main(["--quick", "--set", flat, "--out", str(tmp_path)])
    with pytest.raises(ValueError, match="did you mean train.learning_rate\\?"):
        lg.main(["--quick", "--set", "learning_rate=1e-3", "--out", str(tmp_path)])


@pytest.mark.slow
def test_tiny_schedule_run_decodes_from_the_cache(tmp_path):
    """A sched_* row trains, and its greedy check decodes from the cache (ring buffers for the
    chunked layers) in agreement with the teacher-forced exact match."""
    cfg = tiny_config(pes=("sched_llama4_irope",), num_layers=4, seeds=1, schedule_span=2)
    res = lg.run(cfg, str(tmp_path))
    check = res["cells"][0]["greedy_check"]
    assert check["n"] == 4 and check["agree"] == 4 and check["kv_cache"] is True


def test_summary_mrr_and_nope_verdict():
    from experiments.length_generalization.report import nope_verdict, summarise

    cfg = lg.LengthGeneralizationConfig(tasks=("copy", "reverse"), pes=("none", "rope", "alibi"), train_max_length=2,
                      test_factor=2)

    def cell(ood):
        return {"per_length": {"1": 1.0, "2": 1.0, "3": ood, "4": ood / 2}}

    cells = {("copy", "none", 0): cell(0.8), ("copy", "rope", 0): cell(0.0),
             ("copy", "alibi", 0): cell(0.4), ("reverse", "none", 0): cell(0.2),
             ("reverse", "rope", 0): cell(0.2), ("reverse", "alibi", 0): cell(0.6)}
    s = summarise(cells, cfg, 1)
    assert s["tasks"]["copy"]["none"]["acc_2x"] == [0.4]
    assert s["tasks"]["copy"]["none"]["ood_mean"] == [pytest.approx(0.6)]
    # copy: none 1st, alibi 2nd, rope 3rd; reverse: alibi 1st, none and rope tied 2nd
    assert s["mrr_ood"]["none"] == pytest.approx((1 + 1 / 2) / 2)
    assert s["mrr_ood"]["rope"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert "inconclusive at this scale" in nope_verdict(s)  # one seed: no interval
    # three seeds: NoPE clearly ahead on copy (reproduced), clearly behind on reverse (not)
    three = {}
    for seed, jitter in enumerate((0.0, 0.02, -0.02)):
        for (task, pe, _), c in cells.items():
            ood = {("copy", "none"): 0.8, ("copy", "rope"): 0.0, ("copy", "alibi"): 0.4,
                   ("reverse", "none"): 0.2, ("reverse", "rope"): 0.2,
                   ("reverse", "alibi"): 0.6}[(task, pe)]
            three[(task, pe, seed)] = cell(max(ood + jitter, 0.0))
    from experiments.length_generalization.report import nope_claim
    claims = {c["task"]: c["verdict"] for c in nope_claim(summarise(three, cfg, 3))}
    assert claims == {"copy": "reproduced", "reverse": "not reproduced"}
    zero = {k: cell(0.0) for k in three}
    assert "inconclusive" in nope_verdict(summarise(zero, cfg, 3))


def test_config_rejects_unsupported_interpretations():
    with pytest.raises(ValueError, match="unseen_rows"):
        lg.LengthGeneralizationConfig(unseen_rows="interpolate")
    with pytest.raises(ValueError, match="rope_scaling_mode"):
        lg.LengthGeneralizationConfig(rope_scaling_mode="dynamic")


def test_cli_errors_are_value_errors():
    with pytest.raises(ValueError, match="unknown PE"):
        lg.main(["--quick", "--set", "pes=nope_pe", "--out", "/tmp/unused_lg"])
    with pytest.raises(ValueError, match="unknown task"):
        lg.main(["--quick", "--set", "tasks=sorting", "--out", "/tmp/unused_lg"])
    with pytest.raises(ValueError, match="valid keys: tasks, pes"):
        lg.main(["--quick", "--set", "paper_size=1", "--out", "/tmp/unused_lg"])


@pytest.mark.slow
def test_quick_mode_end_to_end(tmp_path):
    res = lg.main(["--quick", "--seeds", "1", "--out", str(tmp_path)])
    summary = res["summary"]["tasks"]["copy"]
    assert set(lg.QUICK_PES) <= set(summary)
    assert np.mean(summary["rope"]["id_mean"]) > 0.5  # the quick model learns in distribution


def test_lape_base_must_be_a_registered_additive_pe():
    from experiments.length_generalization import LengthGeneralizationConfig

    assert LengthGeneralizationConfig(lape_base="sinusoidal").lape_base == "sinusoidal"
    with pytest.raises(ValueError, match="unknown positional encoding 'learned_other'"):
        LengthGeneralizationConfig(lape_base="learned_other")
    with pytest.raises(ValueError, match="hook 'rotate'"):
        LengthGeneralizationConfig(lape_base="rope")
