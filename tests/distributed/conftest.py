"""The `mpiexec` and `mpirun` fixtures: MPI jobs run as subprocesses (jobs.py)."""

from __future__ import annotations

import os

import pytest

from tests.conftest import import_reference

from .jobs import mpiexec_path, run_job


@pytest.fixture(scope="session")
def mpiexec():
    import_reference("mpi4py")
    path = mpiexec_path()
    if path is None:
        message = "mpiexec is not installed (pip install mpich), so the MPI jobs are skipped"
        if os.environ.get("TINYTENSOR_REQUIRE_REFERENCE") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def mpirun(mpiexec):
    """mpirun(program, *args, n=2, timeout=120) -> CompletedProcess (stdout+stderr in .output)."""

    def run(program, *args, n=2, timeout=120, launcher=None):
        return run_job([mpiexec, "-n", str(n)] if launcher is None else launcher, program,
                       *args, timeout=timeout)  # fmt: skip

    return run
