"""Benchmark of ``posjax.geometry`` against scipy, scikit-learn and a bare GEMM.

Usage::

    python -m benchmarks.geometry [--quick] [--out DIR] [--repeats R]

One run times, on the same data, posjax and the reference for each task:

* Hellinger matrix (chord) of Dirichlet(0.1) rows: ``hellinger_matrix`` vs
  ``scipy.spatial.distance.pdist(sqrt(P))``, ``sklearn.metrics.pairwise_distances(sqrt(P))`` and a
  bare ``jnp.dot(S, S.T)`` of the same shape (the GEMM roofline);
* classical MDS (top 10 axes) of a Hellinger matrix of the three-regime corpus estimated from
  20,000 samples per position: ``classical_mds`` (top-k solver, and full ``eigh``) vs
  ``sklearn.manifold.ClassicalMDS`` and ``scipy.sparse.linalg.eigsh``;
* SMACOF (2-D, from the same classical-MDS start, the same number of Guttman updates, hence equal
  final stress, which is reported) vs ``sklearn.manifold.smacof``;
* the memory case: ``hellinger_matrix`` at ``n = 8192, V = 30522`` (dense input, tiled GEMM) in a
  fresh subprocess, reporting the peak resident memory.

Compile time is excluded (every posjax function is called once before timing, and results are
waited for with ``block_until_ready``); each time is the best of ``--repeats`` runs (the numpy /
scipy / scikit-learn references need no warm-up; ``pdist``, ``smacof`` and the memory case run
once, the other slow references ``repeats // 2`` times). Prints one table and writes
``DIR/geometry.json``, a list of rows ``{"task", "size", "posjax_s", "reference", "reference_s",
"speedup", "note"}`` with ``speedup = reference_s / posjax_s`` (plus ``geometry_meta.json`` with
the versions). The memory case reports the peak resident memory during the calls. Timings on a
shared machine are noisy.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

FULL = {"hell_n": 2048, "V": 30522, "mds_n": 2048, "k": 10, "smacof_n": 2048,
        "smacof_iter": 300, "mem_n": 8192, "mem_V": 30522, "mem_block": 0, "samples": 20000}
QUICK = {"hell_n": 384, "V": 8192, "mds_n": 768, "k": 10, "smacof_n": 384,
         "smacof_iter": 300, "mem_n": 1024, "mem_V": 8192, "mem_block": 256, "samples": 5000}


def _block(x: Any) -> Any:
    import jax  # noqa: PLC0415

    return jax.block_until_ready(x)


def best_time(fn: Callable[[], Any], repeats: int, warmup: bool = True) -> tuple[float, Any]:
    """Best wall time of ``repeats`` calls (after one untimed warm-up call), and the last result."""
    out = _block(fn()) if warmup else None
    best = float("inf")
    for _ in range(max(1, repeats)):
        t = time.perf_counter()
        out = _block(fn())
        best = min(best, time.perf_counter() - t)
    return best, out


def dirichlet_rows(n: int, V: int, alpha: float, seed: int, chunk: int = 512) -> np.ndarray:
    """``[n, V]`` float32 Dirichlet(alpha) rows, generated in chunks (no float64 copy)."""
    rng = np.random.default_rng(seed)
    P = np.empty((n, V), np.float32)
    for s in range(0, n, chunk):
        g = rng.standard_gamma(alpha, size=(min(chunk, n - s), V), dtype=np.float32)
        g += np.float32(1e-30)  # no all-zero row even if every draw underflows
        P[s:s + chunk] = g / g.sum(axis=1, keepdims=True, dtype=np.float64).astype(np.float32)
    return P


def row(task: str, size: str, posjax_s: float | None, reference: str,
        reference_s: float | None, note: str = "", speedup: float | None = None
        ) -> dict[str, Any]:
    if speedup is None and posjax_s and reference_s:
        speedup = reference_s / posjax_s
    return {"task": task, "size": size, "posjax_s": posjax_s, "reference": reference,
            "reference_s": reference_s, "speedup": speedup, "note": note}


def bench_hellinger(cfg: dict, repeats: int) -> list[dict]:
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    from scipy.spatial.distance import pdist, squareform  # noqa: PLC0415
    from sklearn.metrics import pairwise_distances  # noqa: PLC0415

    import posjax.geometry as geo  # noqa: PLC0415

    n, V = cfg["hell_n"], cfg["V"]
    size = f"n={n}, V={V}"
    P_np = dirichlet_rows(n, V, 0.1, seed=0)
    P = jnp.asarray(P_np)
    t_px, D = best_time(lambda: geo.hellinger_matrix(P), repeats)
    S = jnp.sqrt(P)
    gemm = jax.jit(lambda S: jnp.dot(S, S.T, precision=jax.lax.Precision.HIGHEST))
    t_gemm, _ = best_time(lambda: gemm(S), repeats)
    del S
    t_pd, cond = best_time(lambda: pdist(np.sqrt(P_np)), 1, warmup=False)
    err = float(np.abs(np.asarray(D, np.float64) - squareform(cond)).max())
    del cond
    t_sk, Dsk = best_time(lambda: pairwise_distances(np.sqrt(P_np)), max(1, repeats // 2),
                          warmup=False)
    err_sk = float(np.abs(np.asarray(D, np.float64) - Dsk).max())
    return [
        row("hellinger (chord)", size, t_px, "scipy pdist(sqrt(P)) [float64]", t_pd,
            f"max |D - D_pdist| = {err:.1e}"),
        row("hellinger (chord)", size, t_px, "sklearn pairwise_distances(sqrt(P))", t_sk,
            f"max |D - D_sklearn| = {err_sk:.1e}"),
        row("hellinger (chord)", size, t_px, "bare jnp.dot(S, S.T) (GEMM roofline)", t_gemm,
            f"posjax / GEMM = {t_px / t_gemm:.2f}x (goal <= 1.5x)"),
    ]


def mds_data(n: int, V: int, samples: int):
    """Hellinger matrix of the three-regime corpus estimated from ``samples`` draws/position."""
    import jax.numpy as jnp  # noqa: PLC0415

    import posjax.geometry as geo  # noqa: PLC0415
    from posjax.data.synthetic import sample_distributions, three_regime_corpus  # noqa: PLC0415

    corpus = three_regime_corpus(n, V, mixing="linear", seed=0)
    P_hat, _ = sample_distributions(corpus.P, samples, seed=1)
    return _block(geo.hellinger_matrix(jnp.asarray(P_hat, jnp.float32)))


def bench_mds(cfg: dict, repeats: int, D) -> list[dict]:
    from scipy.sparse.linalg import eigsh  # noqa: PLC0415

    import posjax.geometry as geo  # noqa: PLC0415

    n, k = cfg["mds_n"], cfg["k"]
    size = f"n={n}, k={k}"
    D_np = np.asarray(D, np.float64)
    t_top, res = best_time(lambda: geo.classical_mds(D, dim=k, solver="topk").coords, repeats)
    lam_top = np.asarray(geo.classical_mds(D, dim=k, solver="topk").eigenvalues, np.float64)
    t_eigh, _ = best_time(lambda: geo.classical_mds(D, dim=k, solver="eigh").coords, repeats)
    rows = []
    try:
        from sklearn.manifold import ClassicalMDS  # noqa: PLC0415

        def sk():
            m = ClassicalMDS(n_components=k, metric="precomputed")
            m.fit(D_np)
            return m

        t_sk, model = best_time(sk, max(1, repeats // 2), warmup=False)
        lam_ref = np.asarray(model.eigenvalues_, np.float64)
        ref_name = "sklearn.manifold.ClassicalMDS (full eigh, float64)"
    except ImportError:  # older scikit-learn: an eigh-based reference written with scipy
        import scipy.linalg  # noqa: PLC0415

        def sk():
            B = -0.5 * (D_np ** 2)
            B -= B.mean(0)
            B -= B.mean(1, keepdims=True)
            return scipy.linalg.eigh(B, subset_by_index=(n - k, n - 1))[0][::-1]

        t_sk, lam_ref = best_time(sk, max(1, repeats // 2), warmup=False)
        ref_name = "scipy.linalg.eigh reference (sklearn ClassicalMDS not installed)"
    rel = float(np.abs(lam_top - lam_ref[:k]).max() / lam_ref[0])
    rows.append(row("classical MDS top-k (subspace)", size, t_top, ref_name, t_sk,
                    f"max |lambda - lambda_ref| / lambda_1 = {rel:.1e} (float32 vs float64)"))
    rows.append(row("classical MDS (full eigh)", size, t_eigh, ref_name, t_sk, ""))

    def scipy_eigsh():
        B = -0.5 * (D_np ** 2)
        B -= B.mean(0)
        B -= B.mean(1, keepdims=True)
        return eigsh(B, k=k, which="LA")

    t_es, _ = best_time(scipy_eigsh, repeats, warmup=False)
    rows.append(row("classical MDS top-k (subspace)", size, t_top,
                    "scipy.sparse.linalg.eigsh (ARPACK, float64, incl. centring)", t_es, ""))
    return rows


def bench_smacof(cfg: dict, repeats: int, D) -> list[dict]:
    import jax.numpy as jnp  # noqa: PLC0415
    from sklearn.manifold import smacof as sk_smacof  # noqa: PLC0415

    import posjax.geometry as geo  # noqa: PLC0415

    n, iters = cfg["smacof_n"], cfg["smacof_iter"]
    D = jnp.asarray(D)[:n, :n]
    X0 = geo.classical_mds(D, dim=2).coords
    D_np, X0_np = np.asarray(D, np.float64), np.asarray(X0, np.float64)

    def sk():
        return sk_smacof(D_np, metric=True, n_components=2, init=X0_np, n_init=1,
                         max_iter=iters, eps=0.0, return_n_iter=True)

    t_sk, (X_sk, _, n_it) = best_time(sk, 1, warmup=False)
    t_px, (X_px, hist) = best_time(
        lambda: geo.smacof(D, X0, max_iter=int(n_it), tol=0.0, return_history=True), repeats)
    s_px = float(geo.stress(D_np, coords=np.asarray(X_px, np.float64)))
    s_sk = float(geo.stress(D_np, coords=X_sk))
    s_0 = float(geo.stress(D_np, coords=X0_np))
    return [row("SMACOF (2-D, raw stress)", f"n={n}, {n_it} updates", t_px,
                "sklearn.manifold.smacof (float64)", t_sk,
                f"final stress posjax {s_px:.6f} ({len(hist) - 1} updates, float32) vs "
                f"sklearn {s_sk:.6f} (start {s_0:.6f})")]


def _rss_gb(field: str) -> float:
    """A memory field of /proc/self/status (Linux) in GiB (nan elsewhere)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 2 ** 20
    except OSError:
        pass
    return float("nan")


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (Linux ``clear_refs`` 5); False if unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def memory_case(n: int, V: int, block: int = 0) -> dict[str, Any]:
    """Runs in a fresh process: time and peak RSS of ``hellinger_matrix`` at ``[n, V]``
    (``block > 0`` forces that tile height; 0 picks it automatically)."""
    import jax.numpy as jnp  # noqa: PLC0415

    import posjax.geometry as geo  # noqa: PLC0415
    from posjax.geometry.gram import auto_block  # noqa: PLC0415

    P_np = dirichlet_rows(n, V, 0.1, seed=0)
    P = _block(jnp.asarray(P_np))
    del P_np
    gc.collect()  # the host copy is only freed once a reference cycle is collected
    before = _rss_gb("VmRSS")
    reset = _reset_peak_rss()  # so that the peak below excludes the data-generation copy
    bs = block or None
    t0 = time.perf_counter()
    _block(geo.hellinger_matrix(P, block_size=bs))  # includes compilation
    first = time.perf_counter() - t0
    t_run, D = best_time(lambda: geo.hellinger_matrix(P, block_size=bs), 1, warmup=False)
    peak = _rss_gb("VmHWM") if reset else resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    return {"n": n, "V": V, "seconds": t_run, "first_call_s": first, "peak_rss_gb": peak,
            "rss_before_gb": before, "peak_is_process_lifetime": not reset,
            "input_gb": n * V * 4 / 2 ** 30,
            "output_gb": n * n * 4 / 2 ** 30, "block": auto_block(n, V, bs, symmetric=True),
            "max_D": float(D.max())}


