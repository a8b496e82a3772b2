"""The PE catalogue with each PE's geometry stress on the flagship's synthetic corpus.

``python -m experiments.catalogue_table [--out DIR] [--docs]`` prints (and writes
``DIR/catalogue.md`` and ``DIR/catalogue.json``; with ``--docs`` also the committed page
``docs/catalogue.md``) one row per registered PE: its hooks, whether it is relative, its paper, and
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
DOCS_PAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                         "catalogue.md")
HEADER = ["PE", "hooks", "relative", "σ* synthetic", "paper"]
PAGE_INTRO = """# Positional-encoding catalogue

Generated from the registry by `python -m experiments.catalogue_table --docs`; do not edit by
hand (a test checks that this table matches `posjax.encodings.names()`).

Every PE is registered by name (`posjax.encodings.make(name, **options)`,
`TransformerConfig(pe=name, pe_options={...})`). "hooks" are the methods the PE overrides
(`embed`: added to the embeddings; `rotate`: transforms q and k; `bias`: added to the logits;
`attention_input` / `block_output`: the structural hooks of positional attention, LaPE and CPE).
"relative" is the registry's flag, asserted for every PE by a shift-invariance test (absolute PEs
must fail it).

σ* is the optimal-scale stress (arXiv 2604.05217, Eq. (4); 0 = reproduces the corpus geometry,
1 = no positional geometry) of the distances each PE induces against the Hellinger matrix of the
exact positional distributions of a synthetic three-regime corpus (n = 128, V = 2000, linear
mixing, seed 0). PEs are scored at initialisation (learned tables are random), built at
d_model = 64 with 4 heads; sinusoidal, RoPE, ALiBi and NoPE use their closed forms (d = 768,
d_h = 64); bias PEs through E_ij = b(0) - b(i - j); a PE with several hooks adds the squared
distances of its parts; `mds` is the full-rank MDS encoding of the same matrix. "—": no distance
is defined (structural hooks), or a 2-D PE that needs a square grid.
"""


def catalogue_rows() -> list[dict]:
    """One dict per registered PE with hook, relative flag, paper and stress (None: no distance)."""
    import posjax.encodings as pe
    from posjax.analysis.encoding_geometry import encoding_distances
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
                E = encoding_distances(name, n, **CLOSED[name])
            elif name == "mds":
                E = encoding_distances("mds", n, coords=coords)
            else:
                E = encoding_distances(name, n, use_registry=True, **CONTEXT)
            row["stress_opt"] = float(geo.stress(D, distances=E, scale="optimal"))
        except ValueError as e:
            row["stress_opt"], row["note"] = None, str(e).split(";")[0]
        rows.append(row)
    return rows


def render_table(rows: list[dict]) -> str:
    """The markdown table of :func:`catalogue_rows`."""
    return markdown_table(
        HEADER,
        [[f"`{r['pe']}`", r["hook"], "yes" if r["relative"] else "no",
          "—" if r["stress_opt"] is None else f"{r['stress_opt']:.3f}", r["paper"]] for r in rows])


SCHEDULE_HEADER = ["schedule", "layer pattern", "window / chunk", "PE per layer kind",
                   "temperature", "source"]
SCHEDULE_INTRO = """## Per-layer schedules

Presets of `posjax.models.schedules.PRESETS` (`TransformerConfig(**preset_config(name))`): a
layer pattern repeated to `num_layers`, a PE per layer kind and the attention span of the
windowed kinds; in the length-generalisation experiment as `--set pes=sched_<name>` (window /
chunk rescaled to `schedule_span`). `posjax.pretrained.schedule_from_hf_config` reads the same
fields from a Hugging Face config.
"""


def render_schedules() -> str:
    """The markdown section listing the schedule presets."""
    from posjax.models.schedules import PRESET_SOURCES, PRESETS

    def pe(spec):
        opts = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in spec["options"].items())
        return f"`{spec['pe']}`" + (f" ({opts})" if opts else "")

    rows = []
    for name, p in PRESETS.items():
        span = p.get("sliding_window") or p.get("attention_chunk_size")
        temp = p.get("attention_temperature")
        rows.append([f"`{name}`", ", ".join(p["layer_types"]) + ("" if p["causal"] else
                                                                 " (bidirectional)"),
                     str(span), "; ".join(f"{k}: {pe(v)}" for k, v in p["layer_pe"].items()),
                     "—" if not temp else f"floor {temp['floor_scale']:g}, scale "
                                          f"{temp['attn_scale']:g} on NoPE layers",
                     PRESET_SOURCES[name]])
    return SCHEDULE_INTRO + "\n" + markdown_table(SCHEDULE_HEADER, rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = base_parser(__doc__.splitlines()[0], default_out="runs/catalogue")
    parser.add_argument("--docs", action="store_true",
                        help=f"also write the committed page {os.path.relpath(DOCS_PAGE)}")
    args = parser.parse_args(argv)
    rows = catalogue_rows()
    table = render_table(rows)
    print(table)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "catalogue.md"), "w") as f:
        f.write(table + "\n")
    if args.docs:
        with open(DOCS_PAGE, "w") as f:
            f.write(PAGE_INTRO + "\n" + table + "\n\n" + render_schedules() + "\n")
    write_json(os.path.join(args.out, "catalogue.json"),
               {"rows": rows, "corpus": CORPUS, "context": CONTEXT, "closed_forms": CLOSED,
                "stress": {"scale": "optimal", "metric": "chord", "P": "exact"},
                "versions": versions()})


if __name__ == "__main__":
    run_cli(main)
