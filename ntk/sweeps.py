"""Width sweeps of the toy MLM model that feed the Appendix A lemma checks.

One configuration (:class:`SweepConfig`, every interpretation choice a field) drives two
sweeps, each cached per configuration so the checks share them:

* :func:`training_sweep` - for each width and seed: exact gradient descent on the exact
  expected MLM loss of the three-regime corpus from a common position initialisation, with
  position snapshots, plus the linearised (neural-tangents ``linearize``) run to the lemma
  horizon. Gives Delta p at the lemma horizon (L1, L3-L5) and the learned table at the
  conjecture's stopping point.
* :func:`sufficiency_sweep` - for each width: the mean positional gradient at initialisation of
  the attention toy on a comonotone corpus and on column-shuffled copies of it (same empirical
  marginals, independent joint), and the context-free control (L2).

Reference: G. Cirrincione, arXiv 2604.05217, Appendix A (reconstruction: docs/interpretations.md).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import numpy as np

from ntk import dynamics, toy

__all__ = ["SweepConfig", "corpus", "training_sweep", "sufficiency_sweep"]


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """Width-sweep settings. Every field is recorded in the results JSON.

    Attributes:
      widths / seeds: the sweep of the training lemmas (L1, L3-L5, conjecture).
      num_positions, vocab_size, mixing, corpus_alpha, corpus_seed: the three-regime corpus
        (``posjax.data.synthetic.three_regime_corpus``; ``"linear"`` mixing gives distinct
        ``P_i`` on a 2-dimensional affine span, so the L3 regression is not vacuous).
      activation, pe_init_std, attention_scaling: toy model choices (:class:`ntk.toy.ToyConfig`).
      lr: gradient-descent step size (training time ``t = lr * steps``).
      lemma_steps: horizon of the lazy-regime lemmas (default ``t = 10``).
      snapshot_every: position snapshot period (must divide lemma_steps and chunk_steps).
      chunk_steps: training runs in chunks of this many steps (must divide max_steps and be
        >= lemma_steps), stopping after the chunk where the conjecture's criterion is met.
      max_steps: longest training of the conjecture (``t = 600`` by default).
      excess_tol: the conjecture's "learned" table is the first snapshot whose excess loss
        ``L - sum_i H(P_i)`` is below ``excess_tol`` times its initial value.
      sufficiency_widths, sufficiency_sequences, sufficiency_seed: L2 sweep (attention toy).
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
    snapshot_every: int = 50
    chunk_steps: int = 250
    max_steps: int = 3000
    excess_tol: float = 0.01
    sufficiency_widths: tuple[int, ...] = (64, 128, 256, 512)
    sufficiency_sequences: int = 1024
    sufficiency_seed: int = 1

    def __post_init__(self):
        if not self.widths or not self.seeds:
            raise ValueError("SweepConfig needs at least one width and one seed")
        if len(self.widths) < 2 or list(self.widths) != sorted(set(self.widths)):
            raise ValueError(f"widths must be >= 2 increasing values, got {self.widths}")
        if self.lemma_steps % self.snapshot_every or self.chunk_steps % self.snapshot_every:
            raise ValueError("snapshot_every must divide lemma_steps and chunk_steps")
        if self.max_steps % self.chunk_steps:
            raise ValueError("chunk_steps must divide max_steps")
        if not 0 < self.lemma_steps <= self.chunk_steps:
            raise ValueError("need 0 < lemma_steps <= chunk_steps")
        if not 0 < self.excess_tol < 1:
            raise ValueError(f"excess_tol must be in (0, 1), got {self.excess_tol}")
        if self.sufficiency_sequences % 64:
            raise ValueError("sufficiency_sequences must be a multiple of 64")

    def toy(self, width: int, variant: str = "mlp") -> toy.ToyConfig:
        return toy.ToyConfig(num_positions=self.num_positions, vocab_size=self.vocab_size,
                             width=width, variant=variant, activation=self.activation,
                             pe_init_std=self.pe_init_std,
                             attention_scaling=self.attention_scaling)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=4)
def corpus(cfg: SweepConfig) -> np.ndarray:
    """Exact positional distributions ``P [n, V]`` (float64) of the three-regime corpus."""
    from posjax.data.synthetic import three_regime_corpus
    return three_regime_corpus(cfg.num_positions, cfg.vocab_size, mixing=cfg.mixing,
                               alpha=cfg.corpus_alpha, seed=cfg.corpus_seed).P


