#!/usr/bin/env bash
# Installs tinytensor and what its tests compare against, on a fresh machine (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# graphviz's `dot` renders the computation graphs (DOT source works without it).
if ! command -v dot >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq graphviz >/dev/null
  else
    echo "note: graphviz's 'dot' is missing; graphs are written as DOT source only" >&2
  fi
fi

# Headless Chromium and its WebDriver run the graph explorer's browser tests (tests/explore).
if ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1
  else
    echo "note: chromium/chromedriver are missing; the explorer's browser tests will skip" >&2
  fi
fi

# torch is pinned and installed before transformers: an unpinned torch pulls a multi-GB CUDA build.
"$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0"
"$PY" -m pip install -q --disable-pip-version-check -e ".[test,reference]"
# mpi4py and MPICH's mpiexec (pinned in the `distributed` extra): the tests run 2-rank MPI jobs.
"$PY" -m pip install -q --disable-pip-version-check -e ".[distributed]"
# MKL's matrix product for the CPU kernels' pool (optional: OpenBLAS otherwise); the tests run both.
"$PY" -m pip install -q --disable-pip-version-check -e ".[mkl]"
# CuPy and NVRTC (CUDA 13.0) compile the attention kernels to sm_80/sm_90 cubins without a GPU,
# so the kernel tests run on every machine. Pinned: the compile check uses a CuPy internal.
"$PY" -m pip install -q --disable-pip-version-check "cupy-cuda13x==14.2.0" "nvidia-cuda-nvrtc==13.0.88"
