"""``report.md`` with one figure per check: the check's own curve (its statistic against width,
seed or its natural axis, with the theory line, ceiling or threshold drawn in) beside the
statistic under every mutant and nuisance setting of the harness (:mod:`ntk.mutants`).

:func:`write_report` takes the :class:`ntk.result.CheckResult` list of :func:`ntk.checks.run_all`
and writes ``DIR/report.md`` and ``DIR/<check>.png`` (matplotlib, Agg backend).
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["write_report", "results_table", "mutant_table", "robustness_table",
           "conjecture_table"]


def _verdict(r) -> str:
    return "PASS" if r.passed else "FAIL"


def _as_float(x) -> float:
    """A statistic as stored in the JSON (non-finite values are written as "inf", "-inf", "nan")."""
    return float(x)


def nt_moves(r, rtol: float = 1e-9) -> list[str]:
    """The neural-tangents functions whose poison *moves* the check's statistic (relative change
    above ``rtol``), whether or not it flips the verdict: for a check whose verdict is FAIL no
    poison of the theory side can be expected to turn it into a PASS, so this records where the
    statistic depends on neural-tangents at all. An empty list means the statistic is computed
    without any neural-tangents output."""
    base = _as_float(r.statistic)
    out = []
    for name, row in r.data.get("mutants", {}).items():
        if not name.startswith("nt:") or "skipped" in row or "statistic" not in row:
            continue
        v = _as_float(row["statistic"])
        same = (v == base) or (abs(v - base) <= rtol * max(abs(base), abs(v)))
        if not same:
            out.append(name.split(":", 1)[1])
    return out


def _g(x) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else str(x)


def results_table(results) -> str:
    """Markdown: check, kind, default verdict, verdict over the grid, statistic, threshold,
    control, negative control, neural-tangents functions called / moving the statistic
    (:func:`nt_moves`) / flipping the verdict."""
    rows = ["| check | kind | default | over the grid | statistic | threshold | control (must "
            "hold) | negative control (must fail) | NT called | NT moves the statistic | NT flips "
            "the verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c, n = r.data.get("control", {}), r.data.get("negative_control", {})
        called = sorted({c_.split(".fn")[0] for c_ in r.data.get("nt_called", [])
                         if not c_.startswith("stax.") or c_.endswith("kernel_fn")})
        rows.append(
            f"| {r.name} | {r.data.get('kind', '?')} | {_verdict(r)} | "
            f"{r.data.get('robust_verdict', '-')} | {r.statistic:.4g} | {r.threshold:.4g} | "
            f"{_g(c.get('statistic', float('nan')))}: {'holds' if c.get('passed') else 'FAILS'} | "
            f"{_g(n.get('statistic', float('nan')))}: "
            f"{'holds (bad)' if n.get('passed') else 'fails (good)'} | "
            f"{', '.join(called) or 'none'} | {', '.join(nt_moves(r)) or 'none'} | "
            f"{', '.join(r.data.get('neural_tangents', [])) or 'none'} |")
    return "\n".join(rows)


def mutant_table(results) -> str:
    """Markdown: check x mutant -> statistic and verdict (``=`` where the poisoned function
    was never called, so the default stands)."""
    names = []
    for r in results:
        for m in r.data.get("mutants", {}):
            if m not in names:
                names.append(m)
    rows = ["| check | default | " + " | ".join(names) + " |",
            "|---|---|" + "---|" * len(names)]
    for r in results:
        cells = []
        for m in names:
            row = r.data.get("mutants", {}).get(m)
            if row is None:
                cells.append("")
            elif "skipped" in row:
                cells.append("= (not called)")
            else:
                cells.append(f"{_as_float(row['statistic']):.3g} {'PASS' if row['passed'] else 'FAIL'}")
        rows.append(f"| {r.name} | {r.statistic:.3g} {_verdict(r)} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def robustness_table(results) -> str:
    """Markdown: check, setting, statistic, verdict; the grid's verdict and what flips it."""
    rows = ["| check | setting | statistic | verdict |", "|---|---|---|---|"]
    for r in results:
        for setting, row in r.data.get("robustness", {}).items():
            rows.append(f"| {r.name} | {setting} | {_as_float(row['statistic']):.4g} | {row['verdict']} |")
        flips = r.data.get("fragile_settings", [])
        rows.append(f"| {r.name} | **over the grid** | | **{r.data.get('robust_verdict', '-')}**"
                    + (f" (flipped by {', '.join(flips)})" if flips else "") + " |")
    return "\n".join(rows)


