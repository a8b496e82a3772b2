"""Aggregation, figures and report of ``experiments.long_context``.

:func:`summarise` turns the per-seed cells into mean ± 95 % CI arrays (every figure's data, kept
in results.json under ``summary.figures``); :func:`write_report` draws the figures (matplotlib,
Agg) and writes report.md; :func:`docs_block` renders the tables for docs/evaluations.md from a
results.json (``python -m experiments.long_context.report RESULTS_JSON DOCS_MD [FIG_DIR]``
replaces the block between the generated-block markers of the run's preset and copies the PNGs
and results.json).
"""
from __future__ import annotations

import os
import shutil
import sys
from typing import Any

import numpy as np

from experiments.common import (CI_METHOD, IN_DISTRIBUTION_MIN, VERDICTS, fmt_ci, markdown_table,
                                mean_ci, verdict, welch_ci)

FIGURES = ("ppl_vs_length.png", "passkey_heatmap.png", "needle_heatmap.png", "attention.png",
           "stress_vs_ppl.png")
TESTABLE = IN_DISTRIBUTION_MIN   # retrieval learned at the training length
UNTESTED = VERDICTS[3]
LABELS = {"longrope": "longrope (attention factor only)"}
BEGIN, END = "<!-- long_context:begin (generated) -->", "<!-- long_context:end -->"


def markers(preset: str | None) -> tuple[str, str]:
    """The generated block's markers for a run of ``preset``: the quick preset's block is
    :data:`BEGIN` ... :data:`END`, any other preset's its own (``long_context[cpu]``), so one
    page holds the blocks of several presets and each rerun replaces only its own."""
    if preset in (None, "quick"):
        return BEGIN, END
    return (f"<!-- long_context[{preset}]:begin (generated) -->",
            f"<!-- long_context[{preset}]:end -->")


def _lengths(cfg: dict) -> list[int]:
    return sorted({f * cfg["train_length"] for f in cfg["eval_factors"]})


def _ci_curve(per_seed: np.ndarray) -> dict[str, list]:
    cis = [mean_ci(per_seed[:, j]) for j in range(per_seed.shape[1])]
    return {k: [c[k] for c in cis] for k in ("mean", "lo", "hi", "half")}


def _retrieval(seeds: list[dict], task: str, ls: list[int], L: int) -> dict[str, Any]:
    acc = np.asarray([s[task] for s in seeds], float)                 # [seeds, lengths, depths]
    at = {l: acc[:, i].mean(1) for i, l in enumerate(ls)}             # per seed, over depths
    testable = bool(np.mean(at[L]) >= TESTABLE)
    out = {"accuracy_mean": acc.mean(0).tolist(), "at_L": mean_ci(at[L]),
           "testable": testable, "status": "testable" if testable else UNTESTED,
           "by_length": {str(l): mean_ci(v) for l, v in at.items()}}
    return out


def summarise(cells: dict[str, dict], cfg) -> dict[str, Any]:
    """Per PE: perplexity curves with CIs, retrieval grids and their status, attention curves;
    the ranking by perplexity at 4L and the verdicts."""
    import dataclasses
    c = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)
    L, ls = c["train_length"], _lengths(c)
    at = 4 * L if 4 * L in ls else max(ls)
    figures: dict[str, dict] = {"ppl_vs_length": {}, "passkey": {}, "needle": {},
                                "attention": {}, "lengths": ls, "depths": list(c["depths"])}
    ppl = {}
    for pe, cell in cells.items():
        seeds = cell["seeds"]
        p = np.exp(np.asarray([[s["nll"][str(l)] for l in ls] for s in seeds], float))
        ppl[pe] = p
        figures["ppl_vs_length"][pe] = {"lengths": ls, **_ci_curve(p)}
        for task in ("passkey", "needle"):
            figures[task][pe] = _retrieval(seeds, task, ls, L)
        att = {}
        for key in ("entropy", "sink", "distance", "local"):
            rows = [[s["attention"][str(l)].get(key, np.nan) for l in ls] for s in seeds]
            arr = np.asarray(rows, float)
            if np.isfinite(arr).all():
                att[key] = _ci_curve(arr)
        figures["attention"][pe] = att or {"error": next(iter(
            seeds[0]["attention"].values())).get("error", "not available")}
    i_L, i_at = ls.index(L), ls.index(at)
    best_L = min(float(np.mean(v[:, i_L])) for v in ppl.values())
    best_pe = min(ppl, key=lambda p: float(np.mean(ppl[p][:, i_at])))
    ranking = []
    for pe in sorted(ppl, key=lambda p: float(np.mean(ppl[p][:, i_at]))):
        v = ppl[pe]
        degrade = mean_ci(np.log(v[:, i_at]) - np.log(v[:, i_L]))
        worse = welch_ci(v[:, i_at], ppl[best_pe][:, i_at])
        sink = figures["attention"][pe].get("sink", {}).get("mean", [None] * len(ls))
        ranking.append({"pe": pe, "ppl_L": mean_ci(v[:, i_L]), "ppl_at": mean_ci(v[:, i_at]),
                        "flag_L": bool(np.mean(v[:, i_L]) > 1.1 * best_L),
                        "degrades_past_L": {"ci": degrade, "verdict": verdict(degrade)},
                        "worse_than_best": ({"ci": worse, "verdict": verdict(worse)}
                                            if pe != best_pe else None),
                        "passkey_at": _status_ci(figures["passkey"][pe], at),
                        "needle_at": _status_ci(figures["needle"][pe], at),
                        "sink_L": sink[i_L], "sink_at": sink[i_at]})
    return {"figures": figures, "ranking": ranking, "ppl_length": at, "best_pe": best_pe}


