"""tinytensor.distributed's collectives on 2 ranks (mpiexec) and on one process."""

from .jobs import expect_ok, run_job


def test_collectives_on_two_ranks_match_numpy_and_reject_mismatched_calls(mpirun):
    # every op and dtype vs NumPy, views, async, broadcast/all_gather/reduce_scatter, objects,
    # mismatched shapes and collectives detected on both ranks, clear argument errors
    expect_ok(mpirun("collectives.py"))


def test_one_process_without_mpiexec(mpiexec):
    # errors before init, init's argument checks, a world of one, DDP on one process
    expect_ok(run_job([], "single_process.py"), n=1)


def test_importing_tinytensor_needs_no_mpi():
    import subprocess
    import sys

    code = (
        "import sys; import tinytensor as tt; import tinytensor.distributed as dist; "
        "from tinytensor.nn.parallel import DistributedDataParallel; "
        "assert 'mpi4py' not in sys.modules and 'mpi4py.MPI' not in sys.modules; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
