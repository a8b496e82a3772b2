"""The Monotonicity Conjecture of arXiv 2604.05217 (G. Cirrincione), tested as the paper frames
it: a positional encoding whose geometry is better aligned with the Hellinger geometry of the
positional distributions gives a lower loss.

Protocol (every choice a :class:`ntk.sweeps.SweepConfig` field):

1. Corpora: three-regime corpora with exact ``P [n, V]`` (``conj_corpora`` seeds).
2. Frozen PE tables ``[n, k]`` with controlled Hellinger stress: the Hellinger-MDS table
   (``posjax.geometry.classical_mds`` of ``hellinger_matrix``), Gaussian perturbations of it of
   growing size, Euclidean-MDS and log-ratio (clr) MDS tables and perturbations of them, the
   sinusoidal table and random Gaussian tables. Every table is centred and scaled to unit RMS
   row norm (norms matched) in ``k`` dimensions.
3. The rest of the model is solved in the infinite-width NTK limit: kernel regression
   (``nt.predict.gradient_descent_mse``, ``t = inf``) with the analytic NTK (``stax``) of an
   MLP reading each position's PE row, trained on the empirical token distribution of
   ``conj_samples`` sampled tokens per position (``conj_seeds`` resamples). Loss: the exact
   held-out MLM squared loss ``E_{w ~ P_i} |y_hat_i - e_w|^2`` averaged over positions.
4. Statistic: Spearman(Hellinger optimal-scale stress, held-out loss) over the tables, one per
   (corpus, seed); mean and bootstrap 95 % CI over the (corpus, seed) units. The same with
   Euclidean and log-ratio stress; finite-width losses from ``nt.monte_carlo_kernel_fn`` vs
   the infinite-width value.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import spearmanr

from ntk import lemma_statistics as lstats
from ntk.recording import cached_with_calls, neural_tangents
from ntk.result import CheckResult, fmt, outcome

__all__ = ["ConjectureConfig", "conjecture_tables", "heldout_losses", "conjecture_sweep", "monotonicity_conjecture",
           "bootstrap_ci"]

W_STD, B_STD = 1.0, 0.5


@dataclasses.dataclass(frozen=True)
class ConjectureConfig:
    """Settings of the conjecture check (``SweepConfig.conjecture``; recorded in results).

    Attributes:
      tables, dim: number of frozen PE tables per corpus and their dimension.
      positions, vocab, alpha: the corpora (positions, vocabulary, Dirichlet concentration).
      samples: training tokens sampled per position; ridge: kernel-regression ridge.
      seeds / corpora: resampling seeds and corpus seeds.
      widths, mc_samples: finite widths of the Monte Carlo NTK and samples per kernel.
      bootstrap: bootstrap resamples of the CIs.
    """

    tables: int = 24
    dim: int = 8
    positions: int = 24
    vocab: int = 30
    alpha: float = 0.1
    samples: int = 4
    ridge: float = 1e-2
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    corpora: tuple[int, ...] = (0, 1)
    widths: tuple[int, ...] = (64, 256, 1024)
    mc_samples: int = 2
    bootstrap: int = 2000

    def __post_init__(self):
        if self.tables < 20 or len(self.seeds) < 2 or len(self.corpora) < 1:
            raise ValueError("the conjecture needs >= 20 tables, >= 2 seeds and >= 1 corpus")
        if self.dim >= self.positions or self.dim % 2:
            raise ValueError("ConjectureConfig.dim must be even (sinusoidal table) and below "
                             "positions")


def _normalise(X) -> np.ndarray:
    X = np.asarray(X, np.float64)
    X = X - X.mean(axis=0)
    rms = np.sqrt(np.mean(np.sum(X * X, axis=1)))
    return X / rms if rms > 0 else X


def _mds(D, k: int) -> np.ndarray:
    import posjax.geometry as geo
    coords = np.asarray(geo.classical_mds(jnp.asarray(D, jnp.float32), dim=k).coords)
    out = np.zeros((coords.shape[0], k))
    out[:, :coords.shape[1]] = coords
    return out


def conjecture_tables(P, k: int, num_tables: int, *, seed: int = 0
                      ) -> tuple[list[str], np.ndarray]:
    """``num_tables`` frozen PE tables ``[T, n, k]`` (norms matched) and their labels.

    Families: ``hellinger_mds``; ``hellinger+noise(s)`` for a geometric grid of ``s``;
    ``euclidean_mds``, ``logratio_mds`` and one perturbation of each; ``sinusoidal``; and
    ``random`` Gaussian tables filling the rest.
    """
    from posjax.encodings.sinusoidal import sinusoidal
    P = np.asarray(P, np.float64)
    n = P.shape[0]
    rng = np.random.default_rng(seed)
    base = {"hellinger_mds": _mds(lstats.hellinger_chord(P), k),
            "euclidean_mds": _mds(lstats.pairwise_distances(P), k),
            "logratio_mds": _mds(lstats.clr_distances(P), k)}
    names, tables = [], []

    def add(name, X):
        names.append(name)
        tables.append(_normalise(X))
    add("hellinger_mds", base["hellinger_mds"])
    add("euclidean_mds", base["euclidean_mds"])
    add("logratio_mds", base["logratio_mds"])
    add("sinusoidal", np.asarray(sinusoidal(n, k)))
    for name in ("euclidean_mds", "logratio_mds"):
        add(f"{name}+noise(0.5)", _normalise(base[name]) + 0.5 * rng.normal(size=(n, k)) / np.sqrt(k))
    n_random = 3
    levels = np.geomspace(0.05, 3.0, max(num_tables - len(names) - n_random, 1))
    H = _normalise(base["hellinger_mds"])
    for s in levels:
        add(f"hellinger+noise({s:.3g})", H + s * rng.normal(size=(n, k)) / np.sqrt(k))
    while len(names) < num_tables:
        add(f"random({len(names)})", rng.normal(size=(n, k)))
    return names, np.stack(tables)


def _network(width: int):
    stax = neural_tangents().stax
    return stax.serial(stax.Dense(width, W_std=W_STD, b_std=B_STD), stax.Relu(),
                       stax.Dense(1, W_std=W_STD, b_std=B_STD))


def _block_kernels(K_all, T: int, n: int) -> jnp.ndarray:
    """Diagonal ``[n, n]`` blocks ``[T, n, n]`` of a kernel over ``T`` stacked tables."""
    K = K_all.reshape(T, n, T, n)
    return K[jnp.arange(T), :, jnp.arange(T), :]


def heldout_losses(kernels, P, P_hat, ridge: float) -> np.ndarray:
    """Held-out MLM squared loss of NTK kernel regression for each table and training sample.

    Args:
      kernels: ``[T, n, n]`` NTK between the positions' PE rows, one per table.
      P: ``[n, V]`` exact distributions (the held-out expectation).
      P_hat: ``[S, n, V]`` empirical training distributions (one per seed).
      ridge: ``diag_reg`` of ``nt.predict.gradient_descent_mse`` (relative to the kernel's
        mean diagonal).

    Returns:
      ``[T, S]`` losses ``mean_i (|y_hat_i - P_i|^2 + 1 - |P_i|^2)``, where ``y_hat`` starts from
      the mean training distribution and is trained to infinite time.
    """
    P = jnp.asarray(P)
    S, n, V = np.shape(P_hat)
    kernels = jnp.asarray(kernels)
    T = kernels.shape[0]
    # All tables in one solve: each kernel is divided by its mean diagonal (so an absolute
    # ridge equals neural-tangents' relative diag_reg per table) and the tables form the
    # blocks of one block-diagonal kernel; the seeds' targets are extra output columns.
    scale = jnp.mean(jnp.diagonal(kernels, axis1=1, axis2=2), axis=1)
    K = jax.scipy.linalg.block_diag(*(kernels / scale[:, None, None]))
    Y = jnp.tile(jnp.asarray(P_hat).transpose(1, 0, 2).reshape(n, S * V), (T, 1))
    mean = jnp.tile(Y[:n].mean(0, keepdims=True), (T * n, 1))
    nt = neural_tangents()
    predict_fn = nt.predict.gradient_descent_mse(K, Y, diag_reg=ridge,
                                                 diag_reg_absolute_scale=True)
    yhat = predict_fn(None, mean, mean, K)[1].reshape(T, n, S, V).transpose(0, 2, 1, 3)
    loss = jnp.mean(jnp.sum((yhat - P) ** 2, -1) + 1.0 - jnp.sum(P * P, -1), axis=-1)
    return np.asarray(loss, np.float64)                                       # [T, S]


def bootstrap_ci(values, *, num: int, seed: int = 0, level: float = 0.95) -> list[float]:
    """Percentile bootstrap CI of the mean of ``values`` (resampling the units)."""
    v = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(num, len(v)))].mean(axis=1)
    a = (1 - level) / 2
    return [float(np.quantile(means, a)), float(np.quantile(means, 1 - a))]


def _stresses(tables, D) -> np.ndarray:
    import posjax.geometry as geo
    Dj = jnp.asarray(D, jnp.float32)
    return np.array([float(geo.stress(Dj, coords=jnp.asarray(X, jnp.float32), scale="optimal"))
                     for X in tables])


def _corpus(cfg, seed: int) -> np.ndarray:
    from posjax.data.synthetic import three_regime_corpus
    return three_regime_corpus(cfg.conjecture.positions, cfg.conjecture.vocab, mixing="linear",
                               alpha=cfg.conjecture.alpha, seed=seed).P


@cached_with_calls(maxsize=2)
def conjecture_sweep(cfg) -> dict:
    """Tables, stresses and held-out losses per corpus and seed (see module docstring)."""
    n, k = cfg.conjecture.positions, cfg.conjecture.dim
    _, _, kernel_fn = _network(1)
    units, per_corpus = [], []
    for c in cfg.conjecture.corpora:
        P = _corpus(cfg, c)
        names, tables = conjecture_tables(P, k, cfg.conjecture.tables, seed=c)
        T = len(names)
        perm = np.random.default_rng(100 + c).permutation(n)
        H = lstats.hellinger_chord(P)
        stress = {"hellinger": _stresses(tables, H),
                  "euclidean": _stresses(tables, lstats.pairwise_distances(P)),
                  "logratio": _stresses(tables, lstats.clr_distances(P)),
                  "shuffled_hellinger": _stresses(tables, H[perm][:, perm])}
        x = jnp.asarray(tables.reshape(T * n, k), jnp.float32)
        K_inf = _block_kernels(kernel_fn(x, None, "ntk"), T, n)
        P_hat = []
        for s in cfg.conjecture.seeds:
            rng = np.random.default_rng(1000 * c + s)
            P_hat.append(np.stack([rng.multinomial(cfg.conjecture.samples, p) for p in P])
                         / cfg.conjecture.samples)
        loss = heldout_losses(K_inf, P, np.stack(P_hat), cfg.conjecture.ridge)       # [T, S]
        finite = {}
        nt = neural_tangents()
        for w in cfg.conjecture.widths:
            init_fn, apply_fn, _ = _network(w)
            mc = nt.monte_carlo_kernel_fn(init_fn, apply_fn, jax.random.PRNGKey(c),
                                          n_samples=cfg.conjecture.mc_samples,
                                          implementation=2, trace_axes=(-1,))
            K_w = _block_kernels(mc(x, None, "ntk"), T, n)
            finite[w] = heldout_losses(K_w, P, np.stack(P_hat), cfg.conjecture.ridge)
        per_corpus.append({"corpus_seed": c, "tables": names, "stress": stress,
                           "loss": loss, "finite_loss": finite})
        for j, s in enumerate(cfg.conjecture.seeds):
            units.append({"corpus": c, "seed": s, **{
                f"rho_{m}": float(spearmanr(stress[m], loss[:, j]).statistic)
                for m in stress}})
    return {"units": units, "per_corpus": per_corpus}


def _family_rho(per_corpus, cfg) -> list[float]:
    """Spearman over the Hellinger-MDS table and its perturbations only, per unit."""
    out = []
    for pc in per_corpus:
        idx = [i for i, name in enumerate(pc["tables"]) if name.startswith("hellinger")]
        for j in range(len(cfg.conjecture.seeds)):
            out.append(float(spearmanr(pc["stress"]["hellinger"][idx],
                                       pc["loss"][idx, j]).statistic))
    return out


def monotonicity_conjecture(cfg) -> CheckResult:
    """Monotonicity Conjecture: lower Hellinger stress of a frozen PE -> lower held-out loss.

    Statistic: mean over (corpus, seed) units of Spearman(Hellinger stress, held-out loss)
    across >= 20 tables. Verdict from its bootstrap 95 % CI: reproduced (pass) when the lower
    end is > 0; not reproduced when the upper end is < 0; inconclusive otherwise. Reported:
    the same for Euclidean and log-ratio stress and paired-bootstrap CIs of the differences
    (does Hellinger stress predict the loss better?), and ``mean |loss_w - loss_inf|`` over
    tables and seeds at finite widths (Monte Carlo NTK) with its log-log slope (theory -1/2).
    Control: the Hellinger-MDS table and its perturbations alone (stress set by the noise
    size). Negative control: stress against the Hellinger matrix of position-shuffled
    distributions (a geometry that is not the corpus'): the claim must not be reproduced.
    """
    res = conjecture_sweep(cfg)
    units = res["units"]
    nb = cfg.conjecture.bootstrap
    rho = {m: [u[f"rho_{m}"] for u in units] for m in
           ("hellinger", "euclidean", "logratio", "shuffled_hellinger")}
    ci = {m: bootstrap_ci(v, num=nb) for m, v in rho.items()}
    mean = {m: float(np.mean(v)) for m, v in rho.items()}
    diff_e = bootstrap_ci(np.subtract(rho["hellinger"], rho["euclidean"]), num=nb)
    diff_l = bootstrap_ci(np.subtract(rho["hellinger"], rho["logratio"]), num=nb)
    fam = _family_rho(res["per_corpus"], cfg)
    fam_ci = bootstrap_ci(fam, num=nb)
    verdict = ("reproduced" if ci["hellinger"][0] > 0 else
               "not reproduced" if ci["hellinger"][1] < 0 else "inconclusive")
    gaps = [float(np.mean([np.mean(np.abs(pc["finite_loss"][w] - pc["loss"]))
                           for pc in res["per_corpus"]])) for w in cfg.conjecture.widths]
    slope = lstats.loglog_slope(cfg.conjecture.widths, gaps)
    control = outcome(fam_ci[0], 0.0, fam_ci[0] > 0,
                      "Hellinger-MDS table and its perturbations only: CI lower end of rho")
    negative = outcome(ci["shuffled_hellinger"][0], 0.0, ci["shuffled_hellinger"][0] > 0,
                       "stress against position-shuffled Hellinger distances: CI lower end")
    n_tables = len(res["per_corpus"][0]["tables"])
    better = ("Hellinger predicts the loss better than Euclidean and log-ratio stress"
              if diff_e[0] > 0 and diff_l[0] > 0 else
              "Hellinger stress is not a better predictor than both Euclidean and log-ratio "
              "stress")
    detail = (f"{n_tables} frozen PE tables x {len(cfg.conjecture.seeds)} seeds x "
              f"{len(cfg.conjecture.corpora)} corpora, infinite-width NTK kernel regression: "
              f"Spearman(Hellinger stress, held-out loss) {mean['hellinger']:.3f}, 95% CI "
              f"{fmt(ci['hellinger'])} -> {verdict}; Euclidean {mean['euclidean']:.3f} "
              f"{fmt(ci['euclidean'])}, log-ratio {mean['logratio']:.3f} "
              f"{fmt(ci['logratio'])}; H - E CI {fmt(diff_e)}, H - log-ratio CI {fmt(diff_l)} "
              f"({better}); finite-width |loss_w - loss_inf| at widths {list(cfg.conjecture.widths)} "
              f"{fmt(gaps)}, slope {slope:.2f} (theory -0.5); control (Hellinger family) CI "
              f"{fmt(fam_ci)}; shuffled-geometry negative control CI "
              f"{fmt(ci['shuffled_hellinger'])}")
    per_corpus = [{"corpus_seed": pc["corpus_seed"], "tables": pc["tables"],
                   "stress": pc["stress"], "loss_mean_over_seeds": pc["loss"].mean(1),
                   "finite_loss_gap": {str(w): float(np.mean(np.abs(v - pc["loss"])))
                                       for w, v in pc["finite_loss"].items()}}
                  for pc in res["per_corpus"]]
    return CheckResult("monotonicity_conjecture", bool(ci["hellinger"][0] > 0),
                       mean["hellinger"], 0.0, detail, {
                           "n_tables": n_tables, "seeds": list(cfg.conjecture.seeds),
                           "corpora": list(cfg.conjecture.corpora), "ci": ci["hellinger"],
                           "verdict": verdict, "rho": mean, "rho_ci": ci, "units": units,
                           "hellinger_minus_euclidean_ci": diff_e,
                           "hellinger_minus_logratio_ci": diff_l,
                           "family_rho_ci": fam_ci, "finite_width": list(cfg.conjecture.widths),
                           "finite_width_gap": gaps, "finite_width_slope": slope,
                           "theory_slope": -0.5, "per_corpus": per_corpus,
                           "control": control, "negative_control": negative})

