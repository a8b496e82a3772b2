"""The PE-swap experiment's statistics (convergence criterion, Spearman with its interval,
verdicts against ``learned``) and its report."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from experiments.common import fmt_ci, loss_plateau, markdown_table, mean_ci, welch_ci
from experiments.pe_swap.config import UNTESTED


def plateau(train_loss: Sequence[float], tol: float) -> dict[str, Any]:
    """The convergence criterion (:func:`experiments.common.loss_plateau` over the per-step
    training losses): the mean training loss of the last 20 % of steps at most ``tol``
    (relative) below the mean of the 20 % before."""
    return loss_plateau([[i, v] for i, v in enumerate(train_loss)], tail=0.2, rel_tol=tol)


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


def report(results: dict) -> str:
    cfg, data, head = results["options"], results["data"], results["mlm_head"]
    corr = results["stress_loss_spearman"]
    fmt = lambda c: (f"ρ = {c['rho']:.2f} (95 % CI {c['lo']:.2f} to {c['hi']:.2f}, "
                     f"{c['n']} variants)" if np.isfinite(c["rho"]) else f"n/a ({c['n']})")
    return (
        f"# PE swap on {cfg['pretrained']} (preset {results['preset']})\n\n"
        f"{table(results['summary'])}\n\n"
        f"MLM head trained first with the body frozen ({cfg['head_steps']} steps): held-out "
        f"loss {head['held_out_loss']:.3f}, accuracy {100 * head['held_out_accuracy']:.1f} %; "
        f"every variant starts from it. Continued MLM training: {cfg['train']['steps']} steps "
        f"of batch {cfg['train']['batch_size']} × {cfg['max_len']} tokens, "
        f"{data['masked_per_window']} masked positions per window, {cfg['seeds']} seed(s); "
        f"held-out {data['held_out_windows']} windows with fixed masks. Corpus: {data['corpus']}, "
        f"{data['sentences']} sentences, {data['windows']} windows. Stress: Eq. (4) of "
        f"arXiv 2604.05217 against the Hellinger ({cfg['metric']}) geometry of the corpus "
        f"({results['geometry']['source']}) at n = {results['geometry']['n']} positions; MDS "
        f"rank full {results['geometry']['rank_full']}, r = {results['geometry']['rank_r']} "
        f"(energy ε = {cfg['mds_eps']}). Verdicts need the convergence criterion "
        f"(training-loss plateau, rel. {cfg['plateau_tol']}) and ≥ 2 seeds; else "
        f"\"{UNTESTED}\". Intervals: {results['ci_method']}.\n\n"
        f"Exploratory (one point per variant cannot decide it): Spearman(σ_raw, loss) "
        f"{fmt(corr['stress_raw'])}; Spearman(σ*, loss) {fmt(corr['stress_optimal'])}.\n")
