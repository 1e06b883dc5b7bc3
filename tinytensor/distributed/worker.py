"""`python -m tinytensor.distributed.worker script.py args...`: one rank of a job started by
`tinytensor.distributed.run`. Runs the script as `__main__`; a failure ends the whole job.

A rank that raises, or exits with a non-zero status, prints its rank and error and calls
MPI_Abort, so mpiexec stops every rank and exits non-zero with that status. (A script run
directly under mpiexec gets the same for exceptions; for sys.exit on one rank, Python tells no
hook the status, so there the ranks still waiting for it notice that it left and end the job
with status 1: mpi_backend.py.)
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback


def _abort_job(code: int) -> None:
    import time

    from .process_group import abort_job

    # NOTE: MPI_Abort kills mpiexec's forwarding proxies too: give them a moment to pass on the
    # message just written, or a loaded machine can lose it (seen once in the full suite).
    time.sleep(0.5)
    abort_job(code)
    os._exit(code)  # a job of one process: nothing else to end


def _rank() -> str:
    from .launcher_env import RANK, launcher_value

    return str(launcher_value(RANK, "?"))


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m tinytensor.distributed.worker [-m] script [args...]")
    as_module = sys.argv[1] == "-m"
    target = sys.argv[2] if as_module else sys.argv[1]
    sys.argv = sys.argv[2:] if as_module else sys.argv[1:]
    try:
        if as_module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code in (None, 0):
            raise
        status = code if isinstance(code, int) else 1
        if not isinstance(code, int):
            sys.stderr.write(f"{code}\n")
        sys.stderr.write(f"[rank {_rank()}] exited with status {status}: aborting the job\n")
        sys.stderr.flush()
        _abort_job(status)
    except BaseException:
        sys.stderr.write(f"[rank {_rank()}] failed: aborting the job\n{traceback.format_exc()}")
        sys.stderr.flush()
        _abort_job(1)


if __name__ == "__main__":
    main()