def _ridges(stats: dict) -> dict:
    """``{ridge: {"mean", "ci", "winners", "verdict", ...}}`` from the check's statistics (stored
    per ridge, or under ``"ridges"`` as :func:`ntk.conjecture.conjecture_statistics` returns)."""
    inner = stats.get("ridges", stats)
    return {k: v for k, v in inner.items() if isinstance(v, dict) and "mean" in v}


def conjecture_table(result) -> str:
    """Markdown: per ridge, rho_H and both nulls with their corpus-bootstrap CIs, the CIs of the
    differences, the winning tables and the ridge's verdict."""
    st = result.data.get("statistics", {})
    rows = ["| ridge | rho_H | rho_line | rho_other | H - line CI | H - other CI | lowest loss "
            "(corpora) | verdict |", "|---|---|---|---|---|---|---|---|"]
    f = lambda v, c: f"{v:.3f} [{c[0]:.3f}, {c[1]:.3f}]"                   # noqa: E731
    for r, v in _ridges(st).items():
        m, ci = v["mean"], v["ci"]
        wins = ", ".join(f"{k} {n}" for k, n in v["winners"].items())
        rows.append(f"| {r} | {f(m['rho_H'], ci['rho_H'])} | {f(m['rho_line'], ci['rho_line'])} "
                    f"| {f(m['rho_other'], ci['rho_other'])} | [{ci['H_minus_line'][0]:.3f}, "
                    f"{ci['H_minus_line'][1]:.3f}] | [{ci['H_minus_other'][0]:.3f}, "
                    f"{ci['H_minus_other'][1]:.3f}] | {wins} | {v['verdict']} |")
    verdict = result.data.get("conjecture_verdict", "-")
    return "\n".join(rows) + f"\n\nOverall: **{verdict}** (statistic {result.statistic:.4g})."


