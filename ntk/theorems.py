"""Numerical tests of Theorems 1 and 4 of arXiv 2604.05217 (G. Cirrincione, "On the Geometry of
Positional Encodings in Transformers"), with neural-tangents.

* Theorem 1 (necessity): without a positional signal a Transformer cannot fit an order-sensitive
  target. Tested in the infinite-width limit: kernel regression (``nt.predict``) with the
  analytic NTK of ``Dense -> GlobalSelfAttention -> Relu -> mean pool -> Dense`` (``stax``) on
  ``y = sign(x_0 - x_{T-1})`` over random sequences (the data set is *not* closed under
  permutation, so nothing is settled by symmetry of the data). Without a positional embedding
  the predictor is a function of the bag of tokens: its predictions are unchanged by permuting
  the test inputs and its held-out accuracy cannot exceed the Bayes accuracy of a bag-of-tokens
  classifier, computed exactly (for i.i.d. uniform tokens it is 1/2: the bag says nothing
  about which of two slots holds the larger token). With neural-tangents' ``SUM`` positional
  embedding (i.i.d. Gaussian, fed to keys, queries and values) it can.
* Theorem 4 (positional separation): training separates positions whose distributions differ.
  Tested as MLM from tied positions (all ``p_i(0) = 0``) by exact gradient descent on the
  finite-width toy: the model's separation ratio (distinct pairs vs tied pairs) is compared
  with the data's own ratio (the same statistic on the sampled distributions), so sampling
  noise that the data themselves carry is not credited to or blamed on training.

Both are guards in the sense of :mod:`ntk.mutants`: Theorem 1's statistic is a symmetry (a
permutation-invariant predictor cannot beat the bag-of-tokens bound, which is exactly 1/2 here),
and Theorem 4 has no theory side computed by neural-tangents.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ntk import dynamics, toy
from ntk import lemma_statistics as lstats
from ntk.attention import infinite_attention_kernel
from ntk.recording import neural_tangents
from ntk.result import CheckResult, fmt, outcome
from posjax.models import Transformer, TransformerConfig

__all__ = ["order_sequences", "bag_bayes_probability", "kernel_regression",
           "encoder_fn", "theorem1_necessity", "theorem4_separation"]

Z95 = 1.959963984540054


def order_sequences(num: int, length: int, vocab_size: int, *, seed: int):
    """Random sequences with ``x_0 != x_{T-1}`` and labels ``y = sign(x_0 - x_{T-1})``.

    Returns:
      ``(tokens [num, T] int, y [num] float in {-1, +1})``.
    """
    if length < 2 or vocab_size < 2:
        raise ValueError("order_sequences needs length >= 2 and vocab_size >= 2")
    rng = np.random.default_rng(seed)
    x = rng.integers(0, vocab_size, size=(num, length))
    same = x[:, 0] == x[:, -1]
    x[same, -1] = (x[same, 0] + 1 + rng.integers(0, vocab_size - 1, same.sum())) % vocab_size
    return x, np.sign(x[:, 0] - x[:, -1]).astype(np.float64)


def bag_bayes_probability(tokens) -> np.ndarray:
    """``Pr(x_0 > x_{T-1} | bag of tokens, x_0 != x_{T-1})`` for i.i.d. uniform sequences.

    Given the multiset, every ordering is equally likely, so ``(x_0, x_{T-1})`` is a uniformly
    random ordered pair of distinct slots; conditioning on different values gives
    ``#{(a, b): v_a > v_b} / #{(a, b): v_a != v_b}``. The Bayes accuracy of any
    bag-of-tokens classifier is ``E[max(p, 1 - p)]``.
    """
    x = np.asarray(tokens)
    greater = (x[:, :, None] > x[:, None, :]).sum((1, 2))
    differ = (x[:, :, None] != x[:, None, :]).sum((1, 2))
    return greater / differ


def kernel_regression(k_train_train, y_train, k_test_train, ridge: float):
    """Infinite-time mean prediction of an infinitely wide network trained by gradient flow on
    MSE (``nt.predict.gradient_descent_mse``, ``t = None``), zero initial function."""
    nt = neural_tangents()
    predict_fn = nt.predict.gradient_descent_mse(k_train_train, y_train, diag_reg=ridge)
    return predict_fn(None, 0.0, 0.0, k_test_train)[1]


def _onehot(tokens, vocab_size):
    return jnp.asarray(np.eye(vocab_size)[tokens], jnp.float64)


def _accuracy_vs_bayes(pred, y, p_bag):
    """Mean and standard error of ``1[correct] - max(p, 1 - p)`` over the test set."""
    diff = (np.sign(pred) == y).astype(np.float64) - np.maximum(p_bag, 1.0 - p_bag)
    return float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(len(diff)))


def encoder_fn(config: TransformerConfig, *, seed: int):
    """``tokens [B, T] -> hidden [B, T, d]`` of a freshly initialised posjax Transformer."""
    model = Transformer(config, rngs=nnx.Rngs(seed))
    model.eval()
    graphdef, state = nnx.split(model)
    return jax.jit(lambda x: nnx.merge(graphdef, state)(x))


def _encoder_deviation(cfg, *, causal: bool, seed: int = 0) -> float:
    length, vocab = cfg.theorem1_length + 2, cfg.theorem1_vocab + 4
    conf = TransformerConfig(vocab_size=vocab, num_layers=2, d_model=32, num_heads=4, d_ff=64,
                             max_len=length, pe="none", causal=causal, activation="gelu")
    x, _ = order_sequences(32, length, vocab, seed=seed)
    rng = np.random.default_rng(seed)
    return lstats.permutation_deviation(encoder_fn(conf, seed=seed), x,
                                        [rng.permutation(length) for _ in range(5)])


def theorem1_necessity(cfg) -> CheckResult:
    """Theorem 1 in the infinite-width limit (see module docstring): a guard of the
    permutation symmetry and of the bag-of-tokens bound.

    Statistic: ``z = (acc - bayes_bag) / se`` of the NoPE attention kernel's held-out accuracy
    over the exact bag-of-tokens Bayes accuracy. Pass: ``z <= 1.96`` (not above the bag bound
    at 95 %) and predictions unchanged (<= 1e-6) when the test inputs are permuted.
    Control: a finite-width posjax bidirectional NoPE encoder commutes with permutations
    (max deviation <= 1e-5). Negative control: the same regression with ``SUM`` positional
    embeddings (a positional signal: the claim must fail, ``z > 1.96``). A causal-mask NoPE
    encoder is reported as the documented exception (the mask is a positional signal).
    """
    T, V = cfg.theorem1_length, cfg.theorem1_vocab
    xtr, ytr = order_sequences(cfg.theorem1_train, T, V, seed=0)
    xte, yte = order_sequences(cfg.theorem1_test, T, V, seed=1)
    perm = np.random.default_rng(2).permutation(T)
    p_bag = bag_bayes_probability(xte)
    bayes = float(np.maximum(p_bag, 1 - p_bag).mean())
    out = {}
    with jax.enable_x64(True):
        Xtr, Xte, Xpe = _onehot(xtr, V), _onehot(xte, V), _onehot(xte[:, perm], V)
        for pe in dict.fromkeys((cfg.theorem1_pe, "SUM")):
            kw = {"pos_emb_type": pe, "val_pos_emb": pe == "SUM", "get": ("ntk",)}
            ktt = infinite_attention_kernel(Xtr, **kw)["ntk"]
            k_test = infinite_attention_kernel(jnp.concatenate([Xte, Xpe]), Xtr, **kw)["ntk"]
            y = jnp.asarray(ytr[:, None])
            both = np.asarray(kernel_regression(ktt, y, k_test, cfg.theorem1_ridge))[:, 0]
            pred, pred_p = both[:len(xte)], both[len(xte):]
            excess, se = _accuracy_vs_bayes(pred, yte, p_bag)
            if se > 0:
                z = excess / se
            else:        # every test point right (or wrong): the excess is exact, z is +-inf
                z = math.copysign(math.inf, excess) if excess else 0.0
            out[pe] = {"accuracy": float(np.mean(np.sign(pred) == yte)), "excess": excess,
                       "se": se, "z": z,
                       "ci": [excess - Z95 * se, excess + Z95 * se],
                       "perm_deviation": float(np.max(np.abs(pred - pred_p)))}
    dev = _encoder_deviation(cfg, causal=False)
    dev_causal = _encoder_deviation(cfg, causal=True)
    none, summ = out[cfg.theorem1_pe], out["SUM"]
    ok = none["z"] <= Z95 and none["perm_deviation"] <= 1e-6
    control = outcome(dev, 1e-5, dev <= 1e-5, "finite-width posjax bidirectional NoPE encoder: "
                      "max |F(Pi x) - Pi F(x)|")
    negative = outcome(summ["z"], Z95, summ["z"] <= Z95,
                       "SUM positional embedding: z of accuracy over the bag bound")
    detail = (f"infinite-width attention NTK regression on y=sign(x0-x_last), T={T}, V={V}, "
              f"{cfg.theorem1_train} train / {cfg.theorem1_test} test (not permutation-closed); "
              f"bag Bayes acc {bayes:.3f}. NoPE: acc {none['accuracy']:.3f}, excess "
              f"{none['excess']:+.3f} (95% CI {fmt(none['ci'])}), z {none['z']:.2f} (<= 1.96), "
              f"permuted-input prediction change {none['perm_deviation']:.1e} (<= 1e-6). SUM PE: "
              f"acc {summ['accuracy']:.3f}, excess {summ['excess']:+.3f}, z {summ['z']:.2f} "
              f"(must exceed 1.96). Encoder equivariance dev {dev:.1e}; causal-mask NoPE dev "
              f"{dev_causal:.2f} (documented exception: the mask is positional)")
    return CheckResult("theorem1_necessity", bool(ok), none["z"], Z95, detail, {
        "bayes_bag_accuracy": bayes, "nope": none, "sum": summ,
        "encoder_equivariance_dev": dev, "causal_nope_dev": dev_causal,
        "control": control, "negative_control": negative,
        "config": {k: getattr(cfg, k) for k in ("theorem1_length", "theorem1_vocab",
                                                "theorem1_train", "theorem1_test",
                                                "theorem1_ridge")}})


def _tied_regime_corpus(n: int, vocab: int, *, identical: bool, seed: int = 0) -> np.ndarray:
    """Hard three-regime ``P [n, V]`` (positions of one regime share ``P``), or one ``P``."""
    from posjax.data.synthetic import three_regime_corpus
    P = three_regime_corpus(n, vocab, mixing="hard", alpha=0.3, seed=seed).P
    return np.repeat(P[:1], n, axis=0) if identical else P


def _ratio(X, regimes) -> dict:
    """Smallest distinct-regime distance over largest same-regime distance of the rows of X."""
    D = lstats.pairwise_distances(np.asarray(X, np.float64))
    iu = np.triu_indices(len(regimes), k=1)
    same = (regimes[:, None] == regimes[None, :])[iu]
    d = D[iu]
    return {"min_distinct": float(d[~same].min()), "max_tied": float(d[same].max()),
            "mean_distinct": float(d[~same].mean()),
            "ratio": float(d[~same].min() / max(d[same].max(), 1e-300))}


def _separation(cfg, P_true, *, seed: int, samples: int | None, regimes: np.ndarray) -> dict:
    """Train the tied toy exactly on the empirical ``P_hat`` (``samples`` per position, or
    exact ``P``); the model's ratio and the data's ratio (chord Hellinger rows of ``P_hat``)."""
    n, V = P_true.shape
    rng = np.random.default_rng(seed)
    if samples is None:
        P_hat = P_true
    else:
        counts = np.stack([rng.multinomial(samples, p) for p in P_true])
        P_hat = counts / samples
    tcfg = toy.ToyConfig(num_positions=n, vocab_size=V, width=cfg.theorem4_width,
                         activation=cfg.activation, pe_init_std=0.0)
    p0 = toy.init_params(jax.random.PRNGKey(seed), tcfg)
    run = dynamics.train_mlp_toy(p0, tcfg, P_hat, steps=cfg.theorem4_steps, lr=cfg.lr)
    model = _ratio(run["params"]["P"], regimes)
    data = _ratio(np.sqrt(P_hat), regimes)
    return {**model, "data_ratio": data["ratio"],
            "relative": model["ratio"] / max(data["ratio"], 1e-300)}


def theorem4_separation(cfg) -> CheckResult:
    """Theorem 4 as MLM from tied positions (see module docstring).

    Reading: the context-free toy (NTK parameterisation, all ``p_i(0) = 0``) trained by exact
    gradient descent on the empirical distributions of ``theorem4_samples`` sampled tokens per
    position of a hard three-regime corpus (positions of one regime share ``P_i``). Model ratio
    ``min_{P_i != P_j} |p_i - p_j| / max_{P_i = P_j} |p_i - p_j|``; data ratio the same on the
    rows ``sqrt(P_hat_i)`` (chord Hellinger). Statistic: the smallest over seeds of model ratio
    / data ratio. PASS when it exceeds 1 and the model ratio exceeds 1 on every seed (training
    keeps every differing pair farther apart than any tied pair, at least as clearly as the
    data do; a reading). Control: exact ``P`` - tied pairs stay exactly together. Negative
    control and premise breaker: one shared ``P`` for every position.
    """
    n, V = 9, 20
    regimes = np.repeat(np.arange(3), 3)
    P = _tied_regime_corpus(n, V, identical=cfg.theorem4_shared_P)
    P_flat = _tied_regime_corpus(n, V, identical=True)
    seeds = tuple(cfg.theorem4_seeds)
    runs = [_separation(cfg, P, seed=s, samples=cfg.theorem4_samples, regimes=regimes)
            for s in seeds]
    rel = [r["relative"] for r in runs]
    stat = min(rel)
    ok = stat > 1.0 and min(r["ratio"] for r in runs) > 1.0
    exact = _separation(cfg, _tied_regime_corpus(n, V, identical=False), seed=seeds[0],
                        samples=None, regimes=regimes)
    exact_stat = exact["max_tied"] / exact["mean_distinct"]
    flat = [_separation(cfg, P_flat, seed=s, samples=cfg.theorem4_samples, regimes=regimes)
            for s in seeds]
    flat_ok = min(r["relative"] for r in flat) > 1.0 and min(r["ratio"] for r in flat) > 1.0
    control = outcome(exact_stat, 1e-6, exact_stat <= 1e-6,
                      "exact P: max tied-pair distance / mean distinct-pair distance")
    negative = outcome(min(r["relative"] for r in flat), 1.0, flat_ok,
                       "one shared P for every position: model / data ratio (and the rule)")
    detail = (f"{len(seeds)} seeds, {n} positions in 3 regimes, V={V}, "
              f"{cfg.theorem4_samples} samples/position, width {cfg.theorem4_width}, "
              f"{cfg.theorem4_steps} exact GD steps from tied p=0: model ratio per seed "
              f"{fmt([r['ratio'] for r in runs])}, data ratio {fmt([r['data_ratio'] for r in runs])},"
              f" model / data {fmt(rel)} (> 1 on every seed, model ratio > 1); exact-P control "
              f"{exact_stat:.1e} (<= 1e-6); shared-P model / data "
              f"{fmt([r['relative'] for r in flat])} (must fail)")
    return CheckResult("theorem4_separation", bool(ok), stat, 1.0, detail, {
        "per_seed": runs, "seeds": list(seeds), "exact": exact, "shared_P": flat,
        "control": control, "negative_control": negative,
        "config": {"num_positions": n, "vocab_size": V, "samples": cfg.theorem4_samples,
                   "width": cfg.theorem4_width, "steps": cfg.theorem4_steps, "lr": cfg.lr,
                   "shared_P": cfg.theorem4_shared_P}})
