"""Runs test programs under `mpiexec -n N` (a subprocess with a timeout, so nothing can hang).

The programs in programs/ are what each rank runs; they check their own results and print
"rank R: ... ok" lines that the tests look for. mpi4py and MPICH's mpiexec come with the
`distributed` extra (scripts/setup.sh installs it); where they are missing the tests skip with
the reason, or fail under TINYTENSOR_REQUIRE_REFERENCE=1 (CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

PROGRAMS = os.path.join(os.path.dirname(__file__), "programs")
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def mpiexec_path() -> str | None:
    """MPICH's mpiexec from the mpich wheel (next to this Python), else one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return beside if os.path.isfile(beside) else shutil.which("mpiexec")


def job_env() -> dict:
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = "1"  # two ranks on a 2-core machine: one thread each
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_job(launcher, program, *args, timeout=120, python=True):
    """Runs `launcher + [python, program, *args]` (without `python` if python=False: the
    launcher runs Python itself); fails the test, never hangs, on a timeout."""
    path = program if os.path.isabs(program) else os.path.join(PROGRAMS, program)
    command = [*launcher, *([sys.executable] if python else []), path, *map(str, args)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, env=job_env(), cwd=REPO
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(command)} did not finish in {timeout} s (a hang?): {e.stdout}")
    done.output = done.stdout + done.stderr
    return done


def expect_ok(done, n=2, what="ok"):
    """Asserts the job exited 0 and every rank printed its `rank R: <what>` line."""
    assert done.returncode == 0, f"the job failed with status {done.returncode}:\n{done.output}"
    for rank in range(n):
        assert f"rank {rank}: {what}" in done.stdout, f"rank {rank} did not report:\n{done.output}"
