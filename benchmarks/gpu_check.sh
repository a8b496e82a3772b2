#!/usr/bin/env bash
# GPU check of posjax: one short prepared script (411 s with every step on one H200).
#
#   bash benchmarks/gpu_check.sh      # results in $GPU_CHECK_OUT, else $OUT, else runs/gpu_check
#
# Steps; each is bounded by `timeout` inside an overall budget (GPU_CHECK_BUDGET_S, default 480 s)
# and writes its JSON into the results folder as soon as it has it:
#   0. packages: a GPU machine without network gets the pure-Python packages the image may lack
#      (flax, optax, x-transformers and its needs) as wheels in .whl/ (`make gpu-wheels` fetches
#      them where pip works); they are installed with --no-index into a private folder put first
#      on PYTHONPATH (not for the project's .venv, unless GPU_CHECK_WHEELS=1). JAX with CUDA itself must already be there (in .venv or the machine's
#      python3); if no JAX sees a GPU and pip can reach an index, `jax[cuda12]==<same version>`
#      is tried;                                                   -> install.log
#   1. environment: devices and the versions actually imported       -> environment.json
#   2. the GPU-marked tests (`pytest -m gpu`: cuDNN vs XLA attention with and without an ALiBi /
#      T5 bias, bf16 cuDNN training steps, sharded and full-float32 Hellinger on the GPU)
#                                                                     -> pytest_gpu.{xml,json,log}
#   3. geometry at n = 8192, V = 30522 (Hellinger vs GEMM roofline and torch.cdist, sharded path,
#      classical MDS vs torch.linalg.eigh, SMACOF; benchmarks.gpu_geometry) -> geometry_gpu.json
#   3b. long-context geometry at n = 131,072, V = 32,000 without [n, n] arrays (matrix-free MDS,
#      sampled-pair stress; benchmarks.geometry_scale)                  -> geometry_scale.json
#   4. training throughput and MFU of a BERT-base encoder (12 x 768, T = 512, batch 32) in bf16
#      with cuDNN attention, one process per PE, against x-transformers on the same GPU
#                                                  -> training_<pe>/training.json, training.json
#   5. the step taken apart (forward+backward, body without the LM head, optimiser; LM head in
#      bf16 and in float32; benchmarks.step_profile)                  -> step_profile.json
#   6. if the budget allows, step 4 with XLA attention (GPU_CHECK_XLA_PES, default none alibi)
#                                                                     -> training_xla.json
#   6b. ensemble vs sequential training of 8 seeds (benchmarks.ensemble)  -> ensemble/ensemble.json
#   6c. the `gpu` preset of every experiment (GPU_CHECK_EXPERIMENTS, default all five; each
#      capped at GPU_CHECK_EXPERIMENT_S, default 480 s; with the default budget they run only when
#      the earlier steps are skipped, e.g. GPU_CHECK_SKIP=geometry,training,profile,xla, or with a
#      larger GPU_CHECK_BUDGET_S)                      -> experiments/<name>/{results.json,report.md}
#   7. summary.json: exit status and seconds of every step.
# GPU_CHECK_SKIP=geometry,training,... skips steps by the first word of their name (pytest,
# geometry, geoscale, training, xla, profile, ensemble, experiment).
# Without a CUDA-enabled JAX the script writes summary.json with "status": "no_cuda_jax" and exits
# with status 3 instead of failing half-way. Dry run of the plumbing on a CPU machine:
#   GPU_CHECK_ALLOW_CPU=1 GPU_CHECK_SMALL=1 bash benchmarks/gpu_check.sh
# GPU_CHECK_PYTHON picks the interpreter (default: .venv/bin/python if present, else python3).
set -uo pipefail
cd "$(dirname "$0")/.."
RES="${GPU_CHECK_OUT:-${OUT:-runs/gpu_check}}"
mkdir -p "$RES"
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # JAX and PyTorch share the GPU
export PYTHONUNBUFFERED=1
START=$(date +%s)
BUDGET="${GPU_CHECK_BUDGET_S:-480}"
declare -A STATUS SECONDS_OF

log() { echo "[gpu_check +$(( $(date +%s) - START ))s] $*"; }

