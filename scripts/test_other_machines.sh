#!/usr/bin/env bash
# Reruns the tests whose results depend on the machine under emulated other machines, one pass
# each; every pass must pass. Run after scripts/test.sh (which sets up); CI runs both (.ci/run).
#
#   bash scripts/test_other_machines.sh            # every pass
#   bash scripts/test_other_machines.sh generic    # one pass, by name
#
# What each pass changes (README, "Green on every machine", says what each covers):
#   avx2      an AVX2-only CPU: MKL on its AVX2 kernels, numba compiling for Zen 2, NumPy's loops
#             without their AVX-512 versions
#   generic   numba compiling for a generic x86-64 (no AVX, no FMA) from a cold cache
#   openblas  the products' blocks on OpenBLAS instead of MKL
#   numpy     the fused CPU kernels off: the NumPy reference path alone
#   one-core  one core (taskset -c 0), the thread count left to follow the load
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export TINYTENSOR_REQUIRE_REFERENCE=${TINYTENSOR_REQUIRE_REFERENCE:-1}

# The tests that depend on the CPU, the BLAS, the compiler target or the core count: the fused
# kernels and the products' pool, the numerics against PyTorch (ops, gradients, the PyTorch-style
# programs' float32 loss curves, HF logits), and training that must reproduce (resume, the
# optimizers' state, the seeded data pipeline). The explorer, the scripts' flags, the loader's
# hostile files and the exercises do not depend on the machine and run once, in scripts/test.sh.
MACHINE_TESTS=(
  tests/kernels_cpu
  tests/kernels/test_kernels_on_cpu.py
  tests/engine/test_numerics_edges.py
  tests/engine/test_vs_torch.py
  tests/engine/test_gradcheck.py
  tests/engine/test_inplace.py
  tests/nn/test_optim.py
  tests/nn/test_attention.py
  tests/nn/test_transformer.py
  tests/compat
  tests/models/test_hf_models.py
  tests/examples/test_training_infra.py
  tests/distributed/test_train_gpt.py
)

avx512_off="X86_V4 AVX512_ICL AVX512_SPR"  # NumPy's dispatch targets above AVX2 (numpy 2.x)

LAUNCH=()  # a command the pass runs pytest under (taskset)

run_pass() {
  local name=$1
  shift
  echo
  echo "=== emulated machine: $name: ${LAUNCH[*]} $*"
  # the machine line is the last line of each pass (tests/conftest.py)
  env "$@" "${LAUNCH[@]}" "$PY" -m pytest -q -p no:cacheprovider "${MACHINE_TESTS[@]}"
}

pass_avx2() {
  run_pass avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 NUMBA_CPU_NAME=znver2 NUMBA_CPU_FEATURES=+avx2 \
    NPY_DISABLE_CPU_FEATURES="$avx512_off" OPENBLAS_NUM_THREADS=1
}

pass_generic() {
  local cache status=0
  cache=$(mktemp -d)
  run_pass generic NUMBA_CPU_NAME=generic NUMBA_CACHE_DIR="$cache" OPENBLAS_NUM_THREADS=1 \
    || status=$?
  rm -rf "$cache"
  return $status
}

pass_openblas() { run_pass openblas TINYTENSOR_BLAS=openblas OPENBLAS_NUM_THREADS=1; }
pass_numpy() { run_pass numpy TINYTENSOR_CPU_KERNELS=numpy OPENBLAS_NUM_THREADS=1; }

pass_one_core() {
  # no *_NUM_THREADS: the pool counts the one core it may run on
  local status=0
  LAUNCH=(taskset -c 0)
  run_pass one-core -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS -u NUMBA_NUM_THREADS || status=$?
  LAUNCH=()
  return $status
}

[ $# -gt 0 ] || set -- avx2 generic openblas numpy one-core
passes=("$@")
failed=()
for p in "${passes[@]}"; do
  fn="pass_${p//-/_}"
  if ! declare -F "$fn" >/dev/null; then
    echo "test_other_machines.sh: no pass named '$p' (avx2, generic, openblas, numpy, one-core)" >&2
    exit 2
  fi
  "$fn" || failed+=("$p")
done
echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "emulated machines: failed: ${failed[*]}"
  exit 1
fi
echo "emulated machines: all ${#passes[@]} passes green (${passes[*]})"