def _loglog(ax, widths, values, label, theory_slope=None):
    ax.loglog(widths, values, "o-", label=label)
    if theory_slope is not None:
        w = np.asarray(widths, np.float64)
        ax.loglog(w, values[0] * (w / w[0]) ** theory_slope, "k--",
                  label=f"slope {theory_slope:g}")
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
        ax.plot(seeds, [x["relative"] for x in d["per_seed"]], "o-", label="distinct P_i")
        ax.plot(seeds, [x["relative"] for x in d["shared_P"]], "s-", label="shared P (negative)")
        ax.axhline(r.threshold, color="k", ls="--", label="threshold")
        ax.set_xlabel("seed")
        ax.set_ylabel("model ratio / data ratio")
    elif name == "lemma1_linearization":
        _loglog(ax, d["widths"], d["lazy_error"], "positions", -0.5)
        ax.loglog(d["widths"], d["logit_error"], "^-", label="logits")
        ax.loglog(d["mean_field_widths"], d["mean_field_error"], "s-", label="mean field")
        ax.set_ylabel("exact vs nt.linearize, relative")
    elif name == "lemma2_sufficiency":
        ax.plot(d["widths"], d["gap"], "o-", label="attention toy (outside premise)")
        ax.plot(d["widths"], d["noise"], "s-", label="noise floor")
        ax.axhline(d["control_gap"] + 1e-12, color="g", ls=":", label="W_v = 0 (the guard)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("width")
        ax.set_ylabel("|g_A - g_B| / |g_B|")
    elif name == "lemma3_linear_displacement":
        _loglog(ax, d["widths"], d["operator_gap"], "|A_exact - A_lin| / |A_lin|", -0.5)
        ax.loglog(d["widths"], [1 - v for v in d["r2_lin"]], "s:", label="1 - R^2 (lin)")
        ax.set_ylabel("operator gap")
    elif name == "lemma4_distortion_bounds":
        ax.loglog(d["widths"], [v - 1 for v in d["ratio"]], "o-", label="c2/c1 - 1")
        ax.set_xlabel("width")
        ax.set_ylabel("c2 / c1 - 1 (tangent space)")
    elif name == "lemma5_hellinger_monotonicity":
        ax.semilogx(d["widths"], d["score"], "o-", label="exact displacements")
        top = d["window"][-1]
        ax.semilogx([top] * len(d["linearized_score"]), d["linearized_score"], "x",
                    label="nt.linearize prediction")
        ax.axhline(d["synthetic_sqrtP"]["score"], color="g", ls="--", label="sqrt(P) isometry")
        ax.axhline(d["synthetic_P"]["score"], color="r", ls="--", label="P isometry")
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_xlabel("width")
        ax.set_ylabel("rho(., d_H) - rho(., |dP|_2)")
    elif name == "monotonicity_conjecture" and _ridges(d.get("statistics", {})):
        ridges = _ridges(d["statistics"])
        x = np.arange(len(ridges))
        for off, key, label in ((-0.1, "rho_H", "Hellinger"), (0.0, "rho_line", "|i - j| line"),
                                (0.1, "rho_other", "other corpora")):
            mean = [v["mean"][key] for v in ridges.values()]
            lo = [v["mean"][key] - v["ci"][key][0] for v in ridges.values()]
            hi = [v["ci"][key][1] - v["mean"][key] for v in ridges.values()]
            ax.errorbar(x + off, mean, yerr=[lo, hi], fmt="o", capsize=3, label=label)
        ax.set_xticks(x, [f"ridge {r}" for r in ridges], fontsize=7)
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set_ylabel("Spearman(stress, loss) over tables")
    elif "widths" in d and "error" in d:
        _loglog(ax, d["widths"], d["error"], name, -0.5)
    else:
        ax.text(0.5, 0.5, f"statistic {r.statistic:.4g}", ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _plot_mutants(r, ax) -> None:
    rows = [(k, v["statistic"], v["passed"]) for k, v in r.data.get("mutants", {}).items()
            if "skipped" not in v]
    rows += [(k, v["statistic"], v["verdict"] == "PASS")
             for k, v in r.data.get("robustness", {}).items()]
    if not rows:
        ax.set_axis_off()
        return
    labels = [k for k, _, _ in rows]
    vals = [np.nan_to_num(v, nan=0.0, posinf=1e6, neginf=-1e6) for _, v, _ in rows]
    ax.barh(range(len(rows)), vals, color=["tab:green" if p else "tab:red" for _, _, p in rows])
    ax.set_yticks(range(len(rows)), labels, fontsize=6)
    ax.axvline(r.threshold, color="k", ls="--", lw=0.8)
    ax.invert_yaxis()
    ax.set_xlabel("statistic (green PASS, red FAIL)", fontsize=7)


def write_report(results, out_dir: str, *, mode: str, wall_s: float) -> str:
    """Write ``report.md`` and one PNG per check into ``out_dir``; return the report path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    robust = [r.data.get("robust_verdict", _verdict(r)) for r in results]
    lines = [f"# NTK checks ({mode})", "",
             f"{robust.count('PASS')}/{len(results)} PASS over their grids in {wall_s:.0f} s.",
             "", results_table(results), "", "## Mutants", "", mutant_table(results), "",
             "## Robustness (one factor at a time)", "", robustness_table(results), ""]
    for r in results:
        if r.name == "monotonicity_conjecture" and "statistics" in r.data:
            lines += ["## Conjecture: specificity per ridge", "", conjecture_table(r), ""]
    for r in results:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8),
                                      gridspec_kw={"width_ratios": [1.1, 1]})
        try:
            _plot(r, ax)
            ax.set_title(r.name, fontsize=9)
            _plot_mutants(r, ax2)
            ax2.set_title("mutants and nuisance settings", fontsize=9)
            fig.tight_layout()
            fig.savefig(os.path.join(out_dir, f"{r.name}.png"), dpi=90)
        finally:
            plt.close(fig)
        lines += [f"## {r.name}: {_verdict(r)} (over the grid: "
                  f"{r.data.get('robust_verdict', '-')})", "", r.detail, "",
                  f"neural-tangents functions called: "
                  f"{', '.join(r.data.get('nt_called', [])) or 'none'}; whose poison flips the "
                  f"verdict: {', '.join(r.data.get('neural_tangents', [])) or 'none'}",
                  "", f"![{r.name}]({r.name}.png)", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path
