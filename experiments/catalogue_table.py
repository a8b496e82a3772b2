"""The PE catalogue with each PE's geometry stress on the flagship's synthetic corpus.

``python -m experiments.catalogue_table [--out DIR]`` prints (and writes ``DIR/catalogue.md`` and
``DIR/catalogue.json``) one row per registered PE: its hook, whether it is relative, its paper, and
the optimal-scale stress sigma* (arXiv 2604.05217, Eq. 4) of the distances it induces against the
Hellinger matrix of the exact positional distributions of the three-regime corpus (n = 128,
V = 2000, linear mixing, seed 0; docs/interpretations.md). PEs are built through the registry
at d_model = 64, 4 heads, bidirectional, at initialisation (learned tables are random there);
sinusoidal, RoPE, ALiBi and NoPE also get their closed forms (d = 768, d_h = 64). The MDS row
uses the full-rank classical MDS coordinates of the same matrix.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from experiments.common import base_parser, markdown_table, run_cli, versions, write_json

CORPUS = {"num_positions": 128, "vocab_size": 2000, "mixing": "linear", "seed": 0}
CONTEXT = {"d_model": 64, "num_heads": 4, "max_len": 128, "causal": False}
CLOSED = {"sinusoidal": {"dim": 768}, "rope": {"head_dim": 64}, "alibi": {}, "none": {}}


def catalogue_rows() -> list[dict]:
    """One dict per registered PE with hook, relative flag, paper and stress (None: no distance)."""
    import posjax.encodings as pe
    import posjax.geometry as geo
    from posjax.data.synthetic import three_regime_corpus

    corpus = three_regime_corpus(CORPUS["num_positions"], CORPUS["vocab_size"],
                                 mixing=CORPUS["mixing"], seed=CORPUS["seed"])
    D = geo.hellinger_matrix(np.asarray(corpus.P))
    n = D.shape[0]
    coords = geo.classical_mds(D, rank_rule=("threshold", 1e-6)).coords
    rows = []
    for name in pe.names():
        entry = pe.info(name)
        row = {"pe": name, "hook": entry.hook, "relative": entry.relative, "paper": entry.paper}
        try:
            if name in CLOSED:
                E = geo.encoding_distances(name, n, **CLOSED[name])
            elif name == "mds":
                E = geo.encoding_distances("mds", n, coords=coords)
            else:
                E = geo.encoding_distances(name, n, use_registry=True, **CONTEXT)
            row["stress_opt"] = float(geo.stress(D, distances=E, scale="optimal"))
        except ValueError as e:
            row["stress_opt"], row["note"] = None, str(e).split(";")[0]
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0], default_out="runs/catalogue")
    args = parser.parse_args(argv)
    rows = catalogue_rows()
    table = markdown_table(
        ["PE", "hook", "relative", "σ* synthetic", "paper"],
        [[f"`{r['pe']}`", r["hook"], "yes" if r["relative"] else "no",
          "—" if r["stress_opt"] is None else f"{r['stress_opt']:.3f}", r["paper"]] for r in rows])
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "catalogue.md"), "w") as f:
        f.write(table + "\n")
    write_json(os.path.join(args.out, "catalogue.json"),
               {"rows": rows, "corpus": CORPUS, "context": CONTEXT, "closed_forms": CLOSED,
                "stress": {"scale": "optimal", "metric": "chord", "P": "exact"},
                "versions": versions()})


if __name__ == "__main__":
    run_cli(main)
