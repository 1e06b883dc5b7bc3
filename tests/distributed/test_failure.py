"""A failing rank ends the whole job, non-zero, with its error printed; it never hangs."""

import sys
import time

import pytest

from .jobs import run_job


@pytest.mark.parametrize(
    "mode, message",
    [
        ("raise", "rank 1 failed on purpose"),  # after init_process_group
        ("early", "rank 1 failed before joining"),  # before it: the others wait in MPI_Init
    ],
)
def test_a_rank_that_raises_aborts_the_job(mpiexec, mode, message):
    start = time.monotonic()
    done = run_job([mpiexec, "-n", "2"], "failing_rank.py", mode, timeout=60)
    assert done.returncode != 0, done.output
    assert message in done.output and "[rank 1] uncaught ValueError" in done.output, done.output
    assert "passed the collective" not in done.output
    assert time.monotonic() - start < 50


def test_a_rank_that_exits_non_zero_aborts_the_job_under_the_launcher(mpiexec):
    launcher = [sys.executable, "-m", "tinytensor.distributed.run", "--nproc-per-node", "2"]
    done = run_job(launcher, "failing_rank.py", "exit", timeout=60, python=False)
    assert done.returncode == 3, done.output
    assert "[rank 1] exited with status 3" in done.output


def test_a_rank_that_exits_non_zero_ends_the_job_under_bare_mpiexec(mpiexec):
    # no exit hook sees the status: rank 1 announces that it left, and rank 0, waiting for it in
    # a collective, raises and aborts the job
    start = time.monotonic()
    done = run_job([mpiexec, "-n", "2"], "failing_rank.py", "exit", timeout=60)
    assert done.returncode != 0, done.output
    assert "rank 1 left the job" in done.output and "waiting for it in a collective" in done.output
    assert "passed the collective" not in done.output
    assert time.monotonic() - start < 50


def test_a_rank_that_ends_first_does_not_stop_the_others(mpiexec):
    done = run_job([mpiexec, "-n", "2"], "failing_rank.py", "finish", timeout=60)
    assert done.returncode == 0, done.output
    assert "rank 0: finished after rank 1 ended" in done.output
    assert "left the job" not in done.output
