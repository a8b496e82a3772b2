#!/usr/bin/env bash
# GPU check of posjax, one short script (target: under 8 minutes on one H100/H200-class GPU).
#
#   bash benchmarks/gpu_check.sh            # results in $OUT (if set) or runs/gpu_check
#
# Steps, each bounded by `timeout` and each writing JSON into the results folder:
#   1. environment: find a Python whose JAX sees the GPU; if the JAX there is CPU-only, try to
#      install the matching CUDA build (`jax[cuda12]==<same version>`) from PyPI;
#   2. `pytest -m gpu` (cuDNN vs XLA attention with and without an ALiBi/T5 bias, a bf16 cuDNN
#      training step, sharded Hellinger on the GPU)            -> pytest_gpu.xml, pytest_gpu.json
#   3. geometry at n = 8192, V = 30522: benchmarks.geometry's memory case (single-device tiled
#      hellinger_matrix) and posjax.distributed.sharded_hellinger_matrix -> geometry_8192.json
#   4. training throughput and MFU of a BERT-base encoder in bf16 with cuDNN attention, per PE,
#      against x-transformers when PyTorch with CUDA is importable  -> training.json (+ _meta)
#   5. summary.json: the exit status of every step.
#
# Assumption (documented, not verified here): the GPU machine has only the carried working tree
# and may have no network. A CUDA-enabled JAX must then already be installed (in .venv or on
# the machine's Python); without one the script says so, writes summary.json with
# "status": "no_cuda_jax" and exits with status 3, instead of failing half-way. PyTorch is
# optional: without it the training table has posjax numbers only. GPU_CHECK_NO_INSTALL=1 skips
# the install attempt. For a dry run of the script's plumbing on a CPU machine:
#   GPU_CHECK_NO_INSTALL=1 GPU_CHECK_ALLOW_CPU=1 GEOMETRY_N=512 GEOMETRY_V=2048 \
#   TRAINING_ARGS="--quick --pes none,alibi --no-torch" bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/gpu_check}"
mkdir -p "$OUT"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX and PyTorch share the GPU in step 4
export PYTHONUNBUFFERED=1
START=$(date +%s)
declare -A STATUS

log() { echo "[gpu_check +$(( $(date +%s) - START ))s] $*"; }

summary() {  # summary.json from STATUS; $1 = overall status word
  {
    echo "{"
    echo "  \"status\": \"$1\", \"seconds\": $(( $(date +%s) - START )),"
    echo "  \"python\": \"${PY:-}\", \"steps\": {"
    local first=1
    for k in "${!STATUS[@]}"; do
      [ $first -eq 1 ] || echo ","
      printf '    "%s": %s' "$k" "${STATUS[$k]}"
      first=0
    done
    echo ""
    echo "  }"
    echo "}"
  } > "$OUT/summary.json"
}

# --- 1. environment ---------------------------------------------------------------------------
if [ -x .venv/bin/python ]; then PY="$(pwd)/.venv/bin/python"; else PY="$(command -v python3)"; fi
log "python: $PY"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
  | tee "$OUT/nvidia_smi.txt" || log "nvidia-smi not found"

backend() { "$PY" -c "import jax; print(jax.default_backend())" 2>/dev/null; }
if [ "$(backend)" != "gpu" ] && [ -z "${GPU_CHECK_NO_INSTALL:-}" ]; then
  JAXV="$("$PY" -c 'import jax; print(jax.__version__)' 2>/dev/null)"
  log "JAX ${JAXV:-missing} does not see a GPU; trying to install jax[cuda12]==${JAXV}"
  if command -v uv >/dev/null 2>&1; then
    timeout 150 uv pip install --python "$PY" "jax[cuda12]==${JAXV}" >"$OUT/install.log" 2>&1
  else
    timeout 150 "$PY" -m pip install "jax[cuda12]==${JAXV}" >"$OUT/install.log" 2>&1
  fi
  STATUS[install]=$?
fi
if [ "$(backend)" != "gpu" ] && [ -z "${GPU_CHECK_ALLOW_CPU:-}" ]; then
  log "no CUDA-enabled JAX (no network, install failed or skipped: see $OUT/install.log);" \
      "GPU checks not run"
  summary "no_cuda_jax"
  exit 3
