"""Width sweeps of the toy MLM model that feed the Appendix A lemma checks.

One configuration (:class:`SweepConfig`, every reading a field) drives the sweeps. Each sweep is
cached per configuration with the neural-tangents calls that produced it
(:func:`ntk.recording.cached_with_calls`), and the pieces are cached separately so a
neural-tangents poison (:mod:`ntk.mutants`) recomputes only what used the poisoned function:

* :func:`exact_sweep` - for each width and seed: exact gradient descent on the exact expected MLM
  loss of the three-regime corpus from a common position initialisation, with the positions
  and logits recorded every ``record_every`` steps up to ``lemma_steps`` (the horizons of the
  robustness grid are read off this one trajectory), and the one-step displacement. No
  neural-tangents function is used.
* :func:`linearized_sweep` - the same runs on neural-tangents' ``linearize`` of the model.
* :func:`theta_sweep` - the positional NTK ``Theta_p`` at initialisation (``empirical_ntk_fn``).
* :func:`sufficiency_sweep` - mean positional gradients at initialisation on corpora with equal
  per-position marginals (Lemma 2).

Fields declared with ``compare=False`` (the width window, the horizon, the seed subset, the
position shuffle of the regressions) are analysis settings: they select from a sweep without
changing it, so the sweep's cache ignores them.

Reference: G. Cirrincione, arXiv 2604.05217, Appendix A (our reconstruction of the lemmas is
described in ``docs/interpretations.md``).
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

__all__ = ["SweepConfig", "corpus", "exact_sweep", "linearized_sweep", "theta_sweep",
           "sufficiency_sweep", "positional_ntk_toy", "infinite_width_kappa", "step_size"]


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """Sweep settings of every check. Every field is recorded in the results JSON.

    Attributes:
      widths / seeds: the width sweep of the lemmas (L1, L3-L5).
      num_positions, vocab_size, mixing, corpus_alpha, corpus_seed: the three-regime corpus
        (``posjax.data.synthetic.three_regime_corpus``).
      activation, pe_init_std, attention_scaling, parameterization: toy model choices
        (:class:`ntk.toy.ToyConfig`); ``parameterization="mean_field"`` is a premise breaker of
        the lazy-regime lemmas.
      lr, lemma_steps, record_every: gradient-descent step size, the length of the recorded
        trajectory and its snapshot interval.
      mean_field_lr: step size per unit width of the mean-field toy (``lr = mean_field_lr * d``;
        equal to ``lr`` at ``d = 40``).
      horizon_steps: the lemma horizon ``t = lr * horizon_steps`` read off the trajectory.
      window_top: the largest width of the 3-width window the slopes are fitted on (default
        the largest swept width).
      seed_subset: the seeds (a subset of ``seeds``) the statistics use (default all).
      shuffle_positions: regress displacements on row-permuted ``P`` (a premise breaker).
      slope_bootstrap: seed-bootstrap resamples of the slope CIs.
      window_grid: the other window tops of the robustness grid (``--quick``: shifted down
        within the same sweep; ``--full``: shifted up).
      sufficiency_widths, sufficiency_sequences, sufficiency_seed, sufficiency_resamples: Lemma 2
        (attention toy; the noise floor uses that many resampled corpora);
        ``sufficiency_reversed`` scores the reversed-marginals corpus (the premise breaker).
      theorem1_*: infinite-width kernel regression of Theorem 1 (sequence length, vocabulary,
        train / test sizes, ridge; ``theorem1_pe``: neural-tangents' positional embedding of
        the tested network, ``"NONE"``, or ``"SUM"`` - a positional signal, the premise
        breaker).
      theorem4_*: tied-position MLM of Theorem 4 (width, samples per position, GD steps, seeds;
        ``theorem4_shared_P``: one ``P`` for every position, the premise breaker).
      conjecture: the conjecture's settings (:class:`ntk.conjecture.ConjectureConfig`).
      attention: the attention-model lemma checks (:class:`ntk.attention_lemmas.AttentionLemmaConfig`).
    """

    widths: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048, 4096)
    seeds: tuple[int, ...] = (0, 1, 2)
    num_positions: int = 16
    vocab_size: int = 50
    mixing: str = "linear"
    corpus_alpha: float = 0.1
    corpus_seed: int = 0
    activation: str = "gelu"
    pe_init_std: float = 0.0
    attention_scaling: str = "linear"
    parameterization: str = "ntk"
    lr: float = 0.2
    lemma_steps: int = 100
    record_every: int = 25
    mean_field_lr: float = 0.005
    # Analysis settings (select from a sweep; not part of its cache key).
    horizon_steps: int = dataclasses.field(default=50, compare=False)
    window_top: int | None = dataclasses.field(default=None, compare=False)
    seed_subset: tuple[int, ...] | None = dataclasses.field(default=None, compare=False)
    shuffle_positions: bool = dataclasses.field(default=False, compare=False)
    slope_bootstrap: int = dataclasses.field(default=2000, compare=False)
    window_grid: tuple[int, ...] = dataclasses.field(default=(2048, 1024), compare=False)
    sufficiency_widths: tuple[int, ...] = (64, 128, 256, 512)
    sufficiency_sequences: int = 1024
    sufficiency_seed: int = 1
    sufficiency_resamples: int = 2
    sufficiency_reversed: bool = dataclasses.field(default=False, compare=False)
    theorem1_length: int = 4
    theorem1_vocab: int = 4
    theorem1_train: int = 256
    theorem1_test: int = 512
    theorem1_ridge: float = 0.1
    theorem1_pe: str = "NONE"
    theorem4_width: int = 256
    theorem4_samples: int = 200
    theorem4_steps: int = 100
    theorem4_seeds: tuple[int, ...] = (0, 1, 2)
    theorem4_shared_P: bool = False
    conjecture: ConjectureConfig = ConjectureConfig()
    attention: AttentionLemmaConfig = AttentionLemmaConfig()

    def __post_init__(self):
        if not self.widths or not self.seeds:
            raise ValueError("SweepConfig needs at least one width and one seed")
        if len(self.widths) < 2 or list(self.widths) != sorted(set(self.widths)):
            raise ValueError(f"widths must be >= 2 increasing values, got {self.widths}")
        if self.lemma_steps <= 0 or self.lr <= 0:
            raise ValueError("lemma_steps and lr must be positive")
        if self.record_every <= 0 or self.lemma_steps % self.record_every:
            raise ValueError(f"record_every={self.record_every} must divide "
                             f"lemma_steps={self.lemma_steps}")
        if (self.horizon_steps <= 0 or self.horizon_steps > self.lemma_steps
                or self.horizon_steps % self.record_every):
            raise ValueError(f"horizon_steps={self.horizon_steps} must be a multiple of "
                             f"record_every={self.record_every} within lemma_steps="
                             f"{self.lemma_steps}")
        if self.seed_subset is not None and (not self.seed_subset
                                             or not set(self.seed_subset) <= set(self.seeds)):
            raise ValueError(f"seed_subset {self.seed_subset} must be a non-empty subset of "
                             f"seeds {self.seeds}")
        if self.parameterization not in ("ntk", "mean_field"):
            raise ValueError(f"parameterization must be 'ntk' or 'mean_field', got "
                             f"{self.parameterization!r}")
        if self.sufficiency_sequences % 64:
            raise ValueError("sufficiency_sequences must be a multiple of 64")

    def toy(self, width: int, variant: str = "mlp", parameterization: str | None = None
            ) -> toy.ToyConfig:
        return toy.ToyConfig(num_positions=self.num_positions, vocab_size=self.vocab_size,
                             width=width, variant=variant, activation=self.activation,
                             pe_init_std=self.pe_init_std,
                             attention_scaling=self.attention_scaling,
                             parameterization=parameterization or self.parameterization)

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


def step_size(cfg: SweepConfig, width: int) -> float:
    """The gradient-descent step: ``lr``, or ``mean_field_lr * width`` for the mean-field toy
    (it then moves the function at the speed of the NTK-parameterised toy while its features
    keep moving ``O(1)`` at every width: the lazy premise fails)."""
    return cfg.mean_field_lr * width if cfg.parameterization == "mean_field" else cfg.lr


def _trajectory(cfg: SweepConfig, width: int, seed: int, *, linearized: bool) -> dict:
    tcfg = cfg.toy(width)
    p0 = toy.init_params(jax.random.PRNGKey(seed), tcfg)
    run = dynamics.train_mlp_toy(p0, tcfg, corpus(cfg), steps=cfg.lemma_steps,
                                 lr=step_size(cfg, width), linearized=linearized,
                                 record_every=cfg.record_every)
    start = np.asarray(p0["P"], np.float64)
    return {"delta_p": np.asarray(run["snapshots"], np.float64) - start[None],
            "logits": np.asarray(run["logit_snapshots"], np.float64)}


@cached_with_calls(maxsize=4)
def exact_sweep(cfg: SweepConfig) -> dict[int, list[dict]]:
    """Exact gradient descent of the context-free toy per width and seed (no neural-tangents).

    Returns:
      ``{width: [per-seed dict]}`` with ``delta_p [K, n, d]`` (displacement after every
      ``record_every`` steps, ``K = lemma_steps / record_every``), ``logits [K, n, V]``,
      ``logits0 [n, V]`` (at initialisation) and ``delta_p_step [n, d]`` (one GD step).
    """
    P = corpus(cfg)
    out: dict[int, list[dict]] = {}
    for width in cfg.widths:
        tcfg = cfg.toy(width)
        runs = []
        for seed in cfg.seeds:
            p0 = toy.init_params(jax.random.PRNGKey(seed), tcfg)
            one = dynamics.train_mlp_toy(p0, tcfg, P, steps=1, lr=step_size(cfg, width))
            runs.append({**_trajectory(cfg, width, seed, linearized=False),
                         "logits0": np.asarray(toy.logits(p0, None, tcfg), np.float64),
                         "delta_p_step": np.asarray(one["params"]["P"], np.float64)
                         - np.asarray(p0["P"], np.float64)})
        out[width] = runs
    return out


@cached_with_calls(maxsize=4)
def linearized_sweep(cfg: SweepConfig) -> dict[int, list[dict]]:
    """The runs of :func:`exact_sweep` on neural-tangents' ``linearize`` of the toy (the lazy
    dynamics, Lee et al., arXiv 1902.06720): ``{width: [{"delta_p", "logits"}]}``."""
    return {width: [_trajectory(cfg, width, seed, linearized=True) for seed in cfg.seeds]
            for width in cfg.widths}


@cached_with_calls(maxsize=4)
def theta_sweep(cfg: SweepConfig) -> dict[int, list[np.ndarray]]:
    """``Theta_p [V, V]`` at initialisation per width and seed (``nt.empirical_ntk_fn``)."""
    out = {}
    for width in cfg.widths:
        tcfg = cfg.toy(width)
        out[width] = [positional_ntk_toy(toy.init_params(jax.random.PRNGKey(seed), tcfg), tcfg)
                      for seed in cfg.seeds]
    return out


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
