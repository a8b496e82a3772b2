"""Width sweeps of the toy MLM model that feed the Appendix A lemma checks.

One configuration (:class:`SweepConfig`, every reading a field) drives the sweeps, each cached
per configuration with the neural-tangents calls that produced it
(:func:`ntk.recording.cached_with_calls`), so the checks share them:

* :func:`training_sweep` - for each width and seed: exact gradient descent on the exact expected
  MLM loss of the three-regime corpus from a common position initialisation to the lemma horizon,
  the same run on neural-tangents' ``linearize`` of the model (the lazy dynamics), the one-step
  displacement, and the positional NTK ``Theta_p`` at initialisation (``empirical_ntk_fn``).
* :func:`mean_field_sweep` - exact vs linearised runs of the mean-field parameterised toy (the
  negative control of Lemma 1: not lazy at any width).
* :func:`sufficiency_sweep` - mean positional gradients at initialisation on corpora with equal
  per-position marginals (Lemma 2).

Reference: G. Cirrincione, arXiv 2604.05217, Appendix A (our reconstruction of the lemmas is
described in ``docs/ntk.md``).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ntk import dynamics, toy
from ntk.attention_lemmas import AttentionLemmaConfig
from ntk.conjecture import ConjectureConfig
from ntk.recording import cached_with_calls, neural_tangents

__all__ = ["SweepConfig", "corpus", "training_sweep", "mean_field_sweep", "sufficiency_sweep",
           "positional_ntk_toy", "infinite_width_kappa"]


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """Sweep settings of every check. Every field is recorded in the results JSON.

    Attributes:
      widths / seeds: the width sweep of the lemmas (L1, L3-L5).
      num_positions, vocab_size, mixing, corpus_alpha, corpus_seed: the three-regime corpus
        (``posjax.data.synthetic.three_regime_corpus``).
      activation, pe_init_std, attention_scaling: toy model choices (:class:`ntk.toy.ToyConfig`).
      lr, lemma_steps: gradient-descent step size and the lazy-regime horizon ``t = lr * steps``.
      mean_field_lr: step size per unit width of the mean-field toy (``lr = mean_field_lr * d``,
        Lemma 1's negative control; equal to ``lr`` at ``d = 40``).
      bottleneck_width: width below ``V - 1`` of Lemma 4's negative control.
      sufficiency_widths, sufficiency_sequences, sufficiency_seed, sufficiency_resamples: Lemma 2
        (attention toy; the noise floor uses that many resampled corpora).
      theorem1_*: infinite-width kernel regression of Theorem 1 (sequence length, vocabulary,
        train / test sizes, ridge).
      theorem4_*: tied-position MLM of Theorem 4 (width, samples per position, GD steps).
      conjecture: the conjecture's settings (:class:`ntk.conjecture.ConjectureConfig`).
      attention: the attention-model lemma checks (:class:`ntk.attention_lemmas.AttentionLemmaConfig`).
    """

    widths: tuple[int, ...] = (64, 128, 256, 512, 1024)
    seeds: tuple[int, ...] = (0, 1, 2)
    num_positions: int = 16
    vocab_size: int = 50
    mixing: str = "linear"
    corpus_alpha: float = 0.1
    corpus_seed: int = 0
    activation: str = "gelu"
    pe_init_std: float = 0.0
    attention_scaling: str = "linear"
    lr: float = 0.2
    lemma_steps: int = 50
    mean_field_lr: float = 0.005
    bottleneck_width: int = 16
    sufficiency_widths: tuple[int, ...] = (64, 128, 256, 512)
    sufficiency_sequences: int = 1024
    sufficiency_seed: int = 1
    sufficiency_resamples: int = 2
    theorem1_length: int = 4
    theorem1_vocab: int = 4
    theorem1_train: int = 256
    theorem1_test: int = 512
    theorem1_ridge: float = 0.1
    theorem4_width: int = 256
    theorem4_samples: int = 200
    theorem4_steps: int = 100
    theorem4_seeds: tuple[int, ...] = (0, 1, 2)
    conjecture: ConjectureConfig = ConjectureConfig()
    attention: AttentionLemmaConfig = AttentionLemmaConfig()

    def __post_init__(self):
        if not self.widths or not self.seeds:
            raise ValueError("SweepConfig needs at least one width and one seed")
        if len(self.widths) < 2 or list(self.widths) != sorted(set(self.widths)):
            raise ValueError(f"widths must be >= 2 increasing values, got {self.widths}")
        if self.lemma_steps <= 0 or self.lr <= 0:
            raise ValueError("lemma_steps and lr must be positive")
        if self.sufficiency_sequences % 64:
            raise ValueError("sufficiency_sequences must be a multiple of 64")
        if self.bottleneck_width >= self.vocab_size - 1:
            raise ValueError("bottleneck_width must be below vocab_size - 1")

    def toy(self, width: int, variant: str = "mlp", parameterization: str = "ntk"
            ) -> toy.ToyConfig:
        return toy.ToyConfig(num_positions=self.num_positions, vocab_size=self.vocab_size,
                             width=width, variant=variant, activation=self.activation,
                             pe_init_std=self.pe_init_std,
                             attention_scaling=self.attention_scaling,
                             parameterization=parameterization)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def corpus(cfg: SweepConfig) -> np.ndarray:
    """Exact positional distributions ``P [n, V]`` (float64) of the three-regime corpus."""
    from posjax.data.synthetic import three_regime_corpus
    return three_regime_corpus(cfg.num_positions, cfg.vocab_size, mixing=cfg.mixing,
                               alpha=cfg.corpus_alpha, seed=cfg.corpus_seed).P


def positional_ntk_toy(params: dict, tcfg: toy.ToyConfig) -> np.ndarray:
    """``Theta_p [V, V]`` of the context-free toy at one position, via ``empirical_ntk_fn``.

    With a common position initialisation every position has the same block
    ``J_p J_p^T`` (``J_p = d z_i / d p_i``, ``[V, d]``); it is computed for position 0 with the
    other parameters closed over.
    """
    nt = neural_tangents()
    rest = {k: v for k, v in params.items() if k != "P"}

    def apply_fn(p_row, x):
        del x
        full = {**rest, "P": params["P"].at[0].set(p_row[0])}
        return toy.logits(full, None, tcfg)[0][None]          # [1, V]
    fn = nt.empirical_ntk_fn(apply_fn, trace_axes=(), vmap_axes=None,
                             implementation=nt.NtkImplementation.JACOBIAN_CONTRACTION)
    theta = fn(jnp.zeros((1, 1)), None, params["P"][:1])       # [1, 1, V, V]
    return np.asarray(theta, np.float64)[0, 0]


def infinite_width_kappa(cfg: SweepConfig) -> float:
    """Infinite-width ``Theta_p = kappa I_V`` of the toy from neural-tangents ``stax``.

    For ``z = W2^T phi(W1^T h / sqrt(d)) / sqrt(d)`` the input-gradient kernel tends to
    ``E[phi'(u)^2] I_V`` with ``u ~ N(0, |h|^2 / d)`` and ``|h|^2 / d -> 1`` (``h = E[MASK]``,
    ``N(0, 1)`` entries). ``stax`` gives ``E[phi'^2]`` as the derivative term of its NTK
    recursion: for ``Dense(W_std=1, b_std=0) -> phi -> Dense(W_std=1, b_std=0)`` on a unit
    input, ``ntk - nngp = E[phi'(u)^2] K0`` with ``K0 = 1``.
    """
    stax = neural_tangents().stax
    layer = {"gelu": "Gelu", "relu": "Relu", "erf": "Erf"}.get(cfg.activation)
    if layer is None:
        raise ValueError(f"no stax counterpart for activation {cfg.activation!r}")
    _, _, kernel_fn = stax.serial(stax.Dense(1, W_std=1.0, b_std=0.0), getattr(stax, layer)(),
                                  stax.Dense(1, W_std=1.0, b_std=0.0))
    with jax.enable_x64(True):
        x = jnp.ones((1, 4), jnp.float64)
        k = kernel_fn(x, None, ("nngp", "ntk"))
        return float(k.ntk[0, 0] - k.nngp[0, 0])


def _runs(tcfg, P, seed, steps, lr):
    p0 = toy.init_params(jax.random.PRNGKey(seed), tcfg)
    start = np.asarray(p0["P"], np.float64)
    exact = dynamics.train_mlp_toy(p0, tcfg, P, steps=steps, lr=lr)
    lin = dynamics.train_mlp_toy(p0, tcfg, P, steps=steps, lr=lr, linearized=True)
    dp = np.asarray(exact["params"]["P"], np.float64) - start
    dp_lin = np.asarray(lin["params"]["P"], np.float64) - start
    return p0, start, dp, dp_lin


@cached_with_calls(maxsize=2)
def training_sweep(cfg: SweepConfig) -> dict[int, list[dict]]:
    """Exact and linearised training of the context-free toy per width and seed.

    Returns:
      ``{width: [per-seed dict]}`` with ``delta_p`` ``[n, d]`` (exact, lemma horizon),
      ``delta_p_lin`` (trained on ``nt.linearize``), ``lazy_error``
      (``||dp - dp_lin|| / ||dp||``), ``delta_p_step`` (one GD step) and ``theta_p``
      ``[V, V]`` (``nt.empirical_ntk_fn`` at initialisation).
    """
    P = corpus(cfg)
    out: dict[int, list[dict]] = {}
    for width in cfg.widths:
        tcfg = cfg.toy(width)
        runs = []
        for seed in cfg.seeds:
            p0, start, dp, dp_lin = _runs(tcfg, P, seed, cfg.lemma_steps, cfg.lr)
            one = dynamics.train_mlp_toy(p0, tcfg, P, steps=1, lr=cfg.lr)
            runs.append({
                "delta_p": dp, "delta_p_lin": dp_lin,
                "lazy_error": float(np.linalg.norm(dp - dp_lin) / np.linalg.norm(dp)),
                "delta_p_step": np.asarray(one["params"]["P"], np.float64) - start,
                "theta_p": positional_ntk_toy(p0, tcfg)})
        out[width] = runs
    return out


@cached_with_calls(maxsize=2)
def mean_field_sweep(cfg: SweepConfig) -> list[float]:
    """Seed-mean linearisation error per width of the mean-field toy (step ``mean_field_lr * d``).

    Mean-field scaling (readout ``/ d``) with the step size scaled by ``d`` moves the function
    at the speed of the NTK-parameterised toy while its features move ``O(1)``: the lazy
    premise of Lemma 1 fails, so the error should not shrink with width.
    """
    P = corpus(cfg)
    errs = []
    for width in cfg.widths:
        tcfg = cfg.toy(width, parameterization="mean_field")
        e = []
        for seed in cfg.seeds:
            _, _, dp, dp_lin = _runs(tcfg, P, seed, cfg.lemma_steps, cfg.mean_field_lr * width)
            e.append(float(np.linalg.norm(dp - dp_lin) / np.linalg.norm(dp)))
        errs.append(float(np.mean(e)))
    return errs


def _rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@cached_with_calls(maxsize=2)
def sufficiency_sweep(cfg: SweepConfig) -> dict[str, Any]:
    """Mean positional gradients at initialisation on corpora with equal marginals.

    Corpus A is comonotone (``t_i = F_i^{-1}(U)``, one ``U`` per sequence); corpora B_r are
    independent column shuffles of A (identical per-position empirical marginals, independent
    joint). Every corpus is scored with one-hot targets (the observed masked token), so A and
    B differ only in their joint structure. The noise floor is the spread between resampled
    shuffles B_r. Negative control: a corpus whose marginals differ (positions reversed).

    Returns:
      dict with per-width lists ``gap`` (``||g_A - g_B|| / ||g_B||``, attention toy),
      ``noise`` (max over resamples of ``||g_Br - g_B1|| / ||g_B1||``), and at the largest
      width ``control_gap`` / ``control_noise`` (context-free readout, ``W_v = 0``: the
      masked slot sees no context, so the lemma holds exactly) and ``negative_gap`` (A vs
      a corpus with reversed marginals).
    """
    P = corpus(cfg)
    M = cfg.sufficiency_sequences
    A = dynamics.comonotone_corpus(P, M, seed=cfg.sufficiency_seed)
    Bs = [dynamics.shuffle_columns(A, seed=cfg.sufficiency_seed + 1 + r)
          for r in range(cfg.sufficiency_resamples)]
    onehot = np.eye(cfg.vocab_size, dtype=np.float32)
    res: dict[str, Any] = {"widths": list(cfg.sufficiency_widths), "gap": [], "noise": []}

    def grads(p0, tcfg, corpora):
        return [dynamics.positional_gradient(p0, toks, onehot[toks], tcfg) for toks in corpora]
    for width in cfg.sufficiency_widths:
        tcfg = cfg.toy(width, "attention")
        p0 = toy.init_params(jax.random.PRNGKey(0), tcfg)
        g = grads(p0, tcfg, [A] + Bs)
        res["gap"].append(_rel(g[0], g[1]))
        res["noise"].append(max(_rel(gb, g[1]) for gb in g[2:]))
    ctl = {**p0, "Wv": jnp.zeros_like(p0["Wv"])}
    gc = grads(ctl, tcfg, [A] + Bs)
    res["control_gap"] = _rel(gc[0], gc[1])
    res["control_noise"] = max(_rel(gb, gc[1]) for gb in gc[2:])
    reversed_marginals = dynamics.shuffle_columns(A[:, ::-1].copy(), seed=cfg.sufficiency_seed)
    gn = grads(ctl, tcfg, [reversed_marginals])
    res["negative_gap"] = _rel(gn[0], gc[1])
    return res
