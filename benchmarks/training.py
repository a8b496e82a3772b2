"""Training-step throughput of a posjax encoder against x-transformers (PyTorch), per PE.

Usage::

    python -m benchmarks.training [--quick] [--out DIR] [--pes none,rope,...] [--size S]
        [--dtype float32|bfloat16] [--attention-impl xla|cudnn] [--threads N] [--mfu]
        [--no-keep-host-memory] [--positions static,batch]

For each PE (none, sinusoidal, rope, alibi, t5) one run builds, at the same size, a posjax
``LanguageModel`` (bidirectional encoder + token head) and an x-transformers
``TransformerWrapper(attn_layers=Encoder(...))`` with that library's own flag for the PE:

========== ======================================= ===========================================
pe         posjax                                  x-transformers
========== ======================================= ===========================================
none       ``pe="none"``                           ``use_abs_pos_emb=False``
sinusoidal ``pe="sinusoidal"``                     ``scaled_sinu_pos_emb=True``
rope       ``pe="rope"`` (all of head dim)         ``rotary_pos_emb=True, rotary_emb_dim=d_h``
alibi      ``pe="alibi"``                          ``alibi_pos_bias=True``
t5         ``pe="t5"`` (32 buckets, 128)           ``rel_pos_bias=True`` (32 buckets, 128)
========== ======================================= ===========================================

Each PE is timed in two rows (``--positions``): ``static``, the models' default positions
``arange(T)``, and ``batch``, explicit ``[B, T]`` positions passed in the batch (the path of
packed rows and decoding: the positions are then traced, so no position table can be computed
ahead of the step). In the ``batch`` row x-transformers gets the same ``[B, T]`` positions
(``pos=``) where it accepts them (RoPE, ALiBi); its scaled sinusoid takes only ``[T]``
positions and its T5 bias none, so those peers (and NoPE) run their default path.

Both train with AdamW on the same token batch (cross-entropy at every position), in training
mode, with PyTorch's fused SDPA where x-transformers allows it (``attn_flash=True``; not for T5).
Each model is warmed up (compilation excluded), then ``--rounds`` rounds of ``--steps`` steps
are timed alternately for the two libraries, synchronising at the end of each round
(``block_until_ready`` / ``torch.cuda.synchronize``); the steady-state step time is the best
round (the machine may be shared; the median is recorded too). Prints a table of tokens/s and
ratios and writes ``DIR/training.json`` (a list of rows ``{"pe", "positions", "posjax_tokens_per_s",
"torch_tokens_per_s", "ratio", ...}``, ``ratio = posjax / torch``) and ``DIR/training_meta.json``.

``--threads N`` confines the whole process to N CPUs (``os.sched_setaffinity``, before JAX
starts: the XLA:CPU client sizes its thread pool from the affinity mask, while
``--xla_cpu_multi_thread_eigen=false`` alone still let the step use every core) and sets
``torch.set_num_threads(N)`` / ``set_num_interop_threads(N)``; both libraries then run on the
same N CPUs. On CPU, the process keeps freed host memory (``posjax.cpu.keep_host_memory``:
glibc ``M_MMAP_MAX=0``, a high ``M_TRIM_THRESHOLD``), for both libraries alike: otherwise
XLA:CPU's per-step temporary buffer (above glibc's 32 MiB mmap ceiling) is mapped and
page-faulted in anew every step, which cost ~20 ms of an ~85 ms one-thread ``--quick`` step
(PyTorch's step: a few ms). ``--no-keep-host-memory`` measures with glibc's defaults. The
settings used are recorded in ``training_meta.json`` (``cpus``, ``keep_host_memory``).

On a GPU, ``--mfu`` (default there) adds the model FLOPs utilisation of the posjax step:
``(6 N + 12 L T d) tokens / step_time / peak``, with N the parameters that take part in matrix
products (all but the token-embedding and PE tables), L layers, T the sequence length and d the
width (the attention score and value products, forward and backward, bidirectional); the peak is
the dense bf16 tensor-core rate of the device (``--peak-tflops`` overrides it).

PyTorch and x-transformers are optional (``uv sync --group benchmarks``); without them only the
posjax numbers are reported.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

PES = ("none", "sinusoidal", "rope", "alibi", "t5")
POSITIONS = ("static", "batch")  # default arange(T); explicit [B, T] positions in the batch
TORCH_BATCH_POSITIONS = ("rope", "alibi")  # x-transformers PEs that accept pos [B, T]

# width, depth, heads, d_ff, vocab, seq, batch
SIZES = {
    "quick": dict(d_model=128, num_layers=2, num_heads=4, d_ff=512, vocab_size=1024, seq=128,
                  batch=8),
    "cpu": dict(d_model=256, num_layers=4, num_heads=4, d_ff=1024, vocab_size=8192, seq=128,
                batch=16),
    "bert-base": dict(d_model=768, num_layers=12, num_heads=12, d_ff=3072, vocab_size=30522,
                      seq=512, batch=32),
}

# Dense bf16 tensor-core peaks (TFLOP/s, no sparsity) by device-kind substring, first match.
PEAK_BF16_TFLOPS = (("H200", 989.0), ("H100 PCIe", 756.0), ("H100", 989.0), ("GH200", 989.0),
                    ("B200", 2250.0), ("A100", 312.0), ("L40S", 362.0), ("L4", 121.0),
                    ("A10G", 125.0), ("A10", 125.0), ("V100", 125.0), ("TPU v5p", 459.0),
                    ("TPU v5 lite", 197.0), ("TPU v4", 275.0))

TORCH_FLAGS = {
    "none": ({"use_abs_pos_emb": False}, {}),
    "sinusoidal": ({"scaled_sinu_pos_emb": True}, {}),
    "rope": ({"use_abs_pos_emb": False}, {"rotary_pos_emb": True}),
    "alibi": ({"use_abs_pos_emb": False}, {"alibi_pos_bias": True}),
    "t5": ({"use_abs_pos_emb": False}, {"rel_pos_bias": True, "rel_pos_num_buckets": 32,
                                        "rel_pos_max_distance": 128}),
}


def peak_tflops(device_kind: str) -> float | None:
    """Dense bf16 peak of a device kind, or None when unknown."""
    for key, value in PEAK_BF16_TFLOPS:
        if key.lower() in device_kind.lower():
            return value
    return None


def model_flops_per_step(matmul_params: int, size: dict) -> float:
    """Training FLOPs of one step: ``(6 N + 12 L T d) * tokens`` (PaLM appendix B convention,
    bidirectional attention, forward + backward)."""
    tokens = size["batch"] * size["seq"]
    attn = 12 * size["num_layers"] * size["seq"] * size["d_model"]
    return float(6 * matmul_params + attn) * tokens


def _timed_rounds(run_round, steps: int, rounds: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        run_round(steps)
        walls.append((time.perf_counter() - w0) / steps)
        cpus.append((time.process_time() - c0) / steps)
    return walls, cpus


class PosjaxRunner:
    """The posjax encoder and its jitted training step (``posjax.training.make_train_step``)."""

    def __init__(self, pe: str, size: dict, dtype: str, attention_impl: str | None, seed: int,
                 chunked_lm_loss: bool | None = None, positions: str = "static"):
        import jax
        import jax.numpy as jnp
        import numpy as np
        from flax import nnx

        from posjax.models import LanguageModel, TransformerConfig
        from posjax.training import TrainConfig, make_optimizer, make_train_step

        self.jax = jax
        cfg = TransformerConfig(
            vocab_size=size["vocab_size"], num_layers=size["num_layers"],
            d_model=size["d_model"], num_heads=size["num_heads"], d_ff=size["d_ff"],
            max_len=size["seq"], pe=pe, dtype=dtype, attention_impl=attention_impl,
            chunked_lm_loss=chunked_lm_loss)
        model = LanguageModel(cfg, rngs=nnx.Rngs(seed))
        tx = make_optimizer(TrainConfig(optimizer="adamw", learning_rate=1e-4,
                                        weight_decay=0.01))

        def loss_fn(m, batch, key):  # chunked or dense per cfg.chunked_lm_loss
            return m.loss(batch["tokens"], batch["targets"], positions=batch.get("positions"),
                          deterministic=True).mean(), {}

        self.graphdef, self.params, self.rest = nnx.split(model, nnx.Param, ...)
        self.opt_state = tx.init(self.params)
        self.step_fn = make_train_step(self.graphdef, loss_fn, tx, seed)
        rng = np.random.default_rng(seed)
        shape = (size["batch"], size["seq"])
        self.batch = {"tokens": jnp.asarray(rng.integers(0, size["vocab_size"], shape), jnp.int32),
                      "targets": jnp.asarray(rng.integers(0, size["vocab_size"], shape), jnp.int32)}
        if positions == "batch":  # explicit [B, T] positions, traced inside the step
            self.batch["positions"] = jnp.broadcast_to(jnp.arange(shape[1], dtype=jnp.int32),
                                                       shape)
        self.num_params = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(self.params))
        flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
        self.matmul_params = sum(int(np.prod(v.shape)) for path, v in flat
                                 if "embed" not in path and "pes" not in path)
        self.step = 0
        self.loss = None

    def run(self, steps: int) -> None:
        jnp = self.jax.numpy
        for _ in range(steps):
            self.params, self.opt_state, self.loss, _, _ = self.step_fn(
                self.params, self.rest, self.opt_state, self.batch,
                jnp.asarray(self.step, jnp.int32))
            self.step += 1
        self.jax.block_until_ready((self.params, self.loss))


class TorchRunner:
    """The x-transformers peer, same sizes, AdamW, fused SDPA where x-transformers allows it."""

    def __init__(self, pe: str, size: dict, dtype: str, seed: int, positions: str = "static"):
        import torch
        import torch.nn.functional as F
        from x_transformers import Encoder, TransformerWrapper

        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(seed)
        wrapper_flags, encoder_flags = TORCH_FLAGS[pe]
        encoder_flags = dict(encoder_flags)
        d_h = size["d_model"] // size["num_heads"]
        if pe == "rope":
            encoder_flags["rotary_emb_dim"] = d_h  # rotate the whole head, as posjax's default
        self.flash = pe != "t5"  # x-transformers refuses flash with the T5 bias
        model = TransformerWrapper(
            num_tokens=size["vocab_size"], max_seq_len=size["seq"],
            attn_layers=Encoder(dim=size["d_model"], depth=size["num_layers"],
                                heads=size["num_heads"], attn_dim_head=d_h,
                                ff_mult=size["d_ff"] / size["d_model"], attn_flash=self.flash,
                                **encoder_flags),
            **wrapper_flags).to(self.device)
        model.train()
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
        gen = torch.Generator().manual_seed(seed)
        shape = (size["batch"], size["seq"])
        self.x = torch.randint(0, size["vocab_size"], shape, generator=gen).to(self.device)
        self.y = torch.randint(0, size["vocab_size"], shape, generator=gen).to(self.device)
        self.kwargs = {}
        if positions == "batch" and pe in TORCH_BATCH_POSITIONS:
            self.kwargs["pos"] = torch.arange(shape[1]).expand(shape).contiguous().to(self.device)
        self.vocab = size["vocab_size"]
        self.autocast = dtype == "bfloat16"
        self.F = F
        self.num_params = sum(p.numel() for p in model.parameters())

    def run(self, steps: int) -> None:
        torch = self.torch
        for _ in range(steps):
            self.opt.zero_grad(set_to_none=True)
            with torch.autocast(self.device, dtype=torch.bfloat16, enabled=self.autocast):
                logits = self.model(self.x, **self.kwargs)
            loss = self.F.cross_entropy(logits.float().reshape(-1, self.vocab), self.y.reshape(-1))
            loss.backward()
            self.opt.step()
        if self.device == "cuda":
            torch.cuda.synchronize()


def _torch_available() -> str | None:
    """None when torch and x-transformers import, else the reason."""
    try:
        import torch  # noqa: F401
        import x_transformers  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return f"{type(e).__name__}: {e}"
    return None


def bench_pe(pe: str, size: dict, args, with_torch: bool, positions: str = "static"
             ) -> dict[str, Any]:
    tokens = size["batch"] * size["seq"]
    px = PosjaxRunner(pe, size, args.dtype, args.attention_impl, args.seed,
                      chunked_lm_loss=getattr(args, "chunked_ce", None), positions=positions)
    t0 = time.perf_counter()
    px.run(1)
    compile_s = time.perf_counter() - t0
    px.run(args.warmup)
    th = None
    if with_torch:
        th = TorchRunner(pe, size, args.dtype, args.seed, positions=positions)
        th.run(args.warmup + 1)
    px_w, px_c, th_w, th_c = [], [], [], []
    for _ in range(args.rounds):  # alternate, so load changes hit both libraries alike
        w, c = _timed_rounds(px.run, args.steps, 1)
        px_w += w
        px_c += c
        if th is not None:
            w, c = _timed_rounds(th.run, args.steps, 1)
            th_w += w
            th_c += c
    row: dict[str, Any] = {
        "pe": pe,
        "positions": positions,
        "torch_positions": (None if th is None else
                            "batch" if th.kwargs else "static"),
        "posjax_tokens_per_s": tokens / min(px_w),
        "torch_tokens_per_s": None if th is None else tokens / min(th_w),
        "ratio": None if th is None else min(th_w) / min(px_w),
        "posjax_step_ms": 1e3 * min(px_w), "posjax_step_ms_median": 1e3 * statistics.median(px_w),
        "posjax_cpu_ms_per_step": 1e3 * min(px_c), "posjax_compile_s": compile_s,
        "posjax_params": px.num_params, "posjax_final_loss": float(px.loss),
        "torch_step_ms": None if th is None else 1e3 * min(th_w),
        "torch_step_ms_median": None if th is None else 1e3 * statistics.median(th_w),
        "torch_cpu_ms_per_step": None if th is None else 1e3 * min(th_c),
        "torch_params": None if th is None else th.num_params,
        "torch_flash": None if th is None else th.flash,
        "tokens_per_step": tokens,
    }
    if args.mfu:
        flops = model_flops_per_step(px.matmul_params, size)
        dev = px.jax.devices()[0]
        peak = args.peak_tflops or peak_tflops(getattr(dev, "device_kind", ""))
        row["model_flops_per_step"] = flops
        row["posjax_tflops"] = flops / min(px_w) / 1e12
        row["peak_tflops"] = peak
        row["mfu"] = None if not peak else flops / min(px_w) / (peak * 1e12)
    return row


def print_table(rows: list[dict]) -> None:
    """tokens/s, ratio (posjax / torch), step times, and step time relative to NoPE (wall time;
    ``cpu/NoPE``: process CPU time, steadier when other jobs share the machine)."""
    def fmt(x, spec, suffix=""):
        return "-" if x is None else format(x, spec) + suffix

    head = (f"{'pe':11s} {'positions':9s} {'posjax tok/s':>13s} {'torch tok/s':>12s} {'ratio':>7s} "
            f"{'posjax ms':>10s} {'torch ms':>9s} {'px/NoPE':>8s} {'th/NoPE':>8s} "
            f"{'px cpu/NoPE':>12s} {'th cpu/NoPE':>12s}")
    if any("mfu" in r for r in rows):
        head += f" {'MFU':>6s}"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = (f"{r['pe']:11s} {r.get('positions', 'static'):9s} "
                f"{fmt(r['posjax_tokens_per_s'], '13,.0f')} "
                f"{fmt(r['torch_tokens_per_s'], '12,.0f'):>12s} {fmt(r['ratio'], '.2f', 'x'):>7s} "
                f"{fmt(r['posjax_step_ms'], '10.1f')} {fmt(r['torch_step_ms'], '.1f'):>9s} "
                f"{fmt(r.get('posjax_vs_nope'), '.2f', 'x'):>8s} "
                f"{fmt(r.get('torch_vs_nope'), '.2f', 'x'):>8s} "
                f"{fmt(r.get('posjax_cpu_vs_nope'), '.2f', 'x'):>12s} "
                f"{fmt(r.get('torch_cpu_vs_nope'), '.2f', 'x'):>12s}")
        if "mfu" in r:
            mfu = None if r["mfu"] is None else 100 * r["mfu"]
            line += f" {fmt(mfu, '.1f', '%'):>6s}"
        print(line)


def _set_threads(n: int | None) -> list[int] | None:
    """Confine the process (both libraries) to ``n`` CPUs, before JAX starts; returns them.

    The XLA:CPU client sizes its thread pool from the CPU affinity (``XLA_FLAGS`` has no thread
    count: ``intra_op_parallelism_threads=1`` there is not a flag and was silently ignored, and
    with ``--xla_cpu_multi_thread_eigen=false`` alone a "one-thread" step still ran on 2 cores).
    """
    if not n:
        return None
    from posjax.cpu import limit_threads
    return limit_threads(n)


def lm_loss_memory(tokens: int = 16384, vocab: int = 30522, d: int = 768) -> dict[str, Any]:
    """XLA's compiled temporary bytes of loss + gradients (hidden, weight, bias) of the
    vocabulary projection and cross-entropy, dense ``[tokens, V]`` logits vs
    :func:`posjax.training.chunked_cross_entropy` (BERT-base sizes by default; compiled only,
    not run, on the current backend)."""
    import jax
    import jax.numpy as jnp

    from posjax.training import chunked_cross_entropy, dense_cross_entropy
    from posjax.models.chunked_ce import auto_chunk_size

    shapes = (jax.ShapeDtypeStruct((tokens, d), jnp.float32),
              jax.ShapeDtypeStruct((d, vocab), jnp.float32),
              jax.ShapeDtypeStruct((vocab,), jnp.float32),
              jax.ShapeDtypeStruct((tokens,), jnp.int32))
    out: dict[str, Any] = {"tokens": tokens, "vocab": vocab, "d": d,
                           "chunk_size": auto_chunk_size(tokens, vocab),
                           "logits_f32_bytes": tokens * vocab * 4}
    for name, fn in (("dense", dense_cross_entropy), ("chunked", chunked_cross_entropy)):
        f = jax.jit(jax.value_and_grad(lambda h, W, b, y, fn=fn: fn(h, W, y, bias=b).mean(),
                                       argnums=(0, 1, 2)))
        mem = f.lower(*shapes).compile().memory_analysis()
        out[f"{name}_temp_bytes"] = int(mem.temp_size_in_bytes)
    out["temp_ratio"] = out["dense_temp_bytes"] / max(out["chunked_temp_bytes"], 1)
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small model (< 3 min)")
    ap.add_argument("--out", default="runs/benchmarks", help="directory for training.json")
    ap.add_argument("--pes", default=",".join(PES), help="comma-separated PE names")
    ap.add_argument("--size", choices=sorted(SIZES), default=None,
                    help="model size (default: quick with --quick, cpu on CPU, bert-base on GPU)")
    ap.add_argument("--batch", type=int, default=None, help="override the batch size")
    ap.add_argument("--seq", type=int, default=None, help="override the sequence length")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default=None,
                    help="computation dtype (default float32 on CPU, bfloat16 on GPU)")
    ap.add_argument("--attention-impl", choices=("xla", "cudnn"), default=None,
                    help="posjax attention implementation (default xla; cudnn falls back to xla "
                         "where the fused kernel cannot run)")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds per library")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps after compilation")
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op threads for both libraries (default: their own)")
    ap.add_argument("--no-torch", action="store_true", help="time posjax only")
    ap.add_argument("--mfu", action="store_true", default=None, help="report MFU (GPU default)")
    ap.add_argument("--peak-tflops", type=float, default=None, help="device peak for the MFU")
    ap.add_argument("--keep-host-memory", action=argparse.BooleanOptionalAction, default=True,
                    help="on CPU, keep freed host memory for reuse (glibc mallopt; both "
                         "libraries; default on)")
    ap.add_argument("--positions", default=",".join(POSITIONS),
                    help="rows per PE: static (default arange(T)) and/or batch (explicit [B, T])")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunked-ce", action=argparse.BooleanOptionalAction, default=None,
                    help="chunked LM cross-entropy (default: the TransformerConfig choice, on "
                         "from V = 8192)")
    args = ap.parse_args(argv)

    cpus = _set_threads(args.threads)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share a GPU with torch
    import jax

    kept = False
    if args.keep_host_memory and jax.default_backend() == "cpu":
        from posjax.cpu import keep_host_memory
        kept = keep_host_memory()

    on_gpu = jax.default_backend() == "gpu"
    size_name = args.size or ("quick" if args.quick else ("bert-base" if on_gpu else "cpu"))
    size = dict(SIZES[size_name])
    size["batch"] = args.batch or size["batch"]
    size["seq"] = args.seq or size["seq"]
    args.dtype = args.dtype or ("bfloat16" if on_gpu else "float32")
    args.mfu = on_gpu if args.mfu is None else args.mfu
    args.steps = args.steps or 3  # --quick: 3 x 8 rounds too (~1 min): shorter rounds were
    args.rounds = args.rounds or 8  # within load noise of each other on a shared 2-core machine
    pes = [p.strip() for p in args.pes.split(",") if p.strip()]
    unknown = sorted(set(pes) - set(PES))
    if unknown:
        ap.error(f"unknown PE(s) {unknown}; choose from {list(PES)}")
    kinds = [p.strip() for p in args.positions.split(",") if p.strip()]
    if not kinds or set(kinds) - set(POSITIONS):
        ap.error(f"--positions takes a comma-separated subset of {list(POSITIONS)}, got "
                 f"{args.positions!r}")

    with_torch = False
    if not args.no_torch:
        reason = _torch_available()
        if reason is None:
            with_torch = True
            import torch
            if args.threads:
                torch.set_num_threads(args.threads)
                try:
                    torch.set_num_interop_threads(args.threads)
                except RuntimeError:  # already set, or inter-op work already started
                    pass
        else:
            print(f"PyTorch/x-transformers not available ({reason}); reporting posjax only - "
                  "install the peers with `uv sync --group benchmarks`")

    t0 = time.time()
    rows = []
    for kind in kinds:
        for pe in pes:
            rows.append(bench_pe(pe, size, args, with_torch, positions=kind))
            print(f"  {pe} ({kind} positions): posjax {rows[-1]['posjax_step_ms']:.1f} ms/step"
                  + (f", torch {rows[-1]['torch_step_ms']:.1f} ms/step" if with_torch else ""),
                  flush=True)
    for r in rows:  # step time relative to NoPE (wall, and CPU time: steadier on a busy machine)
        nope = next((n for n in rows if n["pe"] == "none" and n["positions"] == r["positions"]),
                    None)
        for lib in ("posjax", "torch"):
            ok = nope is not None and r[f"{lib}_step_ms"] and nope[f"{lib}_step_ms"]
            r[f"{lib}_vs_nope"] = r[f"{lib}_step_ms"] / nope[f"{lib}_step_ms"] if ok else None
            r[f"{lib}_cpu_vs_nope"] = (r[f"{lib}_cpu_ms_per_step"] / nope[f"{lib}_cpu_ms_per_step"]
                                       if ok else None)
    print()
    print_table(rows)
    import flax
    import numpy as np

    import posjax

    meta = {"size": size_name, **size, "dtype": args.dtype,
            "attention_impl": args.attention_impl, "steps_per_round": args.steps,
            "rounds": args.rounds, "warmup": args.warmup, "threads": args.threads,
            "positions": kinds,
            "cpus": cpus, "keep_host_memory": kept,
            "timing": "best round (median also recorded); compile excluded",
            "device": str(jax.devices()[0]),
            "device_kind": getattr(jax.devices()[0], "device_kind", ""),
            "backend": jax.default_backend(), "posjax": posjax.__version__,
            "jax": jax.__version__, "flax": flax.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "wall_s": time.time() - t0,
            "chunked_ce": args.chunked_ce, "lm_loss_memory": lm_loss_memory()}
    if with_torch:
        import torch
        import x_transformers

        meta.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                    torch_interop_threads=torch.get_num_interop_threads(),
                    x_transformers=getattr(x_transformers, "__version__", None)
                    or _dist_version("x-transformers"))
    shown = ("size", "dtype", "device", "threads", "cpus", "keep_host_memory", "wall_s")
    print(f"\n{json.dumps({k: meta[k] for k in shown})}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "training.json")
    with open(path, "w") as fh:
        json.dump(rows, fh, indent=2)
    with open(os.path.join(args.out, "training_meta.json"), "w") as fh:
        json.dump(meta, fh, indent=2)
    print(f"wrote {path}")
    return rows


def _dist_version(name: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