# seconds a step may take: its own cap, or what is left of the budget (minus 10 s for the rest)
cap() {
  local left=$(( BUDGET - ($(date +%s) - START) - 10 ))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# run a step: step NAME CAP LOG command...  (output to LOG, its tail on the console; records the
# exit status and seconds; no pipe around it, so the records stay in this shell)
step() {
  local name=$1 limit t0 logfile=$3; limit=$(cap "$2"); shift 3
  if [[ ",${GPU_CHECK_SKIP:-}," == *",${name%%_*},"* ]]; then
    log "$name: skipped (GPU_CHECK_SKIP)"; STATUS[$name]='"skipped"'; return
  fi
  if [ "$limit" -lt 20 ]; then
    log "$name: skipped (budget spent)"; STATUS[$name]='"skipped"'; return
  fi
  log "$name (at most ${limit}s)"
  t0=$(date +%s)
  timeout "$limit" "$@" > "$logfile" 2>&1
  STATUS[$name]=$?
  SECONDS_OF[$name]=$(( $(date +%s) - t0 ))
  tail -n "${TAIL:-6}" "$logfile"
}

summary() {  # summary.json from STATUS; $1 = overall status word
  {
    echo "{"
    echo "  \"status\": \"$1\", \"seconds\": $(( $(date +%s) - START )), \"budget_s\": $BUDGET,"
    echo "  \"python\": \"${PY:-}\", \"steps\": {"
    local first=1
    for k in "${!STATUS[@]}"; do
      [ $first -eq 1 ] || echo ","
      printf '    "%s": {"status": %s, "seconds": %s}' "$k" "${STATUS[$k]}" "${SECONDS_OF[$k]:-0}"
      first=0
    done
    echo ""
    echo "  }"
    echo "}"
  } > "$RES/summary.json"
}

# --- 0. packages ------------------------------------------------------------------------------
if [ -n "${GPU_CHECK_PYTHON:-}" ]; then PY="$GPU_CHECK_PYTHON"
elif [ -x .venv/bin/python ]; then PY="$(pwd)/.venv/bin/python"; else PY="$(command -v python3)"; fi
log "python: $PY"
# the project's own .venv has its locked packages: carried wheels are for a foreign python3 only
WHEELS="${GPU_CHECK_WHEELS:-$([ "$PY" = "$(pwd)/.venv/bin/python" ] && echo 0 || echo 1)}"
if [ "$WHEELS" = 1 ] && compgen -G ".whl/*.whl" >/dev/null; then
  SITE="${TMPDIR:-/tmp}/posjax_gpu_site"
  log "installing $(ls .whl/*.whl | wc -l) carried wheels into $SITE"
  if "$PY" -m pip --version >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" .whl/*.whl >"$RES/install.log" 2>&1
  else  # a uv-made virtual environment has no pip
    uv pip install -q --python "$PY" --no-index --no-deps --target "$SITE" .whl/*.whl \
      >"$RES/install.log" 2>&1
  fi
  STATUS[wheels]=$?
  export PYTHONPATH="$SITE:$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}"
fi
backend() { "$PY" -c "import jax; print(jax.default_backend())" 2>/dev/null; }
if [ "$(backend)" != "gpu" ] && [ -z "${GPU_CHECK_NO_INSTALL:-}${GPU_CHECK_ALLOW_CPU:-}" ]; then
  JAXV="$("$PY" -c 'import jax; print(jax.__version__)' 2>/dev/null)"
  log "JAX ${JAXV:-missing} does not see a GPU; trying pip install jax[cuda12]==${JAXV}"
  timeout "$(cap 150)" "$PY" -m pip install "jax[cuda12]==${JAXV}" >>"$RES/install.log" 2>&1
  STATUS[install]=$?
fi
if [ "$(backend)" != "gpu" ] && [ -z "${GPU_CHECK_ALLOW_CPU:-}" ]; then
  log "no CUDA-enabled JAX (see $RES/install.log); GPU checks not run"
  summary "no_cuda_jax"
  exit 3
fi

# --- 1. environment ---------------------------------------------------------------------------
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader \
  > "$RES/nvidia_smi.txt" 2>/dev/null || echo "nvidia-smi not found" > "$RES/nvidia_smi.txt"
"$PY" - "$RES" <<'EOF'
import importlib, importlib.metadata, json, platform, sys
import jax
mods = {}
for name, dist in (("jax", "jax"), ("jaxlib", "jaxlib"), ("flax", "flax"), ("optax", "optax"),
                   ("orbax.checkpoint", "orbax-checkpoint"), ("numpy", "numpy"),
                   ("torch", "torch"), ("x_transformers", "x-transformers")):
    try:
        m = importlib.import_module(name)
        mods[name] = getattr(m, "__version__", None) or importlib.metadata.version(dist)
    except Exception as e:  # noqa: BLE001
        mods[name] = f"missing ({type(e).__name__})"
d = jax.devices()[0]
env = {"backend": jax.default_backend(), "devices": [str(x) for x in jax.devices()],
       "device_kind": getattr(d, "device_kind", ""), "python": platform.python_version(),
       "versions": mods}
json.dump(env, open(f"{sys.argv[1]}/environment.json", "w"), indent=2)
print(json.dumps(env))
EOF

# --- 2. GPU-marked tests ----------------------------------------------------------------------
mapfile -t GPU_TESTS < <(grep -rl "pytest.mark.gpu" tests --include="test_*.py")
TAIL=15 step pytest_gpu 120 "$RES/pytest_gpu.log" "$PY" -m pytest -m gpu -q -p no:cacheprovider \
  --junitxml="$RES/pytest_gpu.xml" "${GPU_TESTS[@]}"
"$PY" - "$RES" <<'EOF'
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
if [ -n "${GPU_CHECK_SMALL:-}" ]; then GEO="--n 256 --V 2048 --mds-n 256 --repeats 1"; else
  GEO="--n ${GEOMETRY_N:-8192} --V ${GEOMETRY_V:-30522} --mds-n ${GEOMETRY_N:-8192}"; fi
# shellcheck disable=SC2086  # word splitting of the argument string is intended
TAIL=12 step geometry 140 "$RES/geometry.log" "$PY" -m benchmarks.gpu_geometry $GEO --out "$RES"

# --- 3b. long-context geometry without [n, n] matrices: n = 131,072, V = 32,000 ----------------
# (top-16 matrix-free MDS + sampled-pair stress of three PEs, sqrt(P) dense in GPU memory; goal
# <= 60 s for MDS + stress; benchmarks.geometry_scale)                  -> geometry_scale.json
if [ -n "${GPU_CHECK_SMALL:-}" ]; then GSC="--sizes 2048:4000"; else
  GSC="--sizes ${GEOSCALE_SIZES:-131072:32000} --exact-max 0"; fi
# shellcheck disable=SC2086
TAIL=16 step geoscale 150 "$RES/geometry_scale.log" "$PY" -m benchmarks.geometry_scale $GSC \
  --dense-device --dense-max 0 --out "$RES"

# --- 4. training throughput and MFU, one process per PE ----------------------------------------
if [ -n "${GPU_CHECK_SMALL:-}" ]; then
  TRAIN="--quick --dtype float32 --steps 1 --rounds 1"; PES="none alibi"
else
  TRAIN="--size bert-base --dtype bfloat16 --mfu --steps 10 --rounds 3"; PES="none rope alibi t5"
fi
for pe in $PES; do
  # shellcheck disable=SC2086
  TAIL=4 step "training_$pe" 80 "$RES/training_$pe.log" "$PY" -m benchmarks.training $TRAIN \
    --attention-impl cudnn --pes "$pe" --out "$RES/training_$pe"
done

# --- 5. where the step time goes (forward / backward / head / optimiser), LM head bf16 vs f32 ---
if [ -n "${GPU_CHECK_SMALL:-}" ]; then PROF="--size quick --dtype float32 --steps 1 --rounds 1"
else PROF="--size bert-base --dtype bfloat16 --attention-impl cudnn --pieces grad,body,step"; fi
# shellcheck disable=SC2086
TAIL=10 step profile 100 "$RES/step_profile.log" "$PY" -m benchmarks.step_profile $PROF --out "$RES"

# --- 6. XLA attention instead of cuDNN (posjax only), if the budget allows --------------------
for pe in ${GPU_CHECK_XLA_PES:-none alibi}; do
  # shellcheck disable=SC2086
  TAIL=3 step "xla_$pe" 60 "$RES/training_xla_$pe.log" "$PY" -m benchmarks.training \
    $TRAIN --attention-impl xla --no-torch --pes "$pe" --out "$RES/training_xla_$pe"
done
"$PY" - "$RES" <<'EOF'  # merge the per-PE rows, step time relative to NoPE
import glob, json, os, sys
out = sys.argv[1]
for kind, pattern in (("training", "training_[!x]*"), ("training_xla", "training_xla_*")):
    rows = []
    for d in sorted(glob.glob(os.path.join(out, pattern))):
        f = os.path.join(d, "training.json")
        if os.path.isdir(d) and os.path.exists(f):
            meta = json.load(open(os.path.join(d, "training_meta.json")))
            rows += [dict(r, attention_impl=meta.get("attention_impl"),
                          device_kind=meta.get("device_kind")) for r in json.load(open(f))]
    nope = next((r for r in rows if r["pe"] == "none"), None)
    for r in rows:
        if nope:
            r["posjax_vs_nope"] = r["posjax_step_ms"] / nope["posjax_step_ms"]
            if r.get("torch_step_ms") and nope.get("torch_step_ms"):
                r["torch_vs_nope"] = r["torch_step_ms"] / nope["torch_step_ms"]
    json.dump(rows, open(os.path.join(out, f"{kind}.json"), "w"), indent=2)
    for r in rows:
        mfu = r.get("mfu")
        print(f"{kind:13s} {r['pe']:6s} posjax {r['posjax_tokens_per_s']:>10,.0f} tok/s "
              f"({r['posjax_step_ms']:.1f} ms)  torch "
              + (f"{r['torch_tokens_per_s']:>10,.0f} tok/s  ratio {r['ratio']:.2f}x"
                 if r.get("torch_tokens_per_s") else "-")
              + (f"  MFU {100 * mfu:.1f}%" if mfu else ""))
EOF

# --- 6b. ensemble training vs sequential runs (8 seeds of the Latin-square model) ---------------
if [ -n "${GPU_CHECK_SMALL:-}" ]; then ENS="--quick --steps 10"; else ENS=""; fi
# shellcheck disable=SC2086
TAIL=12 step ensemble 90 "$RES/ensemble.log" "$PY" -m benchmarks.ensemble $ENS --out "$RES/ensemble"

# --- 6c. the gpu preset of each experiment -----------------------------------------------------
EXPERIMENTS="${GPU_CHECK_EXPERIMENTS-init_sweep network_simulation additive_vs_multiplicative length_generalization stress_table}"
for exp in $EXPERIMENTS; do
  if [ -n "${GPU_CHECK_SMALL:-}" ]; then
    case $exp in  # plumbing only: the quick preset, one seed, a few steps
      init_sweep) EXTRA="--set max_steps=2 sigmas=0.1 fixed_pes=sin2d n_per_condition=12";;
      network_simulation) EXTRA="--set steps=2 sigmas=0.1 sim_steps=400";;
      additive_vs_multiplicative) EXTRA="--set steps=2 pes=rope count_pes= sweep_k=";;
      length_generalization) EXTRA="--set steps=2 pes=none n_train=64 per_length=2";;
      *) EXTRA="--set steps=2 encodings=none,rope";;
    esac
    PRESET="--preset quick --seeds 2 $EXTRA"
  else
    PRESET="--preset gpu"
  fi
  [ "$exp" = stress_table ] && PRESET="--dataset synthetic $PRESET"
  # shellcheck disable=SC2086
  TAIL=8 step "experiment_$exp" "${GPU_CHECK_EXPERIMENT_S:-480}" "$RES/experiment_$exp.log" \
    "$PY" -m "experiments.$exp" $PRESET --out "$RES/experiments/$exp"
done
# --- 6d. fine-tuning BERT-base with each PE swapped in, when weights and SST-2 are on disk ------
# POSJAX_BERT_DIR: bert-base-uncased (config.json, model.safetensors, vocab.txt); POSJAX_DATA_DIR:
# SST-2 train/validation files (README, "pretrained checkpoints"). Needs GPU_CHECK_BUDGET_S >= 900.
if [ -f "${POSJAX_BERT_DIR:-/nonexistent}/model.safetensors" ] && [ -d "${POSJAX_DATA_DIR:-/nonexistent}" ]; then
  TAIL=10 step finetune 480 "$RES/finetune.log" "$PY" -m experiments.finetune_pe --preset gpu \
    --model "$POSJAX_BERT_DIR" --dataset sst2 --data-dir "$POSJAX_DATA_DIR" --out "$RES/finetune"
else
  log "finetune: skipped (POSJAX_BERT_DIR / POSJAX_DATA_DIR not set)"; STATUS[finetune]='"skipped"'
fi

# --- 7. summary ---------------------------------------------------------------------------------
ok=ok
for k in "${!STATUS[@]}"; do
  [ "${STATUS[$k]}" = 0 ] || [ "${STATUS[$k]}" = '"skipped"' ] || ok=failed
done
summary "$ok"
log "done: $ok; results in $RES"
[ "$ok" = ok ]
