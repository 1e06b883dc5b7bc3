#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Under this variable a missing torch/transformers fails the comparison tests instead of skipping.
export TINYTENSOR_REQUIRE_REFERENCE=${TINYTENSOR_REQUIRE_REFERENCE:-1}
# Tiny arrays: one BLAS thread is faster, and avoids oversubscribing a shared machine.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
exec "${PYTHON:-python3}" -m pytest -q "$@"