def _status_ci(entry: dict, at: int) -> dict | str:
    return entry["by_length"][str(at)] if entry["testable"] else UNTESTED


def _plots(out: str, s: dict, geo: dict, L: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f, ls = s["figures"], s["figures"]["lengths"]
    colours = plt.cm.tab20(np.linspace(0, 1, 20))
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (pe, e) in enumerate(f["ppl_vs_length"].items()):
        style = "--" if pe.startswith("rope_") or pe == "longrope" else "-"
        ax.plot(ls, e["mean"], style, marker="o", ms=3, color=colours[i % 20],
                label=LABELS.get(pe, pe))
        ax.fill_between(ls, e["lo"], e["hi"], color=colours[i % 20], alpha=0.15)
    ax.axvline(L, color="k", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="evaluation context length",
           ylabel="perplexity (95 % CI band)", title=f"perplexity vs length (trained at L = {L})")
    ax.set_xticks(ls, [str(l) for l in ls])
    ax.set_xticks([], minor=True)                # no log-scale minor labels over the lengths
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, FIGURES[0]), dpi=110)
    plt.close(fig)
    for task, name in (("passkey", FIGURES[1]), ("needle", FIGURES[2])):
        pes = list(f[task])
        cols = min(6, len(pes))
        rows = -(-len(pes) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(2.2 * cols, 2.2 * rows), squeeze=False)
        for ax in axes.ravel():
            ax.axis("off")
        for ax, pe in zip(axes.ravel(), pes):
            e = f[task][pe]
            ax.axis("on")
            ax.set_title(LABELS.get(pe, pe), fontsize=7)
            ax.set_xticks(range(len(f["depths"])), [f"{d:g}" for d in f["depths"]], fontsize=6)
            ax.set_yticks(range(len(ls)), [str(l) for l in ls], fontsize=6)
            if e["testable"]:
                ax.imshow(np.asarray(e["accuracy_mean"]), vmin=0, vmax=1, cmap="viridis",
                          aspect="auto", origin="lower")
            else:
                ax.text(0.5, 0.5, f"{UNTESTED}\n(acc at L {100 * e['at_L']['mean']:.0f} %)",
                        ha="center", va="center", fontsize=6, transform=ax.transAxes)
        fig.suptitle(f"{task} exact match (rows: length, columns: depth)", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (pe, e) in enumerate(f["attention"].items()):
        for ax, key in zip(axes, ("entropy", "sink")):
            if key in e:
                ax.plot(ls, e[key]["mean"], marker="o", ms=3, color=colours[i % 20],
                        label=LABELS.get(pe, pe))
                ax.fill_between(ls, e[key]["lo"], e[key]["hi"], color=colours[i % 20], alpha=0.15)
    axes[0].plot(ls, [np.mean(np.log(np.arange(1, l + 1))) for l in ls], "k:", lw=1,
                 label="uniform causal")
    axes[0].set(xscale="log", xlabel="length", ylabel="attention entropy (nats)")
    axes[1].set(xscale="log", xlabel="length", ylabel="mass on position 0 (sink)")
    for ax in axes:
        ax.axvline(L, color="k", lw=0.8, ls=":")
        ax.set_xticks(ls, [str(l) for l in ls])
        ax.set_xticks([], minor=True)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out, FIGURES[3]), dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    for pe, r in geo["rows"].items():
        x = r["stress"][str(4 * L)]
        ax.scatter(x, r["ppl"], s=14)
        ax.annotate(pe, (x, r["ppl"]), fontsize=7)
    ax.set(xlabel=f"stress σ* at n = {4 * L}", ylabel=f"perplexity at {geo['ppl_length']}",
           title="stress vs perplexity (exploratory)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, FIGURES[4]), dpi=110)
    plt.close(fig)


def _fmt(v, scale=1.0, digits=2) -> str:
    return v if isinstance(v, str) else fmt_ci(v, scale, digits)


def _num(v, digits: int = 2) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"


def tables(results: dict) -> dict[str, str]:
    """The markdown tables of a results.json (ranking, retrieval, attention, geometry)."""
    s, cfg, geo = results["summary"], results["config"], results["geometry"]
    L, at = cfg["train_length"], s["ppl_length"]
    rows = []
    for i, r in enumerate(s["ranking"]):
        w = r["worse_than_best"]
        rows.append([i + 1, LABELS.get(r["pe"], r["pe"]), _fmt(r["ppl_at"]), _fmt(r["ppl_L"]),
                     "**> 10 % worse at L**" if r["flag_L"] else "",
                     r["degrades_past_L"]["verdict"], "best" if w is None else w["verdict"],
                     _fmt(r["passkey_at"], 100, 0), _fmt(r["needle_at"], 100, 0),
                     "n/a" if r["sink_at"] is None else f"{r['sink_at']:.3f}"])
    ranking = markdown_table(
        ["rank", "PE", f"ppl @ {at}", f"ppl @ L={L}", "flag", f"ppl @ {at} > ppl @ L",
         f"worse than best @ {at}", f"passkey @ {at} (%)", f"needle @ {at} (%)",
         f"sink @ {at}"], rows)
    ls = s["figures"]["lengths"]
    ret = []
    for task in ("passkey", "needle"):
        for pe, e in s["figures"][task].items():
            ret.append([task, LABELS.get(pe, pe), _fmt(e["at_L"], 100, 0), e["status"]]
                       + [_fmt(e["by_length"][str(l)], 100, 0) if e["testable"] else "—"
                          for l in ls if l != L])
    retrieval = markdown_table(["task", "PE", "acc @ L (%)", "status"]
                               + [f"@ {l}" for l in ls if l != L], ret)
    att = []
    for pe, e in s["figures"]["attention"].items():
        if "entropy" in e:
            att.append([LABELS.get(pe, pe)] + [f"{e['entropy']['mean'][j]:.2f} / "
                                               f"{e['sink']['mean'][j]:.3f}"
                                               for j in range(len(ls))])
        else:
            att.append([pe] + ["n/a"] * len(ls))
    attention = markdown_table(["PE"] + [f"entropy / sink @ {l}" for l in ls], att)
    g = [[pe, f"{r['stress'][str(L)]:.3f}", f"{r['stress'][str(4 * L)]:.3f}", f"{r['ppl']:.2f}"]
         for pe, r in geo["rows"].items()]
    g += [[pe, "none (no static geometry)", "", ""] for pe in geo["no_static_geometry"]]
    rho = [[f"n = {n}", _num(c["rho"]), f"[{_num(c['lo'])}, {_num(c['hi'])}]", c["n"]]
           for n, c in geo["spearman"].items()]
    geometry = (markdown_table(["PE", f"σ* @ n = {L}", f"σ* @ n = {4 * L}",
                                f"ppl @ {geo['ppl_length']}"], g) + "\n\n"
                + markdown_table(["stress at", "Spearman ρ (stress, ppl)", "95 % bootstrap CI",
                                  "PEs"], rho))
    return {"ranking": ranking, "retrieval": retrieval, "attention": attention,
            "geometry": geometry}


def header(results: dict) -> str:
    cfg = results["config"]
    # the decoder and optimiser fields: nested (model / train) since LongContextConfig, flat in
    # results written before
    model, train = cfg.get("model", cfg), cfg.get("train", cfg)
    L = cfg["train_length"]
    learned = [p for p in cfg["pes"] if p in ("learned", "random_fixed", "tupe")]
    return (f"Preset `{results['preset']}`, {len(results['seeds'])} seeds, corpus: "
            f"{results['corpus']['source']} ({results['corpus']['tokens']} tokens). Decoder "
            f"{model['num_layers']} layers, d = {model['d_model']}, {model['num_heads']} heads, "
            f"{train['steps']} AdamW steps of batch {train['batch_size']} at L = {L} "
            f"({100 * cfg['retrieval_fraction']:.0f} % of the rows passkey / needle, key "
            f"length {cfg['key_length']}, {cfg['num_needles']} needles). Evaluated at "
            f"{', '.join(str(f * L) for f in cfg['eval_factors'])}. Wall time "
            f"{results['wall_seconds']:.0f} s at load average "
            f"{', '.join(map(str, results['load_average']))} ({results['provenance']}). "
            f"{CI_METHOD}. Learned tables have max_len = {max(cfg['eval_factors']) * L}: their "
            f"rows past L are never trained{' (' + ', '.join(learned) + ')' if learned else ''}. "
            f"RoPE scalings ({', '.join(LABELS.get(p, p) for p in cfg['scalings'])}) are applied "
            f"at evaluation time to the trained RoPE models with s = max(1, l / L); LongRoPE "
            f"without searched per-pair factors is its attention factor alone. Passkey / needle "
            f"accuracy is reported only where the accuracy at L is ≥ {100 * TESTABLE:.0f} %, "
            f"else \"{UNTESTED}\". Verdicts from the 95 % CIs "
            f"(`experiments.common.verdict`): \"reproduced\" = the claim holds.")


def write_report(out: str, results: dict) -> None:
    L = results["config"]["train_length"]
    _plots(out, results["summary"], results["geometry"], L)
    t = tables(results)
    geo = results["geometry"]
    text = f"""# Long context: perplexity, retrieval and attention beyond the training length

{header(results)}

## Ranking by perplexity at {results['summary']['ppl_length']}

{t['ranking']}

![perplexity vs length]({FIGURES[0]})

## Retrieval

{t['retrieval']}

![passkey]({FIGURES[1]})
![needle]({FIGURES[2]})

## Attention (mean over layers and heads)

{t['attention']}

![attention entropy and sink]({FIGURES[3]})

## Geometry of the corpus vs perplexity ({geo['label']})

Stress σ* (optimal scale) of each trained PE's first-layer distances against the Hellinger
matrix of the stream's windows (top {geo['top_k']} tokens + OTHER). The stream is contiguous,
so its positional distributions are nearly stationary: D is close to a noise floor.

{t['geometry']}

![stress vs perplexity]({FIGURES[4]})
"""
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)


