"""Lemmas 1, 3 and 4 of arXiv 2604.05217 (Appendix A, our readings in ``docs/interpretations.md``)
beyond the context-free toy: a one-layer posjax ``LanguageModel`` with a learned PE.

The model is posjax's own :class:`posjax.models.LanguageModel` (a bidirectional one-layer
pre-LN ``Transformer`` with ``pe="learned"`` and an untied MLM head), bridged to neural-tangents
with :func:`ntk.kernels.nnx_bridge`. Every neural-tangents call goes through
:func:`ntk.recording.neural_tangents` (directly or via :func:`ntk.kernels.empirical_ntk`), so the
poisons of :mod:`ntk.mutants` reach it.

Setting (fields of :class:`AttentionLemmaConfig`):

* corpus: ``S`` sequences of ``n`` tokens, token ``i`` drawn independently from ``P_i`` of
  ``posjax.data.synthetic.three_regime_corpus`` (``V`` tokens); id ``V`` is ``[MASK]``, so the
  model's vocabulary is ``V + 1``. Sequence ``s`` masks the ``m`` positions
  ``(s + k n / m) mod n`` (``k < m``); every position is masked in ``S m / n`` sequences.
* loss: the MLM cross-entropy at the masked slots, with the masked token integrated out under
  ``P_i`` (the positions of the corpus are independent, so ``E[-log q(t_i) | context] =
  -sum_w P_iw log q_w``): ``L = mean_{(s, i) masked} sum_w P_iw (-log softmax(z_si)_w)``. This
  is the attention model's counterpart of the toy's exact expected loss (``ntk.toy``).
* parameterisation: posjax's standard one (LeCun-normal Linear kernels, zero biases, token
  embeddings ``N(0, embed_init_std^2)``, all positions starting at the common table
  ``N(0, pe_init_std^2)``, ``0`` = equal rows). **Reading:** under this standard
  parameterisation the NTK grows like ``d`` (the readout's gradient is the ``d``-dimensional
  hidden state), so gradient descent has a lazy (kernel) limit only with a step ``lr ∝ 1/d``
  (Lee et al., arXiv 1902.06720, Sec. 2.4 and App. F): ``lr(d) = lr * ref_width / d``
  (``lr_scaling="inverse_width"``). ``lr_scaling="constant"`` keeps ``lr(d) = lr``: the
  function moves ``O(d / ref_width)`` further per step at larger widths, the lazy premise fails
  (the non-lazy variant, Lemma 1's negative control).
* dynamics: exact full-batch gradient descent on all parameters for ``steps`` steps (the
  horizon ``t = lr(d) * steps``), and the same descent on neural-tangents' ``linearize`` of the
  model's apply function around the initial parameters (the lazy dynamics of Lemma 1).

What each lemma check compares (neural-tangents prediction vs a computation without it):

* L1 (:func:`lemma1_attention`): the PE displacement of the exact run against that of the
  linearised run, ``e = ||dp - dp_lin|| / ||dp||``, against width.
* L3 (:func:`lemma3_attention`): the affine maps ``A`` of ``displacement_regression(dp, P)`` of
  the exact and the linearised displacement, ``g = ||A_exact - A_lin||_F / ||A_lin||_F``.
* L4 (:func:`lemma4_attention`): ``c1, c2`` = square roots of the extreme eigenvalues of the
  positional NTK ``Theta_p [V, V]`` (neural-tangents ``empirical_ntk_fn``) restricted to
  ``{v : 1^T v = 0}``. ``Theta_p`` is the own-position block: ``J_i = d z_si[:V] / d p_i`` at
  the masked slot ``i`` (all other parameters fixed), ``Theta_p = mean_{(s, i)} J_i J_i^T``
  (mean over the masked slots of the corpus).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ntk import lemma_statistics as lstats
from ntk.recording import cached_with_calls, neural_tangents
from ntk.result import CheckResult, fmt, outcome

__all__ = ["AttentionLemmaConfig", "attention_corpus", "build_model", "attention_sweep",
           "own_position_ntk", "train_pe", "lemma1_attention", "lemma3_attention",
           "lemma4_attention", "PREMISE_BREAKERS", "NUISANCE", "R2_READING", "C1_FLOOR"]

R2_READING = 0.95      # L3: R^2 of the exact displacement at the largest width (a reading)
C1_FLOOR = 1e-3        # L4: c1 / c2 at every width of the window (c1 > 0 for d >= V)
L1_SLOPE = -0.5        # L1: the CI's lower end must reach an O(d^-1/2) rate (an upper bound)
LR_SCALINGS = ("inverse_width", "constant")


@dataclasses.dataclass(frozen=True)
class AttentionLemmaConfig:
    """Settings of the attention-model lemma checks (``SweepConfig.attention``).

    Attributes:
      widths / seeds: the width sweep (``d_model``) and the seeds (of the model init).
      num_positions, vocab_size: ``n`` and ``V`` of the corpus (the model has ``V + 1`` ids).
      num_sequences: ``S`` sampled sequences; masks_per_sequence: ``m`` masked slots each
        (``n % m == 0``; every position is masked in ``S m / n`` sequences).
      corpus_mixing, corpus_alpha, corpus_seed: ``three_regime_corpus`` settings (the seed also
        seeds the samples).
      num_heads, ff_ratio: attention heads and ``d_ff = ff_ratio * d_model``.
      embed_init_std, pe_init_std: token-embedding and PE-table init std (``pe_init_std = 0``:
        every position starts at the same row, the common initialisation).
      lr, lr_scaling, ref_width: step size ``lr * ref_width / d`` (``"inverse_width"``, the lazy
        reading) or ``lr`` (``"constant"``, non-lazy); see the module docstring.
      steps: gradient-descent steps to the horizon.
      shuffle_positions: premise breaker: each sequence draws its own random assignment of the
        distributions to positions (tokens and soft targets), so no position has a distribution
        of its own and the displacement cannot be an affine function of ``P_i``.
      bottleneck_width: width below ``V - 1`` of Lemma 4's negative control.
      negative_seeds: seeds of the non-lazy run of Lemma 1's negative control.
      window_top: analysis only (not a cache key): the top width of the verdict window
        (``None``: the largest width).
    """

    widths: tuple[int, ...] = (32, 64, 128, 256)
    seeds: tuple[int, ...] = (0, 1)
    num_positions: int = 8
    vocab_size: int = 12
    num_sequences: int = 32
    masks_per_sequence: int = 1
    corpus_mixing: str = "linear"
    corpus_alpha: float = 0.3
    corpus_seed: int = 0
    num_heads: int = 1
    ff_ratio: int = 1
    embed_init_std: float = 1.0
    pe_init_std: float = 0.0
    lr: float = 0.05
    lr_scaling: str = "inverse_width"
    ref_width: int = 64
    steps: int = 4
    shuffle_positions: bool = False
    bottleneck_width: int = 8
    negative_seeds: tuple[int, ...] = (0,)
    window_top: int | None = dataclasses.field(default=None, compare=False)

    @classmethod
    def full(cls) -> "AttentionLemmaConfig":
        """``--full`` (one GPU): widths 64 -> 2048, 3 seeds, 64 sequences with 2 masked slots
        each. The ``--quick`` default (widths 32 -> 256, 32 sequences, 1 masked slot) is the
        size whose sweep and mutant reruns fit the 2-core CPU budget (64 -> 512 with 64 x 2
        sequences took 15 min for one sweep there)."""
        return cls(widths=(64, 128, 256, 512, 1024, 2048), seeds=(0, 1, 2), num_sequences=64,
                   masks_per_sequence=2)

    def __post_init__(self):
        if len(self.widths) < 3 or list(self.widths) != sorted(set(self.widths)):
            raise ValueError(f"AttentionLemmaConfig.widths must be >= 3 increasing values, got "
                             f"{self.widths}")
        if not self.seeds or not self.negative_seeds:
            raise ValueError("AttentionLemmaConfig.seeds and negative_seeds must be non-empty")
        if self.lr_scaling not in LR_SCALINGS:
            raise ValueError(f"AttentionLemmaConfig.lr_scaling must be one of {LR_SCALINGS}, got "
                             f"{self.lr_scaling!r}")
        if self.num_positions % self.masks_per_sequence:
            raise ValueError(f"AttentionLemmaConfig.masks_per_sequence "
                             f"{self.masks_per_sequence} must divide num_positions "
                             f"{self.num_positions}")
        if self.bottleneck_width >= self.vocab_size - 1:
            raise ValueError(f"AttentionLemmaConfig.bottleneck_width {self.bottleneck_width} must "
                             f"be below vocab_size - 1 = {self.vocab_size - 1}")
        for name in ("lr", "steps", "num_sequences", "ref_width"):
            if getattr(self, name) <= 0:
                raise ValueError(f"AttentionLemmaConfig.{name} must be positive, got "
                                 f"{getattr(self, name)}")
        for w in (*self.widths, self.bottleneck_width):
            if w % self.num_heads:
                raise ValueError(f"AttentionLemmaConfig: width {w} is not divisible by "
                                 f"num_heads {self.num_heads}")
        if self.window_top is not None:
            lstats.width_window(self.widths, self.window_top)

    def step_size(self, width: int) -> float:
        """``lr(d)``: ``lr * ref_width / d`` (lazy reading) or ``lr`` (constant)."""
        return self.lr * (self.ref_width / width if self.lr_scaling == "inverse_width" else 1.0)

    def window(self) -> tuple[int, ...]:
        return lstats.width_window(self.widths, self.window_top)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def attention_corpus(acfg: AttentionLemmaConfig) -> dict[str, np.ndarray]:
    """The fixed MLM corpus of the sweep.

    Returns:
      dict with ``P [n, V]`` (float64, the positional distributions), ``tokens [S, n]`` (int32,
      masked slots hold ``V``), ``targets [S, n, V + 1]`` (float32 soft targets: ``P`` of the
      slot's distribution at masked slots, zero elsewhere; the ``[MASK]`` class is never a
      target), ``masked [S, n]`` (bool) and ``source [S, n]`` (the row of ``P`` each slot was
      drawn from: ``arange(n)`` unless ``shuffle_positions``).
    """
    from posjax.data.synthetic import sample_tokens, three_regime_corpus
    n, V, S, m = acfg.num_positions, acfg.vocab_size, acfg.num_sequences, acfg.masks_per_sequence
    P = three_regime_corpus(n, V, mixing=acfg.corpus_mixing, alpha=acfg.corpus_alpha,
                            seed=acfg.corpus_seed).P
    draws = np.asarray(sample_tokens(P, S, seed=acfg.corpus_seed + 1))           # [S, n]
    source = np.tile(np.arange(n), (S, 1))
    if acfg.shuffle_positions:
        rng = np.random.default_rng(acfg.corpus_seed + 2)
        source = np.argsort(rng.random((S, n)), axis=1)
        draws = np.take_along_axis(draws, source, axis=1)
    masked = np.zeros((S, n), bool)
    slots = (np.arange(S)[:, None] + np.arange(m)[None, :] * (n // m)) % n       # [S, m]
    np.put_along_axis(masked, slots, True, axis=1)
    tokens = np.where(masked, V, draws).astype(np.int32)
    targets = np.zeros((S, n, V + 1), np.float32)
    targets[..., :V] = P[source] * masked[..., None]
    return {"P": np.asarray(P, np.float64), "tokens": tokens, "targets": targets,
            "masked": masked, "source": source}


def build_model(acfg: AttentionLemmaConfig, width: int, seed: int):
    """posjax ``LanguageModel`` (one layer, learned PE, bidirectional, pre-LN) at ``d = width``."""
    from flax import nnx

    from posjax.models import LanguageModel, TransformerConfig
    tcfg = TransformerConfig(
        vocab_size=acfg.vocab_size + 1, num_layers=1, d_model=width, num_heads=acfg.num_heads,
        d_ff=acfg.ff_ratio * width, max_len=acfg.num_positions, pe="learned",
        pe_options={"init": "normal", "std": acfg.pe_init_std}, causal=False,
        embed_init_std=acfg.embed_init_std)
    return LanguageModel(tcfg, rngs=nnx.Rngs(seed))


def mlm_loss(logits, targets, masked) -> jax.Array:
    """``mean_{masked (s, i)} sum_w targets_siw (-log softmax(logits_si)_w)`` (scalar)."""
    logq = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    per_slot = -jnp.sum(targets * logq, axis=-1)
    w = masked.astype(jnp.float32)
    return jnp.sum(per_slot * w) / jnp.sum(w)


def _pe_table(params) -> jax.Array:
    """The ``[n, d]`` learned PE table inside an ``nnx.State`` of the LanguageModel."""
    return params["transformer"]["pes"][0]["embedding"][...]


def train_pe(apply_fn, params0, corpus: dict, *, lr: float, steps: int) -> dict:
    """Full-batch gradient descent of ``mlm_loss(apply_fn(params, tokens))`` from ``params0``.

    ``apply_fn`` is the model's (exact run) or neural-tangents' ``linearize`` of it (lazy run).

    Returns:
      dict with ``table`` ``[n, d]`` after ``steps`` steps and after one step (``table_step``),
      ``logits`` at the masked slots at the horizon ``[S, n, V + 1]`` (float64) and ``loss``.
    """
    tokens = jnp.asarray(corpus["tokens"])
    targets = jnp.asarray(corpus["targets"])
    masked = jnp.asarray(corpus["masked"])

    def loss(p):
        return mlm_loss(apply_fn(p, tokens), targets, masked)

    @jax.jit
    def run(p):
        def step(q, _):
            g = jax.grad(loss)(q)
            q = jax.tree.map(lambda a, b: a - lr * b, q, g)
            return q, _pe_table(q)
        p_t, tables = jax.lax.scan(step, p, None, length=steps)
        return p_t, tables[0], apply_fn(p_t, tokens), loss(p_t)
    p_t, table_step, logits, final = run(params0)
    return {"table": np.asarray(_pe_table(p_t), np.float64),
            "table_step": np.asarray(table_step, np.float64),
            "logits": np.asarray(logits, np.float64), "loss": float(final), "params": p_t}


def own_position_ntk(model, corpus: dict) -> np.ndarray:
    """Own-position positional NTK ``Theta_p [n, V, V]`` via neural-tangents (float64 output).

    For each masked slot ``(s, i)`` of the corpus: ``J_si = d z_si[:V] / d p_i`` (the model's
    other parameters and PE rows fixed), by neural-tangents' ``empirical_ntk_fn`` on the row
    ``p_i`` and the single sequence ``s`` (``[1, 1, V, V]``: 12-row Jacobians, well below the
    size where jitted batched VJPs go wrong, :func:`ntk.kernels.jit_jacobians_reliable`);
    ``Theta_p[i] = mean_s J_si J_si^T`` over the sequences masking ``i``. The slots are
    traversed by one ``lax.map`` under ``jit``.
    """
    from ntk.kernels import DEFAULT_IMPLEMENTATION, nnx_bridge, resolve_implementation
    nt = neural_tangents()
    impl = resolve_implementation(DEFAULT_IMPLEMENTATION)
    apply_fn, pe_params = nnx_bridge(model, param_filter="pes")
    table = _pe_table_of(pe_params)
    n = table.shape[0]
    V = corpus["targets"].shape[-1] - 1
    seq, pos = np.nonzero(corpus["masked"])                      # masked slots (s, i)
    tokens = jnp.asarray(corpus["tokens"][seq])[:, None]        # [slots, 1, T]

    def slot(args):
        i, x = args

        def apply_row(row, x):
            out = apply_fn(_with_table(pe_params, table.at[i].set(row)), x)
            return jax.lax.dynamic_index_in_dim(out, i, axis=1, keepdims=False)[:, :V]
        fn = nt.empirical_ntk_fn(apply_row, trace_axes=(), vmap_axes=0, implementation=impl)
        return fn(x, None, table[i])[0, 0]                          # [V, V]
    thetas = np.asarray(jax.jit(lambda I, X: jax.lax.map(slot, (I, X)))(
        jnp.asarray(pos, jnp.int32), tokens), np.float64)             # [slots, V, V]
    counts = np.bincount(pos, minlength=n)
    return np.stack([thetas[pos == i].sum(0) / counts[i] for i in range(n)])


def _pe_table_of(pe_params) -> jax.Array:
    return pe_params["transformer"]["pes"][0]["embedding"][...]


def _with_table(pe_params, table):
    """``pe_params`` (an ``nnx.State`` holding only the PE table) with the table replaced."""
    return jax.tree.map(lambda _: table, pe_params)


def _run_one(acfg: AttentionLemmaConfig, corpus: dict, width: int, seed: int, *,
             theta: bool) -> dict:
    from ntk.kernels import nnx_bridge
    nt = neural_tangents()
    model = build_model(acfg, width, seed)
    apply_fn, params0 = nnx_bridge(model)
    lr = acfg.step_size(width)
    start = np.asarray(_pe_table(params0), np.float64)
    exact = train_pe(apply_fn, params0, corpus, lr=lr, steps=acfg.steps)
    lin = train_pe(nt.linearize(apply_fn, params0), params0, corpus, lr=lr, steps=acfg.steps)
    z0 = np.asarray(apply_fn(params0, jnp.asarray(corpus["tokens"])), np.float64)
    m = corpus["masked"]
    dz, dz_lin = exact["logits"][m] - z0[m], lin["logits"][m] - z0[m]
    dp, dp_lin = exact["table"] - start, lin["table"] - start
    run = {"width": width, "seed": seed, "lr": lr, "table0": start,
           "table_t": exact["table"], "table_t_lin": lin["table"],
           "delta_p": dp, "delta_p_lin": dp_lin, "delta_p_step": exact["table_step"] - start,
           "lazy_error": float(np.linalg.norm(dp - dp_lin) / np.linalg.norm(dp)),
           "logit_error": float(np.linalg.norm(dz - dz_lin) / np.linalg.norm(dz)),
           "loss": exact["loss"], "loss_lin": lin["loss"]}
    for key in ("lazy_error", "logit_error", "loss", "loss_lin"):
        if not np.isfinite(run[key]):
            raise ValueError(f"attention_sweep: {key} is not finite at width {width}, seed "
                             f"{seed} (lr {lr:g}, {acfg.steps} steps): the descent diverged")
    if theta:
        run["theta_p"] = own_position_ntk(model, corpus)
    return run


@cached_with_calls(maxsize=8)
def attention_sweep(acfg: AttentionLemmaConfig) -> dict:
    """Exact vs linearised training and the positional NTK per width and seed.

    Returns:
      ``{"corpus": attention_corpus(acfg), "runs": {width: [per-seed dict]}, "negative": ...,
      "bottleneck_theta_p": [n, V, V]}``. A run holds ``table0``, ``table_t``, ``table_t_lin``
      (``[n, d]`` PE tables at init and at the horizon, exact and linearised), ``delta_p`` /
      ``delta_p_lin`` / ``delta_p_step`` (``[n, d]`` displacements: horizon exact, horizon
      linearised, one exact step), ``lazy_error`` (``||dp - dp_lin|| / ||dp||``),
      ``logit_error`` (the same for the masked-slot logits), ``lr`` and ``theta_p``
      (``[n, V, V]``, :func:`own_position_ntk` at initialisation). ``negative`` is the run of
      the non-lazy variant (``lr_scaling="constant"``, ``negative_seeds``; ``{width: [runs]}``
      without ``theta_p``) or None when the sweep itself is the non-lazy one.
    """
    corpus = attention_corpus(acfg)
    runs = {w: [_run_one(acfg, corpus, w, s, theta=True) for s in acfg.seeds]
            for w in acfg.widths}
    negative = None
    if acfg.lr_scaling != "constant":
        neg = dataclasses.replace(acfg, lr_scaling="constant")
        negative = {w: [_run_one(neg, corpus, w, s, theta=False) for s in acfg.negative_seeds]
                    for w in lstats.width_window(acfg.widths)}
    bottleneck = own_position_ntk(build_model(acfg, acfg.bottleneck_width, acfg.seeds[0]),
                                  corpus)
    return {"corpus": corpus, "runs": runs, "negative": negative,
            "bottleneck_theta_p": bottleneck}


# --- checks -----------------------------------------------------------------------------------

PREMISE_BREAKERS = {
    # L1 (and L3): the step is not scaled with width, so training is not lazy at large width.
    "non_lazy": {"attention.lr_scaling": "constant"},
    # L3: no position has a distribution of its own, so dp_i cannot be affine in P_i.
    "shuffled_positions": {"attention.shuffle_positions": True},
}
NUISANCE = {"attention.window_top": (128,), "attention.seeds": ((2, 3),)}


def _meta(acfg: AttentionLemmaConfig, window) -> dict:
    return {"config": acfg.to_dict(), "widths": list(acfg.widths), "window": list(window),
            "model": "posjax LanguageModel, 1 layer, pe=learned, pre-LN, bidirectional"}


def _matrix(runs, window, fn) -> np.ndarray:
    """``[seeds, len(window)]`` of ``fn(run)``."""
    return np.array([[fn(runs[w][k]) for w in window] for k in range(len(runs[window[0]]))])


def lemma1_attention(cfg) -> CheckResult:
    """L1 on the attention model: the PE follows the linearised dynamics, error ``O(d^{-1/2})``.

    Statistic: the log-log slope over the width window (top three widths, or the three ending at
    ``window_top``) of the seed mean of ``e = ||dp - dp_lin|| / ||dp||`` (``dp_lin`` trained on
    ``nt.linearize``), with a seed-bootstrap CI. PASS iff the CI's lower end is ``<= -0.5`` (an
    ``O(d^{-1/2})`` rate is an upper bound) and ``min e >= DEGENERATE`` over the window (the
    linearised model is not the model itself). Control: the same rule for the masked-slot logit
    error. Negative control: the non-lazy variant (``lr`` not scaled with width, seeds
    ``negative_seeds``), whose error must not pass the rule.
    """
    acfg = cfg.attention
    sweep = attention_sweep(acfg)
    window = acfg.window()
    e = _matrix(sweep["runs"], window, lambda r: r["lazy_error"])
    el = _matrix(sweep["runs"], window, lambda r: r["logit_error"])
    fit = lstats.seed_bootstrap_slope(window, e)
    fit_l = lstats.seed_bootstrap_slope(window, el)
    ok = fit["ci"][0] <= L1_SLOPE and float(e.min()) >= lstats.DEGENERATE
    ok_l = fit_l["ci"][0] <= L1_SLOPE and float(el.min()) >= lstats.DEGENERATE
    control = outcome(fit_l["slope"], L1_SLOPE, ok_l,
                      "masked-slot logit error: slope CI lower end <= -0.5")
    neg = sweep["negative"]
    if neg is None:
        negative = outcome(float("nan"), L1_SLOPE, False,
                           "sweep is itself the non-lazy variant (no separate negative run)")
        neg_series = None
    else:
        nw = lstats.width_window(acfg.widths)
        en = _matrix(neg, nw, lambda r: r["lazy_error"])
        fit_n = lstats.seed_bootstrap_slope(nw, en)
        negative = outcome(fit_n["slope"], L1_SLOPE,
                           fit_n["ci"][0] <= L1_SLOPE and float(en.min()) >= lstats.DEGENERATE,
                           "non-lazy variant (lr not scaled with width): slope CI lower end "
                           "<= -0.5")
        neg_series = fit_n["per_width_mean"]
    all_e = [float(np.mean([r["lazy_error"] for r in sweep["runs"][w]])) for w in acfg.widths]
    detail = (f"attention model, ||dp - dp_lin|| / ||dp|| (nt.linearize) vs width "
              f"{list(acfg.widths)}: {fmt(all_e)}; window {list(window)} slope "
              f"{fit['slope']:.3f} CI [{fit['ci'][0]:.3f}, {fit['ci'][1]:.3f}] (lower end <= "
              f"-0.5), min e {e.min():.2e} (>= {lstats.DEGENERATE:g}); logit error slope "
              f"{fit_l['slope']:.3f} CI [{fit_l['ci'][0]:.3f}, {fit_l['ci'][1]:.3f}]; non-lazy "
              f"negative control slope {negative['statistic']:.3f}")
    return CheckResult("lemma1_attention", bool(ok), fit["slope"], L1_SLOPE, detail,
                       {**_meta(acfg, window), "lazy_error": all_e,
                        "lazy_error_per_seed": e.tolist(), "slope_ci": fit["ci"],
                        "logit_error": [float(np.mean([r["logit_error"] for r in
                                                       sweep["runs"][w]]))
                                        for w in acfg.widths],
                        "logit_slope": fit_l["slope"], "logit_slope_ci": fit_l["ci"],
                        "negative_lazy_error": neg_series,
                        "control": control, "negative_control": negative})


def _affine_gap(run, P) -> float:
    a = lstats.displacement_regression(run["delta_p"], P)["A"]
    b = lstats.displacement_regression(run["delta_p_lin"], P)["A"]
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def lemma3_attention(cfg) -> CheckResult:
    """L3 on the attention model: the exact displacement is the linearised one's affine map of P.

    ``g = ||A_exact - A_lin||_F / ||A_lin||_F``, ``A`` the affine maps of
    ``displacement_regression(dp, P)`` of the exact and the ``nt.linearize`` displacements (the
    linearised one is the neural-tangents prediction). PASS iff the CI upper end of the
    seed-bootstrap slope of ``g`` over the window is ``< 0``, ``min g >= DEGENERATE`` and the
    exact displacement's ``R^2`` on ``P`` at the largest width is ``>= 0.95`` (a reading, not
    a constant of the paper). Control: the one-step exact displacement's ``R^2 >= 0.95`` at the
    largest width. Negative control: the exact displacement regressed on row-permuted ``P``
    must not reach ``R^2 >= 0.95``.
    """
    acfg = cfg.attention
    sweep = attention_sweep(acfg)
    P = sweep["corpus"]["P"]
    window = acfg.window()
    g = _matrix(sweep["runs"], window, lambda r: _affine_gap(r, P))
    fit = lstats.seed_bootstrap_slope(window, g)
    top = sweep["runs"][window[-1]]
    r2 = float(np.mean([lstats.displacement_regression(r["delta_p"], P)["r2_P"] for r in top]))
    r2_step = float(np.mean([lstats.displacement_regression(r["delta_p_step"], P)["r2_P"]
                             for r in top]))
    perm = np.random.default_rng(0).permutation(P.shape[0])
    r2_perm = float(np.mean([lstats.displacement_regression(r["delta_p"], P[perm])["r2_P"]
                             for r in top]))
    ok = fit["ci"][1] < 0 and float(g.min()) >= lstats.DEGENERATE and r2 >= R2_READING
    control = outcome(r2_step, R2_READING, r2_step >= R2_READING,
                      "one-step exact displacement at the largest width: R^2 on P")
    negative = outcome(r2_perm, R2_READING, r2_perm >= R2_READING,
                       "exact displacement regressed on row-permuted P: R^2")
    all_g = [float(np.mean([_affine_gap(r, P) for r in sweep["runs"][w]])) for w in acfg.widths]
    r2_all = [float(np.mean([lstats.displacement_regression(r["delta_p"], P)["r2_P"]
                             for r in sweep["runs"][w]])) for w in acfg.widths]
    detail = (f"attention model, ||A_exact - A_lin|| / ||A_lin|| (affine maps of dp on P, "
              f"nt.linearize) vs width {list(acfg.widths)}: {fmt(all_g)}; window "
              f"{list(window)} slope {fit['slope']:.3f} CI [{fit['ci'][0]:.3f}, "
              f"{fit['ci'][1]:.3f}] (upper end < 0), min g {g.min():.2e}; R^2 of dp on P "
              f"{fmt(r2_all)} (>= {R2_READING}, a reading, at the largest); one-step R^2 "
              f"{r2_step:.3f}; permuted-P R^2 {r2_perm:.3f}")
    return CheckResult("lemma3_attention", bool(ok), fit["slope"], 0.0, detail,
                       {**_meta(acfg, window), "affine_gap": all_g,
                        "affine_gap_per_seed": g.tolist(), "slope_ci": fit["ci"],
                        "r2_P": r2_all, "r2_reading": R2_READING, "control": control,
                        "negative_control": negative})


def _constants(theta_p) -> tuple[float, float]:
    """``(c1, c2)``: square roots of the extreme tangent-space eigenvalues of the slot mean of
    ``theta_p [n, V, V]`` (:func:`ntk.appendix_a.tangent_spectrum`)."""
    from ntk.appendix_a import tangent_spectrum
    lam = np.clip(tangent_spectrum(np.mean(theta_p, axis=0)), 0.0, None)
    return float(np.sqrt(lam[0])), float(np.sqrt(lam[-1]))


def _containment(run, P, c1, c2) -> float:
    """Fraction of pairs ``i < j`` with ``c1 <= ||dp_i - dp_j|| / (lr ||P_i - P_j||) <= c2``
    for the one-step exact displacement (reported only, see :func:`lemma4_attention`)."""
    dX = lstats.pairwise_distances(run["delta_p_step"]) / run["lr"]
    dP = lstats.pairwise_distances(P)
    iu = np.triu_indices(P.shape[0], k=1)
    keep = dP[iu] > 1e-12
    ratio = dX[iu][keep] / dP[iu][keep]
    return float(np.mean((ratio >= c1) & (ratio <= c2)))


def lemma4_attention(cfg) -> CheckResult:
    """L4 on the attention model: ``J_p^T`` is a near-isometry of the tangent space, better with d.

    ``c1, c2`` = square roots of the extreme eigenvalues of the own-position positional NTK
    ``Theta_p`` (neural-tangents ``empirical_ntk_fn``, mean over the corpus' masked slots)
    restricted to ``{v : 1^T v = 0}``. PASS iff ``c1 / c2 >= 1e-3`` at every width of the
    window (``c1 > 0`` for ``d >= V``), the seed-bootstrap CI upper end of the slope of
    ``c2 / c1 - 1`` is ``< 0`` and ``min (c2 / c1 - 1) >= DEGENERATE`` (an isotropic kernel is
    not a measurement). Control: the same ``c1 / c2 >= 1e-3`` at the largest width from the
    per-slot kernels' worst position. Negative control: a bottleneck width below ``V - 1``,
    where ``J_p^T`` cannot be injective on the ``V - 1``-dim tangent space: ``c1 / c2`` must
    fall below ``1e-3``.

    The one-step containment ``c1 <= ||dp_i - dp_j|| / (lr ||P_i - P_j||) <= c2`` is reported
    (``data["containment"]``) but is not part of the verdict: in the toy ``dp_i = -lr J_p^T
    (q - P_i)`` with one ``J_p`` for all positions, so the bound is exact; here the gradient of
    ``p_i`` also flows through the key / value paths (``p_i`` is context of every other masked
    slot) and ``J_si`` depends on the sampled context of each slot, so ``dp_i - dp_j`` is not
    ``lr J^T (P_i - P_j)`` and the interval need not contain it.
    """
    acfg = cfg.attention
    sweep = attention_sweep(acfg)
    P = sweep["corpus"]["P"]
    window = acfg.window()
    cs = {w: [_constants(r["theta_p"]) for r in sweep["runs"][w]] for w in acfg.widths}
    excess = np.array([[c2 / c1 - 1 if c1 > 0 else np.inf for c1, c2 in cs[w]]
                       for w in window]).T                                    # [seeds, W]
    inv = np.array([[c1 / c2 for c1, c2 in cs[w]] for w in window]).T
    finite = np.all(np.isfinite(excess))
    fit = (lstats.seed_bootstrap_slope(window, excess) if finite
           else {"slope": float("inf"), "ci": [float("inf")] * 2, "per_width_mean": []})
    ok = (bool(np.all(inv.mean(0) >= C1_FLOOR)) and fit["ci"][1] < 0
          and float(excess.min()) >= lstats.DEGENERATE)
    from ntk.appendix_a import tangent_spectrum
    worst = min(float(np.sqrt(max(tangent_spectrum(th)[0], 0.0) / tangent_spectrum(th)[-1]))
                for r in sweep["runs"][window[-1]] for th in r["theta_p"])
    control = outcome(worst, C1_FLOOR, worst >= C1_FLOOR,
                      "worst single position's c1/c2 at the largest width")
    b1, b2 = _constants(sweep["bottleneck_theta_p"])
    inv_b = b1 / b2
    negative = outcome(inv_b, C1_FLOOR, inv_b >= C1_FLOOR,
                       f"bottleneck width {acfg.bottleneck_width} < V - 1 = "
                       f"{acfg.vocab_size - 1}: c1/c2")
    ratio = [float(np.mean([c2 / c1 if c1 > 0 else np.inf for c1, c2 in cs[w]]))
             for w in acfg.widths]
    contain = [float(np.mean([_containment(r, P, *c) for r, c in zip(sweep["runs"][w], cs[w])]))
               for w in acfg.widths]
    detail = (f"attention model, c2/c1 of the own-position J_p^T on the "
              f"{acfg.vocab_size - 1}-dim tangent space (Theta_p from nt.empirical_ntk_fn) vs "
              f"width {list(acfg.widths)}: {fmt(ratio)}; window {list(window)} slope of c2/c1 "
              f"- 1 {fit['slope']:.3f} CI [{fit['ci'][0]:.3f}, {fit['ci'][1]:.3f}] (upper end "
              f"< 0), min c1/c2 {inv.min():.3g} (>= {C1_FLOOR:g}); one-step containment "
              f"(reported) {fmt(contain)}; bottleneck c1/c2 {inv_b:.1e}")
    return CheckResult("lemma4_attention", bool(ok), fit["slope"], 0.0, detail,
                       {**_meta(acfg, window), "ratio": ratio,
                        "excess_per_seed": excess.tolist(), "slope_ci": fit["ci"],
                        "c1": [float(np.mean([c[0] for c in cs[w]])) for w in acfg.widths],
                        "c2": [float(np.mean([c[1] for c in cs[w]])) for w in acfg.widths],
                        "containment": contain, "control": control,
                        "negative_control": negative})
