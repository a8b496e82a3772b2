# Two commands do all set-up on a fresh machine with Python >= 3.11 and pip:
#   make demo   -- create the environment (uv, from uv.lock) and run the main job
#   make test   -- create the environment and run the test suite
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
VENV := .venv
STAMP := $(VENV)/.synced

.PHONY: demo test test-all env bench gpu-wheels clean

$(STAMP): pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --inexact
	@touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	@echo "== stress table: synthetic three-regime corpus (exact P known) =="
	$(UV) run --frozen python -m experiments.stress_table --dataset synthetic --quick --out runs/demo
	@echo "== stress table: real text, the standard library's docstrings (n = 128 stream windows) =="
	$(UV) run --frozen python -m experiments.stress_table --dataset stdlib --quick --out runs/demo_stdlib

# The suite compiles hundreds of tiny programs: XLA's cheaper CPU code generation makes that about
# a quarter faster (numerics are the same function; benchmarks and experiments keep the defaults).
# The elemental (non-fusion) emitters and one LLVM module per program (no parallel code-generation
# split, which on two busy cores only adds threads) cut the compile time of a one-layer model's
# forward from about 0.25 s to 0.06 s of CPU. XLA aborts on a flag it does not know: these are
# flags of the jaxlib pinned in uv.lock (0.10.2); check them when upgrading it.
# An XLA_FLAGS already set in the environment is used as it is.
TEST_XLA_FLAGS ?= --xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true \
  --xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1

test: $(STAMP)
	XLA_FLAGS="$${XLA_FLAGS:-$(TEST_XLA_FLAGS)}" $(UV) run --frozen pytest -q -n 2 --dist loadfile

test-all: $(STAMP)
	$(UV) run --frozen pytest -q -m "not gpu"

bench: $(STAMP)
	$(UV) run --frozen python -m benchmarks.geometry --quick --out runs/bench

# Pure-Python wheels that benchmarks/gpu_check.sh installs on a GPU machine without network
# (its image has JAX with CUDA and PyTorch; these may be missing or of another version there).
GPU_PY ?= 3.12
gpu-wheels:
	rm -rf .whl && python3 -m pip download --quiet --no-deps --only-binary=:all: \
	  --python-version $(GPU_PY) --platform any -d .whl flax==0.12.12 optax==0.2.8 \
	  x-transformers==2.31.10 einx==0.4.3 loguru==0.7.3 frozendict==2.5.1 \
	  torch-einops-utils==0.2.0

clean:
	rm -rf $(VENV) runs
