"""``report.md`` with one plot per check: the statistic against width (or its natural axis),
with the theory line, ceiling or threshold drawn in.

:func:`write_report` takes the :class:`ntk.result.CheckResult` list of :func:`ntk.checks.run_all`
and writes ``DIR/report.md`` and ``DIR/<check>.png`` (matplotlib, Agg backend).
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["write_report", "results_table"]


def _verdict(r) -> str:
    return "PASS" if r.passed else "FAIL"


def results_table(results) -> str:
    """Markdown table: check, result, statistic, threshold, control, negative control."""
    rows = ["| check | result | statistic | threshold | control (must hold) | negative control "
            "(must fail) | neural-tangents calls |", "|---|---|---|---|---|---|---|"]
    for r in results:
        c, n = r.data.get("control", {}), r.data.get("negative_control", {})
        calls = ", ".join(r.data.get("neural_tangents", []))
        rows.append(
            f"| {r.name} | {_verdict(r)} | {r.statistic:.4g} | {r.threshold:.4g} | "
            f"{c.get('statistic', float('nan')):.3g} vs {c.get('threshold', float('nan')):.3g}: "
            f"{'holds' if c.get('passed') else 'FAILS'} | "
            f"{n.get('statistic', float('nan')):.3g} vs {n.get('threshold', float('nan')):.3g}: "
            f"{'holds (bad)' if n.get('passed') else 'fails (good)'} | {calls or 'none'} |")
    return "\n".join(rows)


def _loglog(ax, widths, values, label, theory_slope=None):
    ax.loglog(widths, values, "o-", label=label)
    if theory_slope is not None:
        w = np.asarray(widths, np.float64)
        ax.loglog(w, values[0] * (w / w[0]) ** theory_slope, "k--",
                  label=f"theory slope {theory_slope:g}")
    ax.set_xlabel("width")


def _plot(r, ax) -> None:
    d = r.data
    name = r.name
    if name == "theorem1_necessity":
        labels = ["NoPE", "SUM PE"]
        acc = [d["nope"]["accuracy"], d["sum"]["accuracy"]]
        err = [1.96 * d["nope"]["se"], 1.96 * d["sum"]["se"]]
        ax.bar(labels, acc, yerr=err, capsize=4)
        ax.axhline(d["bayes_bag_accuracy"], color="k", ls="--", label="bag-of-tokens Bayes")
        ax.set_ylabel("held-out accuracy (infinite width)")
    elif name == "theorem4_separation":
        seeds = d["seeds"]
        ax.plot(seeds, [x["ratio"] for x in d["per_seed"]], "o-", label="distinct P_i")
        ax.plot(seeds, [x["ratio"] for x in d["shared_P"]], "s-", label="shared P (negative)")
        ax.axhline(r.threshold, color="k", ls="--", label="threshold")
        ax.set_xlabel("seed")
        ax.set_ylabel("min distinct / max tied distance")
    elif name == "lemma1_linearization":
        _loglog(ax, d["widths"], d["lazy_error"], "NTK toy", -0.5)
        ax.loglog(d["widths"], d["mean_field_error"], "s-", label="mean field (negative)")
        ax.set_ylabel("|p_t - p_t^lin| / |p_t - p_0|")
    elif name == "lemma2_sufficiency":
        ax.plot(d["widths"], d["gap"], "o-", label="gap (attention toy)")
        ax.plot(d["widths"], d["noise"], "s-", label="noise floor")
        ax.axhline(d["control_gap"] + 1e-12, color="g", ls=":", label="context-free control")
        ax.set_xscale("log")
        ax.set_xlabel("width")
        ax.set_ylabel("|g_A - g_B| / |g_B|")
    elif name == "lemma3_linear_displacement":
        _loglog(ax, d["widths"], d["one_minus_r2"], "1 - R^2")
        ax.set_ylabel("1 - R^2 (Delta p on P)")
    elif name == "lemma4_distortion_bounds":
        ax.loglog(d["widths"], d["ratio"], "o-", label="c2/c1 (tangent space)")
        ax.axhline(1.0, color="k", ls="--", label="infinite width (stax): 1")
        ax.axhline(r.threshold, color="r", ls=":", label="threshold")
        ax.set_xlabel("width")
        ax.set_ylabel("c2 / c1")
    elif name == "lemma5_hellinger_monotonicity":
        ax.semilogx(d["widths"], d["rho_hellinger"], "o-", label="rho(|dp|, d_H)")
        ax.axhline(d["ceiling"], color="k", ls="--", label="ceiling rho(|dP|_2, d_H)")
        ax.set_xlabel("width")
        ax.set_ylabel("Spearman rho")
    elif name == "monotonicity_conjecture":
        _loglog(ax, d["finite_width"], d["finite_width_gap"], "|loss_w - loss_inf|", -0.5)
        ax.set_ylabel("finite- vs infinite-width held-out loss")
        ax.set_title(f"rho(H stress, loss) = {r.statistic:.3f}, CI "
                     f"[{d['ci'][0]:.3f}, {d['ci'][1]:.3f}]", fontsize=8)
    ax.legend(fontsize=7)


def write_report(results, out_dir: str, *, mode: str, wall_s: float) -> str:
    """Write ``report.md`` and one PNG per check into ``out_dir``; return the report path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    lines = [f"# NTK checks ({mode})", "",
             f"{sum(r.passed for r in results)}/{len(results)} passed in {wall_s:.0f} s.", "",
             results_table(results), ""]
    for r in results:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        try:
            _plot(r, ax)
            ax.set_title(ax.get_title() or r.name, fontsize=9)
            fig.tight_layout()
            fig.savefig(os.path.join(out_dir, f"{r.name}.png"), dpi=100)
        finally:
            plt.close(fig)
        lines += [f"## {r.name}: {_verdict(r)}", "", r.detail, "",
                  f"neural-tangents calls: {', '.join(r.data.get('neural_tangents', [])) or 'none'}",
                  "", f"![{r.name}]({r.name}.png)", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path