@functools.lru_cache(maxsize=2)
def training_sweep(cfg: SweepConfig) -> dict[int, list[dict]]:
    """Exact and linearised training of the context-free toy per width and seed.

    Returns:
      ``{width: [per-seed dict]}`` with ``delta_p`` ``[n, d]`` (exact, lemma horizon),
      ``delta_p_lin`` (linearised), ``lazy_error`` (``||dp - dp_lin|| / ||dp||``),
      ``learned`` (positions at the conjecture's stopping point), ``stop_step``,
      ``excess_ratio`` (excess loss there over the initial excess), ``snapshots``
      ``[S, n, d]`` and ``snapshot_steps`` up to the stopping point.
    """
    P = corpus(cfg)
    floor = float(-(P[P > 0] * np.log(P[P > 0])).sum())
    k_lemma = cfg.lemma_steps // cfg.snapshot_every - 1
    out: dict[int, list[dict]] = {}
    for width in cfg.widths:
        tcfg = cfg.toy(width)
        runs = []
        for seed in cfg.seeds:
            p0 = toy.init_params(jax.random.PRNGKey(seed), tcfg)
            snaps, snap_loss, initial, params = [], [], None, p0
            for _ in range(cfg.max_steps // cfg.chunk_steps):   # early stop, one compilation
                part = dynamics.train_mlp_toy(params, tcfg, P, steps=cfg.chunk_steps, lr=cfg.lr,
                                              record_every=cfg.snapshot_every)
                params = part["params"]
                initial = part["losses"][0] if initial is None else initial
                snaps.append(part["snapshots"])
                snap_loss.append(np.append(part["losses"][cfg.snapshot_every::cfg.snapshot_every],
                                           part["final_loss"]))
                if (snap_loss[-1][-1] - floor) <= cfg.excess_tol * (initial - floor):
                    break
            lin = dynamics.train_mlp_toy(p0, tcfg, P, steps=cfg.lemma_steps, lr=cfg.lr,
                                         linearized=True)
            start = np.asarray(p0["P"], np.float64)
            snaps = np.concatenate(snaps).astype(np.float64) - start
            dp = snaps[k_lemma]
            dp_lin = np.asarray(lin["params"]["P"], np.float64) - start
            excess = (np.concatenate(snap_loss) - floor) / (initial - floor)
            hit = np.flatnonzero(excess <= cfg.excess_tol)
            stop = int(hit[0]) if hit.size else len(snaps) - 1
            runs.append({
                "delta_p": dp, "delta_p_lin": dp_lin,
                "lazy_error": float(np.linalg.norm(dp - dp_lin) / np.linalg.norm(dp)),
                "learned": snaps[stop], "stop_step": (stop + 1) * cfg.snapshot_every,
                "stop_reached": bool(hit.size), "excess_ratio": float(excess[stop]),
                "snapshots": snaps[:stop + 1],
                "snapshot_steps": [(s + 1) * cfg.snapshot_every for s in range(stop + 1)],
            })
        out[width] = runs
    return out


def _rel(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@functools.lru_cache(maxsize=2)
def sufficiency_sweep(cfg: SweepConfig) -> dict[str, Any]:
    """Expected positional gradients at initialisation on corpora with equal marginals.

    Corpus A is comonotone (``t_i = F_i^{-1}(U)``, one ``U`` per sequence) with the exact
    conditional law of each masked token as target; corpora B1, B2 are independent column
    shuffles of A (identical per-position empirical marginals, independent joint) with target
    ``P_i`` (the conditional law under independence).

    Returns:
      dict with per-width lists ``gap`` (``||g_A - g_B1|| / ||g_B1||``), ``noise``
      (``||g_B2 - g_B1|| / ||g_B1||``) and, at the largest width, ``gap_self`` (the same gap
      through the masked slot only, keys/values detached) and the context-free ``control_gap``
      (MLP variant, one-hot targets: exactly 0 up to float error).
    """
    P = corpus(cfg)
    M = cfg.sufficiency_sequences
    A = dynamics.comonotone_corpus(P, M, seed=cfg.sufficiency_seed)
    tA = dynamics.comonotone_targets(P, A)
    B1 = dynamics.shuffle_columns(A, seed=cfg.sufficiency_seed + 1)
    B2 = dynamics.shuffle_columns(A, seed=cfg.sufficiency_seed + 2)
    tB = np.broadcast_to(P[None], tA.shape)
    res: dict[str, Any] = {"widths": list(cfg.sufficiency_widths), "gap": [], "noise": []}
    for width in cfg.sufficiency_widths:
        tcfg = cfg.toy(width, "attention")
        p0 = toy.init_params(jax.random.PRNGKey(0), tcfg)
        g = [dynamics.positional_gradient(p0, toks, tgt, tcfg)
             for toks, tgt in ((A, tA), (B1, tB), (B2, tB))]
        res["gap"].append(_rel(g[0], g[1]))
        res["noise"].append(_rel(g[2], g[1]))
    # At the largest width only: the masked-slot path alone, and the context-free control.
    gs = [dynamics.positional_gradient(p0, toks, tgt, tcfg, detach_context=True)
          for toks, tgt in ((A, tA), (B1, tB))]
    res["gap_self"] = _rel(gs[0], gs[1])
    mcfg = cfg.toy(cfg.sufficiency_widths[-1], "mlp")
    m0 = toy.init_params(jax.random.PRNGKey(0), mcfg)
    onehot = np.eye(cfg.vocab_size)
    gm = [dynamics.positional_gradient(m0, toks, onehot[toks], mcfg) for toks in (A, B1)]
    res["control_gap"] = _rel(gm[0], gm[1])
    return res
