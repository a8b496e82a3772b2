"""The fine-tuning experiment's summary (accuracy CIs, Welch differences to ``learned``) and
its report table and text."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from experiments.common import CI_METHOD, fmt_ci, markdown_table, mean_ci, welch_ci


def summarise(rows: list[dict], stress: dict[str, dict], pes: Sequence[str]) -> list[dict]:
    """One line per PE: stress, accuracy mean +- 95 % CI over seeds (with the per-seed values),
    and the difference to ``learned`` with its 95 % Welch interval: "higher"/"lower" when the
    interval excludes 0, else "inconclusive"."""
    acc = {pe: [r["test_accuracy"] for r in sorted(rows, key=lambda r: r["seed"]) if r["pe"] == pe]
           for pe in pes}
    out = []
    for pe in pes:
        line = {"pe": pe, "seeds": len(acc[pe]), "accuracy": mean_ci(acc[pe]),
                "stress_raw": stress[pe]["raw"], "stress_optimal": stress[pe]["optimal"]}
        if pe != "learned" and "learned" in acc:
            diff = welch_ci(acc[pe], acc["learned"])
            line["vs_learned"] = {**diff, "direction": (
                "inconclusive" if not np.isfinite(diff["half"]) else
                "higher" if diff["lo"] > 0 else "lower" if diff["hi"] < 0 else "inconclusive")}
        out.append(line)
    return out


def table(summary: list[dict]) -> str:
    """The report table (accuracy in %)."""
    body = []
    for s in summary:
        vs = s.get("vs_learned")
        body.append([s["pe"], f"{s['stress_raw']:.4g}", f"{s['stress_optimal']:.4g}",
                     fmt_ci(s["accuracy"], 100), s["seeds"],
                     "—" if vs is None else f"{fmt_ci(vs, 100)} {vs['direction']}"])
    return markdown_table(["PE", "stress σ_raw", "stress σ*", "accuracy % (mean ± 95% CI)",
                           "seeds", "Δ vs learned, points (95% Welch CI)"], body)


def report(results: dict[str, Any], test_examples: int) -> str:
    """report.md of a finished run (``results`` as written to results.json)."""
    cfg, stress = results["options"], results["stress"]
    return (f"# Fine-tuning {cfg['pretrained']} with swapped PEs ({cfg['dataset']}, preset "
            f"{results['preset']})\n\n{table(results['summary'])}\n\nStress: Eq. (4) of arXiv "
            f"2604.05217 (no square root) of each PE's distances against the Hellinger "
            f"({cfg['metric']}) geometry of the training corpus, n = {stress['none']['n']} "
            f"positions; learned = the checkpoint's own table. Accuracy on {test_examples} test "
            f"examples, {cfg['seeds']} seeds, {cfg['train']['steps']} steps of batch "
            f"{cfg['train']['batch_size']}; intervals: {CI_METHOD}; Δ vs learned: Welch's t "
            f"interval on the difference of mean accuracies.\n"
            + (f"\nDataset: {results['data']['stands_in_for']}\n"
               if results["data"].get("stands_in_for") else ""))
