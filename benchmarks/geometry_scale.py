"""Long-context geometry without ``[n, n]`` matrices: matrix-free MDS and streaming stress.

Usage::

    python -m benchmarks.geometry_scale [--quick] [--out DIR] [--sizes N:V,N:V] [--pairs M]
    python -m benchmarks.geometry_scale --sizes 131072:32000 --dense-device --exact-max 0 \
        --dense-max 0        # the GPU size (benchmarks/gpu_check.sh)

For each size ``(n, V)`` a fresh subprocess (so that its peak resident memory is its own):

1. streams Zipf-distributed counts (``--samples`` tokens per position, default 1000) in blocks of
   positions into the CSR ``sqrt(P)`` (:func:`posjax.geometry.sqrt_rows_from_counts`); a dense
   ``[n, V]`` array is never formed;
2. top-16 classical MDS by :func:`posjax.geometry.mds_from_distributions`;
3. the stress of three PE embeddings (sinusoidal table ``d = 768``, RoPE orbit coordinates with
   ``d_h = 64``, ALiBi's 1-D positions with the mean slope of 12 heads; optimal scale) and of the
   MDS configuration (raw) against the chord Hellinger geometry: from sampled pairs with a 95 %
   interval (``M`` raised, from the first half-widths, until every half-width is <= 1 % of its
   estimate), and, where
   ``n <= --exact-max`` (16,384 by default), exactly by streamed tiles;
4. where ``n <= --dense-max`` (4096 by default): the dense path (``hellinger_matrix`` ->
   ``classical_mds``) for ``eig_rel_err = max_k |lambda_k - lambda_k^dense| / lambda_k^dense``
   and the relative error of the exact stress.

The synthetic corpus: every position mixes Zipf(1.1) distributions over ten vocabularies (the
same Zipf law over different permutations of the ids): a global one, a start-of-sequence one whose
weight fades over the first ~64 positions, and eight "topics" whose weights vary smoothly and
slowly along the sequence, so nearby positions have nearby distributions. Rows of ``DIR/geometry_scale.json``: ``{n, V, nnz_per_row, method,
seconds, peak_rss_gb, eig_rel_err}`` plus ``value``, ``ci_half_width_rel`` and ``pairs`` where
they apply; ``peak_rss_gb`` is the subprocess's peak so far (counts, MDS and stress
cumulatively); ``cpu_seconds`` is the CPU time of the step (all threads; on a machine shared
with other jobs it is the steadier figure: wall time then includes waiting for a core).
``geometry_scale_meta.json`` holds the versions and the machine load.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np

FULL_SIZES = [(4096, 32000), (16384, 32000), (65536, 32000)]
QUICK_SIZES = [(1024, 4000), (4096, 8000)]
K = 16


def zipf_count_blocks(n: int, V: int, samples: int, *, block: int = 2048, seed: int = 0,
                      exponent: float = 1.1, topics: int = 8):
    """Yield CSR count blocks ``[r, V]`` of the synthetic long-context corpus (see module doc)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, V + 1) ** exponent
    cdf = np.cumsum(p / p.sum())
    perms = np.stack([np.arange(V)] + [rng.permutation(V) for _ in range(topics + 1)])
    freq = rng.uniform(0.5, 4.0, topics)
    phase = rng.uniform(0, 2 * np.pi, topics)
    for a in range(0, n, block):
        i = np.arange(a, min(a + block, n))
        r = i.size
        t = i / n
        # component weights: a global Zipf, a start-of-sequence topic that fades, and topics
        # whose weights vary smoothly (slow periods) along the sequence
        logits = np.concatenate([np.full((r, 1), 1.0), (3.0 * np.exp(-i / 64.0))[:, None],
                                 1.5 * np.cos(2 * np.pi * freq * t[:, None] + phase)], axis=1)
        w = np.exp(logits)
        cw = np.cumsum(w / w.sum(1, keepdims=True), axis=1)
        u = rng.random((r, samples))
        comp = np.minimum((u[:, :, None] > cw[:, None, :]).sum(-1), topics + 1)
        ranks = np.minimum(np.searchsorted(cdf, rng.random((r, samples))), V - 1)
        words = perms[comp, ranks]
        keys = np.sort((np.arange(r)[:, None] * V + words).ravel())
        uniq, counts = np.unique(keys, return_counts=True)
        yield sp.csr_matrix((counts.astype(np.float32), (uniq // V, uniq % V)), shape=(r, V))


def pe_coords(n: int) -> dict[str, np.ndarray]:
    """Embeddings of three PEs at positions ``0..n-1`` (float32): the sinusoidal table
    (Vaswani et al., arXiv 1706.03762; ``d = 768``), RoPE orbit coordinates of a unit vector with
    equal energy per plane (Su et al., arXiv 2104.09864; ``d_h = 64``; their distances are the
    ``"kernel"`` mode of :func:`posjax.analysis.encoding_geometry.dist_rope`), and ALiBi's positions times the mean
    slope of 12 heads (Press et al., arXiv 2108.12409)."""
    from posjax.encodings import alibi_mean_slope

    pos = np.arange(n, dtype=np.float64)[:, None]
    w = 10000.0 ** (-2.0 * np.arange(384) / 768)
    sin = np.concatenate([np.sin(pos * w), np.cos(pos * w)], axis=1)
    th = 10000.0 ** (-2.0 * np.arange(32) / 64)
    rope = np.sqrt(2.0 / 64) * np.concatenate([np.cos(pos * th), np.sin(pos * th)], axis=1)
    alibi = alibi_mean_slope(12) * pos
    return {k: v.astype(np.float32) for k, v in
            (("sinusoidal", sin), ("rope", rope), ("alibi", alibi))}


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _cpu_s() -> float:
    """CPU seconds of this process, all threads (steadier than wall time on a busy machine)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def run_size(n: int, V: int, args) -> list[dict[str, Any]]:
    """Every method at one size, in this process."""
    import posjax.geometry as geo

    rows: list[dict[str, Any]] = []

    cpu = [_cpu_s()]

    def row(method, seconds, **extra):
        now = _cpu_s()
        cpu_s, cpu[0] = now - cpu[0], now
        cpu_s = extra.pop("cpu_seconds", cpu_s)
        rows.append({"n": n, "V": V, "nnz_per_row": nnz_per_row, "method": method,
                     "seconds": round(seconds, 3), "cpu_seconds": round(cpu_s, 3),
                     "peak_rss_gb": round(_rss_gb(), 3),
                     "eig_rel_err": extra.pop("eig_rel_err", None), **extra})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)

    nnz_per_row = None
    t = time.perf_counter()
    R = geo.sqrt_rows_from_counts(zipf_count_blocks(n, V, args.samples, seed=args.seed), V)
    nnz_per_row = round(R.nnz / n, 1)
    row("counts -> sqrt(P) CSR (streamed)", time.perf_counter() - t)
    if args.dense_device:  # the accelerator path: sqrt(P) dense in device memory, GEMM products
        import jax
        import jax.numpy as jnp

        t = time.perf_counter()
        S = jnp.concatenate([jnp.asarray(R.S[a:a + 4096].toarray()) for a in range(0, n, 4096)])
        R = geo.SqrtRows(jax.block_until_ready(S), n, g=R.g, col_sum=R.col_sum)
        row(f"sqrt(P) dense on {jax.devices()[0].platform}", time.perf_counter() - t)

    t = time.perf_counter()
    mds, info = geo.mds_from_distributions(R, K, seed=args.seed, return_info=True)
    lam = np.asarray(mds.eigenvalues, np.float64)
    rep = geo.topk_spectrum_report(lam, info["trace_b"])
    row(f"mds_from_distributions top-{K}", time.perf_counter() - t, residual=info["residual"],
        products=info["products"], captured=rep["captured"],
        lambda1_share=rep["lambda1_share"])

    coords = pe_coords(n)
    names = list(coords) + ["mds"]
    scales = {"sinusoidal": "optimal", "rope": "optimal", "alibi": "optimal", "mds": "raw"}
    sampled: dict[str, Any] = {}
    M = args.pairs
    t = time.perf_counter()
    while M > 0:  # --pairs 0: no sampled estimate  # one sample for all embeddings; raise M until every CI is within 1 %
        for scale in ("optimal", "raw"):
            which = [nm for nm in names if scales[nm] == scale]
            X = [coords[nm] if nm != "mds" else np.asarray(mds.coords) for nm in which]
            for nm, est in zip(which, geo.stress_from_distributions(
                    R, X, scale=scale, pairs=M, seed=args.seed)):
                sampled[nm] = est
        worst = max(e.half_width / e.value for e in sampled.values())
        if worst <= 0.01 or M >= args.max_pairs:
            break
        # the half-width falls as 1/sqrt(M): jump to the M that should reach 1 % (+20 %)
        M = min(int(M * 1.2 * (worst / 0.01) ** 2) + 1, args.max_pairs)
    secs, pass_cpu = time.perf_counter() - t, _cpu_s() - cpu[0]
    for nm in names if sampled else []:
        e = sampled[nm]
        row(f"stress sampled [{nm}, {scales[nm]}]", secs, cpu_seconds=round(pass_cpu, 3),
            value=e.value, ci_half_width_rel=e.half_width / e.value, pairs=e.num_pairs,
            note=f"one pass for all {len(names)} embeddings (its time on every row)")

    exact: dict[str, float] = {}
    if n <= args.exact_max:
        t = time.perf_counter()
        for scale in ("optimal", "raw"):
            which = [nm for nm in names if scales[nm] == scale]
            X = [coords[nm] if nm != "mds" else np.asarray(mds.coords) for nm in which]
            exact.update(zip(which, geo.stress_from_distributions(R, X, scale=scale)))
        secs, pass_cpu = time.perf_counter() - t, _cpu_s() - cpu[0]
        for nm in names:
            e = sampled.get(nm)
            row(f"stress exact streamed [{nm}, {scales[nm]}]", secs,
                cpu_seconds=round(pass_cpu, 3), value=exact[nm],
                sampled_within_ci=None if e is None else bool(abs(e.value - exact[nm])
                                                              <= e.half_width),
                note=f"one pass over the tiles for all {len(names)} embeddings (its time on "
                     "every row)")

    if n <= args.dense_max:
        import jax.numpy as jnp

        t = time.perf_counter()
        P = jnp.asarray(R.S.multiply(R.S).toarray())
        D = geo.hellinger_matrix(P)
        ref = geo.classical_mds(D, dim=K)
        lam_ref = np.asarray(ref.eigenvalues[:K], np.float64)
        err = float(np.max(np.abs(lam - lam_ref) / lam_ref))
        dense_stress = {nm: float(geo.stress(D, coords=coords[nm] if nm != "mds" else mds.coords,
                                             scale=scales[nm])) for nm in names}
        row("dense: hellinger_matrix + classical_mds + stress", time.perf_counter() - t,
            eig_rel_err=err, stress_rel_err=max(abs(exact[nm] - dense_stress[nm])
                                                / dense_stress[nm] for nm in exact)
            if exact else None)
        for r in rows:
            if r["method"].startswith("mds_from"):
                r["eig_rel_err"] = err
    return rows


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    ap.add_argument("--out", default="runs/benchmarks", help="directory for geometry_scale.json")
    ap.add_argument("--sizes", default=None, help="comma-separated n:V pairs (overrides)")
    ap.add_argument("--samples", type=int, default=1000, help="tokens per position")
    ap.add_argument("--pairs", type=int, default=200_000,
                    help="first sampled-pair count (0: no sampled estimate)")
    ap.add_argument("--max-pairs", type=int, default=3_200_000)
    ap.add_argument("--exact-max", type=int, default=16384, help="largest n of the exact stress")
    ap.add_argument("--dense-max", type=int, default=4096, help="largest n of the dense path")
    ap.add_argument("--dense-device", action="store_true",
                    help="hold sqrt(P) dense on the default device (GPU runs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # n:V, in the subprocess
    args = ap.parse_args(argv)
    if args.samples < 1:
        ap.error("--samples must be >= 1")
    if args.one:
        n, V = (int(x) for x in args.one.split(":"))
        print(json.dumps(run_size(n, V, args)))
        return []
    try:
        sizes = ([tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",")]
                 if args.sizes else (QUICK_SIZES if args.quick else FULL_SIZES))
    except ValueError:
        ap.error(f"--sizes must be comma-separated n:V pairs, got {args.sizes!r}")
    load0 = os.getloadavg()
    t0 = time.time()
    rows: list[dict] = []
    passthrough = [f"--samples={args.samples}", f"--pairs={args.pairs}",
                   f"--max-pairs={args.max_pairs}", f"--exact-max={args.exact_max}",
                   f"--dense-max={args.dense_max}", f"--seed={args.seed}"]
    passthrough += ["--dense-device"] if args.dense_device else []
    for n, V in sizes:
        t = time.time()
        proc = subprocess.run([sys.executable, "-m", "benchmarks.geometry_scale",
                               f"--one={n}:{V}", *passthrough], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"size n={n}, V={V} failed")
        rows += json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"n={n:>6} V={V}: {time.time() - t:.1f} s in total", flush=True)
    print_table(rows)
    import jax
    import scipy

    import posjax

    meta = {"sizes": sizes, "samples_per_position": args.samples, "k": K,
            "wall_s": time.time() - t0, "load_average_start": load0,
            "load_average_end": os.getloadavg(), "cpu_count": os.cpu_count(),
            "posjax": posjax.__version__, "jax": jax.__version__, "numpy": np.__version__,
            "scipy": scipy.__version__, "python": platform.python_version(),
            "platform": platform.platform(), "backend": jax.default_backend()}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "geometry_scale.json")
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=2)
    with open(os.path.join(args.out, "geometry_scale_meta.json"), "w") as fh:
        json.dump(meta, fh, indent=2)
    print(f"wrote {path}")
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"\n{'n':>6} {'V':>6} {'nnz/row':>8} {'seconds':>8} {'cpu s':>8} {'RSS GB':>7} "
          f"{'eig err':>8} "
          f"{'value':>8} {'CI rel':>7}  method")
    for r in rows:
        err = f"{r['eig_rel_err']:.1e}" if r["eig_rel_err"] is not None else "-"
        val = f"{r['value']:.4f}" if r.get("value") is not None else "-"
        ci = f"{r['ci_half_width_rel']:.2%}" if r.get("ci_half_width_rel") is not None else "-"
        print(f"{r['n']:>6} {r['V']:>6} {r['nnz_per_row']:>8} {r['seconds']:>8.2f} "
              f"{r['cpu_seconds']:>8.2f} "
              f"{r['peak_rss_gb']:>7.2f} {err:>8} {val:>8} {ci:>7}  {r['method']}")


if __name__ == "__main__":
    main()