def docs_block(results: dict, fig_prefix: str) -> str:
    t = tables(results)
    begin, end = markers(results.get("preset"))
    figs = "\n".join(f"![{n[:-4]}]({fig_prefix}{n})" for n in FIGURES)
    return (f"{begin}\n{header(results)}\n\n{t['ranking']}\n\n{t['retrieval']}\n\n"
            f"{t['attention']}\n\nGeometry ({results['geometry']['label']}):\n\n"
            f"{t['geometry']}\n\n{figs}\n{end}")


def update_docs(results_path: str, docs_path: str, fig_dir: str) -> None:
    """Replace the generated block of ``docs_path`` (or append it) with the tables of
    ``results_path``, and copy the run's PNGs into ``fig_dir``."""
    import json
    with open(results_path) as f:
        results = json.load(f)
    os.makedirs(fig_dir, exist_ok=True)
    shutil.copy(results_path, os.path.join(fig_dir, "results.json"))
    for n in FIGURES:
        shutil.copy(os.path.join(os.path.dirname(results_path), n), os.path.join(fig_dir, n))
    prefix = os.path.relpath(fig_dir, os.path.dirname(docs_path)) + "/"
    with open(docs_path) as f:
        text = f.read()
    block = docs_block(results, prefix)
    begin, end = markers(results.get("preset"))
    if begin in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(docs_path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    update_docs(*sys.argv[1:4])
