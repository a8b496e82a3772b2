"""The PE-swap experiment's MLM data (the stdlib stream in windows, BERT masks, a held-out
split) and its training loop for a subset of the parameters (the rest frozen)."""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from experiments.pe_swap.config import PESwapConfig
from posjax.data.mlm_masking import mask_windows, split_windows


@dataclasses.dataclass(frozen=True)
class Data:
    train: np.ndarray      # [W_train, n] int32 windows
    held_out: np.ndarray   # [W_eval, n]
    eval_batch: dict       # fixed masks of the held-out windows
    vocab_size: int
    mask_id: int
    special: tuple[int, ...]
    info: dict
    sentence_tokens: np.ndarray   # [M, max_len] the sentences, one per row (geometry)
    sentence_lengths: np.ndarray  # [M]
    pad_id: int


def prepare_data(cfg: PESwapConfig, checkpoint) -> Data:
    from posjax.data.corpus import load_tokenizer
    from posjax.data.stdlib_text import stdlib_digest, stdlib_sentences, stdlib_stream

    tok = load_tokenizer(checkpoint)
    sentences = stdlib_sentences(min_words=cfg.min_words, files=cfg.stdlib_files or None)
    windows = stdlib_stream(tok, cfg.max_len, sentences=sentences, specials=True)
    train, held = split_windows(windows, cfg.eval_windows)
    if cfg.train_windows is not None:
        train = train[:cfg.train_windows]
    mask_id = tok.token_id("[MASK]")
    special = tuple(sorted({tok.pad_id, *tok.special_ids, mask_id,
                            *(i for t in ("[UNK]",) if (i := tok.tokenizer.token_to_id(t))
                              is not None)}))
    eval_batch = mask_windows(held, cfg.num_masked, vocab_size=tok.vocab_size, mask_id=mask_id,
                              special=special, rng=np.random.default_rng(10_000 + cfg.data_seed))
    info = {"corpus": "stdlib docstrings (posjax.data.stdlib_text)",
            "sentences": len(sentences), "digest": stdlib_digest(sentences),
            "windows": int(len(windows)), "train_windows": int(len(train)),
            "held_out_windows": int(len(held)), "tokens_per_window": cfg.max_len,
            "masked_per_window": cfg.num_masked, "tokenizer": tok.source}
    enc = tok.encode(sentences, cfg.max_len, keep_special=True)
    return Data(train, held, eval_batch, tok.vocab_size, mask_id, special, info, enc.tokens,
                enc.lengths, tok.pad_id)


def build_model(cfg: PESwapConfig):
    """``(MaskedLMEncoder, TransformerConfig)``: the checkpoint's encoder with a new MLM head
    (:func:`posjax.pretrained.mlm_encoder`); ValueError when ``max_len`` exceeds its table."""
    from posjax.pretrained import mlm_encoder

    model, tcfg = mlm_encoder(cfg.pretrained, dtype=cfg.dtype, seed=0)
    if tcfg.max_len < cfg.max_len:
        raise ValueError(f"max_len={cfg.max_len} exceeds the checkpoint's {tcfg.max_len} "
                         f"positions")
    return model, tcfg


def train_mlm(model, data: Data, tcfg, *, num_masked: int, data_seed: int, seed: int,
              trainable, eval_every: int | None = None, log=None) -> dict[str, Any]:
    """Train the ``trainable`` parameters (an NNX filter; the rest stays frozen) of ``model``
    (a :class:`posjax.pretrained.MaskedLMEncoder`) in place with the optimiser of ``tcfg``
    (``steps``, ``batch_size``, :func:`posjax.training.make_optimizer`) on MLM batches of
    ``num_masked`` targets per window (``step -> batch`` seeded by ``(data_seed, seed, step)``);
    held-out curves every ``eval_every`` steps (None: none). Returns losses, curves, timings."""
    import jax
    import optax
    from flax import nnx

    from posjax.pretrained import masked_position_loss
    from posjax.training import make_optimizer

    steps = tcfg.steps
    graphdef, train_state, rest = nnx.split(model, trainable, ...)
    opt = make_optimizer(tcfg)
    opt_state = opt.init(train_state)

    @jax.jit
    def step_fn(train_state, rest, opt_state, batch):
        def f(ts):
            return masked_position_loss(nnx.merge(graphdef, ts, rest), batch)
        (loss, acc), grads = jax.value_and_grad(f, has_aux=True)(train_state)
        updates, opt_state = opt.update(grads, opt_state, train_state)
        return optax.apply_updates(train_state, updates), opt_state, loss, acc

    @jax.jit
    def eval_fn(train_state, rest, batch):
        return masked_position_loss(nnx.merge(graphdef, train_state, rest), batch)

    def held_out(ts):
        losses, accs = [], []
        E = data.eval_batch
        for s in range(0, len(E["tokens"]), 16):
            chunk = {k: v[s:s + 16] for k, v in E.items()}
            loss, acc = eval_fn(ts, rest, chunk)
            losses.append(float(loss) * len(chunk["tokens"]))
            accs.append(float(acc) * len(chunk["tokens"]))
        total = len(E["tokens"])
        return sum(losses) / total, sum(accs) / total

    curve = []
    if eval_every:
        loss, acc = held_out(train_state)
        curve.append({"step": 0, "loss": loss, "accuracy": acc})
    train_losses, t_steps = [], []
    t_first = None
    for step in range(steps):
        rng = np.random.default_rng([data_seed, seed, step])
        rows = data.train[rng.integers(0, len(data.train), tcfg.batch_size)]
        batch = mask_windows(rows, num_masked, vocab_size=data.vocab_size,
                             mask_id=data.mask_id, special=data.special, rng=rng)
        t0 = time.perf_counter()
        train_state, opt_state, loss, acc = step_fn(train_state, rest, opt_state, batch)
        loss = float(loss)
        if step == 0:
            t_first = time.perf_counter() - t0  # includes compilation
        else:
            t_steps.append(time.perf_counter() - t0)
        if not math.isfinite(loss):
            raise ValueError(f"training diverged at step {step} (loss {loss})")
        train_losses.append(loss)
        if eval_every and ((step + 1) % eval_every == 0 or step + 1 == steps):
            h_loss, h_acc = held_out(train_state)
            curve.append({"step": step + 1, "loss": h_loss, "accuracy": h_acc})
            if log:
                log(f"  step {step + 1}: train {loss:.3f}, held-out {h_loss:.3f} "
                    f"(acc {h_acc:.3f})")
    nnx.update(model, train_state)
    final_loss, final_acc = held_out(train_state)
    return {"train_loss": train_losses, "curve": curve, "held_out_loss": final_loss,
            "held_out_accuracy": final_acc, "first_step_seconds": t_first,
            "seconds_per_step": float(np.median(t_steps)) if t_steps else t_first}
