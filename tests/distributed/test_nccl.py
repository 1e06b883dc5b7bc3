"""The NCCL backend on a GPU: one rank (no mpiexec), the collectives on CUDA tensors.

Skips with the reason where CuPy sees no GPU (the NCCL path cannot run on a CPU machine).
"""

import pytest

import tinytensor as tt

from .jobs import expect_ok, run_job


def test_nccl_backend_on_one_gpu():
    if not tt.cuda.is_available():
        pytest.skip("no CUDA GPU here (CuPy missing or no device): the NCCL backend is not run")
    expect_ok(run_job([], "nccl_one_rank.py", timeout=300), n=1)