def bench_memory(cfg: dict) -> list[dict]:
    n, V = cfg["mem_n"], cfg["mem_V"]
    cmd = [sys.executable, "-m", "benchmarks.geometry", "--_memory-case", str(n), str(V),
           str(cfg["mem_block"])]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if proc.returncode != 0:
        return [row("hellinger memory case", f"n={n}, V={V}", None, "peak RSS", None,
                    f"failed: {proc.stderr.strip()[-300:]}")]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    note = (f"peak RSS {res['peak_rss_gb']:.2f} GiB during the calls (RSS before "
            f"{res['rss_before_gb']:.2f} GiB, holding input P {res['input_gb']:.2f} GiB float32; "
            f"output D {res['output_gb']:.2f} GiB; tiles of {res['block']} rows; first call "
            f"incl. compile {res['first_call_s']:.1f} s)")
    return [row("hellinger memory case (dense, tiled)", f"n={n}, V={V}", res["seconds"],
                "none run (pdist / sklearn need a float64 copy of sqrt(P); time grows as n^2 V)",
                None, note)]


def print_table(rows: list[dict]) -> None:
    def f(x):
        return "-" if x is None else f"{x:.3f}"

    head = (f"{'task':38s} {'size':22s} {'posjax s':>9s} {'ref s':>9s} {'speedup':>8s}  "
            "reference / note")
    print(head)
    print("-" * len(head))
    for r in rows:
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        print(f"{r['task']:38s} {r['size']:22s} {f(r['posjax_s']):>9s} {f(r['reference_s']):>9s} "
              f"{sp:>8s}  {r['reference']}" + (f"  [{r['note']}]" if r["note"] else ""))


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes (under a minute)")
    ap.add_argument("--out", default="runs/benchmarks", help="directory for geometry.json")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per measurement")
    ap.add_argument("--_memory-case", nargs=3, type=int, metavar=("N", "V", "BLOCK"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    if args._memory_case:
        print(json.dumps(memory_case(*args._memory_case)))
        return []
    cfg = QUICK if args.quick else FULL
    import jax  # noqa: PLC0415
    import sklearn  # noqa: PLC0415
    import scipy  # noqa: PLC0415

    rows: list[dict] = []
    t0 = time.time()
    rows += bench_hellinger(cfg, args.repeats)
    D = mds_data(cfg["mds_n"], cfg["V"], cfg["samples"])
    rows += bench_mds(cfg, args.repeats, D)
    rows += bench_smacof(cfg, args.repeats, D)
    rows += bench_memory(cfg)
    print_table(rows)
    meta = {"mode": "quick" if args.quick else "full", "repeats": args.repeats,
            "jax": jax.__version__, "scipy": scipy.__version__, "sklearn": sklearn.__version__,
            "numpy": np.__version__, "device": str(jax.devices()[0]),
            "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "wall_s": time.time() - t0}
    print(f"\n{meta}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "geometry.json")
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=2)
    with open(os.path.join(args.out, "geometry_meta.json"), "w") as fh:
        json.dump(meta, fh, indent=2)
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
