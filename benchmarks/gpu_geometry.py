"""Geometry kernels at scale on one accelerator, against the GPU reference a user would pick.

Usage::

    python -m benchmarks.gpu_geometry [--n 8192] [--V 30522] [--mds-n 8192] [--out DIR]

Run by ``benchmarks/gpu_check.sh``; it also runs on a CPU (use small sizes there). On the same
data, in one process, it times (best of ``--repeats`` after one untimed call, so compilation is
excluded; every result is waited for):

* ``hellinger_matrix`` (chord) of Dirichlet(0.1) rows ``[n, V]`` against a bare
  ``S @ S.T`` of the same shape at HIGHEST precision (the GEMM roofline; goal posjax <= 1.5x)
  and at the backend's default precision (TF32 on NVIDIA GPUs), against
  ``torch.cdist(sqrt(P), sqrt(P))`` (the chord distance) on the same kind of device when
  PyTorch runs there, and the row-sharded ``posjax.distributed.sharded_hellinger_matrix``;
* ``classical_mds`` (top 10 axes, subspace solver, and full ``eigh``) of the Hellinger matrix
  of the exact linear-mixing three-regime distributions at ``n = --mds-n``, against ``torch.linalg.eigh`` of the
  double-centred matrix (centring included);
* ``smacof`` (2-D, 300 Guttman updates from the classical-MDS start) at the same size.

Writes ``DIR/geometry_gpu.json`` after every section (an interrupted run keeps what it measured):
a dict with ``meta`` and ``rows`` ``{"task", "size", "posjax_s", "reference", "reference_s",
"speedup", "note"}`` as in :mod:`benchmarks.geometry`, plus the device's peak memory.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from typing import Any

import numpy as np

from benchmarks.geometry import best_time, row


def _torch_device():
    """``(torch, device)`` for the PyTorch reference on JAX's kind of device (``"cuda"`` when JAX
    runs on a GPU, ``"cpu"`` on a CPU), or ``(None, None)`` when PyTorch cannot run there."""
    import jax  # noqa: PLC0415

    try:
        import torch  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - any import failure means "no reference"
        return None, None
    if jax.default_backend() == "gpu":
        return (torch, "cuda") if torch.cuda.is_available() else (None, None)
    return (torch, "cpu") if jax.default_backend() == "cpu" else (None, None)


def _sync(torch, dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def _peak_bytes() -> int | None:
    import jax  # noqa: PLC0415

    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def bench_hellinger(n: int, V: int, repeats: int) -> list[dict]:
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    from jax import lax  # noqa: PLC0415

    import posjax.distributed as dist  # noqa: PLC0415
    import posjax.geometry as geo  # noqa: PLC0415

    size = f"n={n}, V={V}"
    P = jax.random.dirichlet(jax.random.key(0), jnp.full((V,), 0.1, jnp.float32), (n,))
    P = jax.block_until_ready(jnp.maximum(P, 1e-30) / jnp.maximum(P, 1e-30).sum(1, keepdims=True))
    t_px, D = best_time(lambda: geo.hellinger_matrix(P), repeats)
    S = jnp.sqrt(P)
    rows = []
    for name, prec in (("HIGHEST", lax.Precision.HIGHEST), ("DEFAULT", lax.Precision.DEFAULT)):
        gemm = jax.jit(lambda S, p=prec: jnp.dot(S, S.T, precision=p))
        t_gemm, _ = best_time(lambda: gemm(S), repeats)
        flops = 2.0 * n * n * V
        rows.append(row("hellinger (chord)", size, t_px,
                        f"bare jnp.dot(S, S.T), precision {name}", t_gemm,
                        f"posjax / GEMM = {t_px / t_gemm:.2f}x; GEMM {flops / t_gemm / 1e12:.1f} "
                        f"TFLOP/s; posjax {flops / t_px / 1e12:.1f} TFLOP/s"))
    t_sh, D_sh = best_time(lambda: dist.sharded_hellinger_matrix(P), repeats)
    err_sh = float(jnp.max(jnp.abs(D_sh - D)))
    del D_sh
    rows.append(row("hellinger (chord)", size, t_px,
                    f"posjax.distributed.sharded_hellinger_matrix ({len(jax.devices())} dev)",
                    t_sh, f"max |D - D_sharded| = {err_sh:.1e}"))
    torch, dev = _torch_device()
    if torch is not None:
        St = torch.from_numpy(np.asarray(S)).to(dev)
        del S

        def cdist():
            out = torch.cdist(St, St)
            _sync(torch, dev)
            return out

        t_th, D_th = best_time(cdist, repeats)
        err = float(np.abs(D_th.cpu().numpy() - np.asarray(D)).max())
        del D_th, St
        rows.append(row("hellinger (chord)", size, t_px,
                        f"torch.cdist(sqrt(P), sqrt(P)) [{dev}, fp32]", t_th,
                        f"max |D - D_torch| = {err:.1e}"))
    return rows


def bench_mds_smacof(n: int, V: int, repeats: int, smacof_iter: int) -> list[dict]:
    import jax.numpy as jnp  # noqa: PLC0415

    import posjax.geometry as geo  # noqa: PLC0415
    from posjax.data.synthetic import regime_weights  # noqa: PLC0415

    k = 10
    # the exact P of three_regime_corpus(n, V, mixing="linear"), formed on the device
    regimes = np.random.default_rng(0).dirichlet(np.full(V, 0.1), size=3)
    P = jnp.asarray(regime_weights(n, mixing="linear"), jnp.float32) @ jnp.asarray(
        regimes, jnp.float32)
    D = best_time(lambda: geo.hellinger_matrix(P / P.sum(1, keepdims=True)), 0)[1]
    del P
    size = f"n={n}, k={k}"
    t_top, res = best_time(lambda: geo.classical_mds(D, dim=k, solver="topk").coords, repeats)
    lam_top = np.asarray(geo.classical_mds(D, dim=k, solver="topk").eigenvalues, np.float64)
    t_eigh, _ = best_time(lambda: geo.classical_mds(D, dim=k, solver="eigh").coords, repeats)
    rows = []
    torch, dev = _torch_device()
    if torch is not None:
        Dt = torch.from_numpy(np.asarray(D)).to(dev)

        def th_eigh():
            B = -0.5 * Dt * Dt
            B = B - B.mean(0, keepdim=True)
            B = B - B.mean(1, keepdim=True)
            lam = torch.linalg.eigh(B)[0]
            _sync(torch, dev)
            return lam

        t_th, lam = best_time(th_eigh, repeats)
        lam_ref = np.sort(lam.double().cpu().numpy())[::-1][:k]
        rel = float(np.abs(lam_top - lam_ref).max() / lam_ref[0])
        del Dt
        ref, note = f"torch.linalg.eigh ({dev}, fp32, incl. centring)", (
            f"max |lambda - lambda_torch| / lambda_1 = {rel:.1e}")
    else:
        t_th, ref, note = None, "-", "no PyTorch for this device"
    rows.append(row("classical MDS top-k (subspace)", size, t_top, ref, t_th, note))
    rows.append(row("classical MDS (full eigh)", size, t_eigh, ref, t_th, ""))
    X0 = geo.classical_mds(D, dim=2).coords
    t_sm, (X, hist) = best_time(lambda: geo.smacof(D, X0, max_iter=smacof_iter, tol=0.0,
                                                    return_history=True), repeats)
    rows.append(row("SMACOF (2-D, raw stress)", f"n={n}, {len(hist) - 1} updates", t_sm, "-",
                    None, f"stress {float(hist[0]):.6f} -> {float(hist[-1]):.6f}; "
                          f"{1e3 * t_sm / max(1, len(hist) - 1):.2f} ms per update"))
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8192, help="rows of the Hellinger benchmark")
    ap.add_argument("--V", type=int, default=30522, help="vocabulary size")
    ap.add_argument("--mds-n", type=int, default=8192, help="size of the MDS/SMACOF benchmark")
    ap.add_argument("--smacof-iter", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="runs/benchmarks", help="directory for geometry_gpu.json")
    args = ap.parse_args(argv)
    for name in ("n", "V", "mds_n", "smacof_iter", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch shares the GPU
    import jax  # noqa: PLC0415

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "geometry_gpu.json")
    dev = jax.devices()[0]
    result: dict[str, Any] = {"meta": {
        "backend": jax.default_backend(), "device": str(dev),
        "device_kind": getattr(dev, "device_kind", ""), "jax": jax.__version__,
        "python": platform.python_version(), "timing": "best of repeats, compile excluded"},
        "rows": []}

    def save(section: str, t0: float) -> None:
        result["meta"][f"{section}_wall_s"] = time.perf_counter() - t0
        result["meta"]["peak_device_bytes"] = _peak_bytes()
        with open(path, "w") as fh:
            json.dump(result, fh, indent=2)

    t0 = time.perf_counter()
    result["rows"] += bench_hellinger(args.n, args.V, args.repeats)
    save("hellinger", t0)
    t0 = time.perf_counter()
    result["rows"] += bench_mds_smacof(args.mds_n, args.V, args.repeats, args.smacof_iter)
    save("mds_smacof", t0)
    for r in result["rows"]:
        print(f"{r['task']:32s} {r['size']:18s} posjax {r['posjax_s']:.4f}s  "
              f"{r['reference']}: {r['reference_s'] if r['reference_s'] is not None else '-'}  "
              f"{r['note']}")
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    main()
