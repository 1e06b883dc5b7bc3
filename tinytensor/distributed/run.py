"""`python -m tinytensor.distributed.run --nproc-per-node 4 train.py --lr 1e-3`: torchrun's flags,
mpiexec underneath (one machine).

It runs `mpiexec -n 4 python -m tinytensor.distributed.worker train.py --lr 1e-3`. The worker
runs the script as `__main__` and, if it raises or calls sys.exit with a non-zero status, prints
which rank failed and aborts the whole job, so a rank that dies never leaves the others waiting
in a collective. With more than one process and no thread count chosen, each process gets one
BLAS/OpenMP thread (as torchrun does): N processes on N cores, not N × cores threads.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys


def find_mpiexec() -> str:
    """The mpiexec next to this Python (the mpich wheel installs it there), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise SystemExit(
            "tinytensor.distributed.run: no mpiexec found; pip install 'tinytensor[distributed]' "
            "(it brings MPICH's mpiexec) or install an MPI library"
        )
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tinytensor.distributed.run",
        description="Launch a training script on N processes of this machine (data parallel).",
    )
    parser.add_argument(
        "--nproc-per-node",
        "--nproc_per_node",
        type=int,
        default=1,
        help="processes to start (default 1)",
    )
    parser.add_argument(
        "--nnodes", default="1", help="only 1 is supported (use mpiexec for several machines)"
    )
    parser.add_argument("--standalone", action="store_true", help="accepted (torchrun's)")
    parser.add_argument(
        "-m", "--module", action="store_true", help="run the script argument as a module"
    )
    parser.add_argument("--no-python", action="store_true", help="run the command as is")
    parser.add_argument("script", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    return parser


def command(args) -> list[str]:
    """The mpiexec command line for parsed `args`."""
    if args.no_python:
        program = [args.script]
    else:
        program = [sys.executable, "-m", "tinytensor.distributed.worker"]
        program += ["-m", args.script] if args.module else [args.script]
    return [find_mpiexec(), "-n", str(args.nproc_per_node), *program, *args.script_args]


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.nproc_per_node < 1:
        parser.error(f"--nproc-per-node must be >= 1, got {args.nproc_per_node}")
    if str(args.nnodes) not in ("1", "1:1"):
        parser.error(
            f"--nnodes {args.nnodes}: this launcher starts processes on one machine; for "
            "several, use mpiexec with a host file (mpiexec -f hosts -n N python train.py)"
        )
    env = dict(os.environ)
    if args.nproc_per_node > 1:
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(name, "1")
    return subprocess.call(command(args), env=env)


if __name__ == "__main__":
    sys.exit(main())