fi
"$PY" - <<'EOF' | tee "$OUT/devices.json"
import json, jax
d = jax.devices()[0]
print(json.dumps({"jax": jax.__version__, "backend": jax.default_backend(),
                  "devices": [str(x) for x in jax.devices()],
                  "device_kind": getattr(d, "device_kind", "")}))
EOF

# --- 2. GPU-marked tests ----------------------------------------------------------------------
log "pytest -m gpu"
timeout 120 "$PY" -m pytest -m gpu -q -p no:cacheprovider --junitxml="$OUT/pytest_gpu.xml" \
  tests 2>&1 | tee "$OUT/pytest_gpu.log" | tail -n 25
STATUS[pytest_gpu]=${PIPESTATUS[0]}
"$PY" - "$OUT" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
out = sys.argv[1]
try:
    root = ET.parse(f"{out}/pytest_gpu.xml").getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    res = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    res["cases"] = [{"name": c.get("name"), "seconds": float(c.get("time", 0)),
                     "outcome": ("failed" if c.find("failure") is not None or
                                 c.find("error") is not None else
                                 "skipped" if c.find("skipped") is not None else "passed")}
                    for c in suite.iter("testcase")]
except Exception as e:  # noqa: BLE001
    res = {"error": f"{type(e).__name__}: {e}"}
json.dump(res, open(f"{out}/pytest_gpu.json", "w"), indent=2)
EOF

# --- 3. geometry at n = 8192, V = 30522 --------------------------------------------------------
GN="${GEOMETRY_N:-8192}"; GV="${GEOMETRY_V:-30522}"
log "geometry n=$GN V=$GV"
timeout 120 "$PY" - "$OUT" "$GN" "$GV" <<'EOF' 2>&1 | tail -n 20
import json, subprocess, sys, time
import numpy as np
out, n, V = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = {"n": n, "V": V}
# benchmarks.geometry's own memory case (single-device tiled hellinger_matrix), when present
try:
    p = subprocess.run([sys.executable, "-m", "benchmarks.geometry", "--_memory-case", str(n),
                        str(V), "0"], capture_output=True, text=True, timeout=90)
    res["single_device"] = (json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0
                            else {"error": p.stderr.strip()[-500:]})
except Exception as e:  # noqa: BLE001
    res["single_device"] = {"error": f"{type(e).__name__}: {e}"}
# the sharded path (row blocks over every visible GPU)
try:
    import jax
    from posjax import distributed as dist
    P = np.random.default_rng(0).dirichlet(np.full(V, 0.1), n).astype(np.float32)
    t = time.perf_counter(); D = jax.block_until_ready(dist.sharded_hellinger_matrix(P))
    first = time.perf_counter() - t
    t = time.perf_counter(); D = jax.block_until_ready(dist.sharded_hellinger_matrix(P))
    res["sharded"] = {"seconds": time.perf_counter() - t, "first_call_s": first,
                      "devices": len(jax.devices()), "max_D": float(D.max())}
except Exception as e:  # noqa: BLE001
    res["sharded"] = {"error": f"{type(e).__name__}: {e}"}
json.dump(res, open(f"{out}/geometry_{n}.json", "w"), indent=2)
print(json.dumps(res, indent=2))
EOF
STATUS[geometry]=${PIPESTATUS[0]}

# --- 4. training throughput and MFU -----------------------------------------------------------
log "training benchmark (BERT-base, bf16, cuDNN attention)"
TRAINING_ARGS="${TRAINING_ARGS:---size bert-base --dtype bfloat16 --attention-impl cudnn --mfu \
--pes none,rope,alibi,t5 --steps 10 --rounds 3}"
# shellcheck disable=SC2086  # word splitting of the argument string is intended
timeout 180 "$PY" -m benchmarks.training $TRAINING_ARGS --out "$OUT" 2>&1 \
  | tee "$OUT/training.log" | tail -n 20
STATUS[training]=${PIPESTATUS[0]}

ok=ok
for k in "${!STATUS[@]}"; do [ "${STATUS[$k]}" -eq 0 ] || ok=failed; done
summary "$ok"
log "done: $ok; results in $OUT"
[ "$ok" = ok ]
