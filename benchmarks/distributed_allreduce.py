"""All-reduce cost: tinytensor.distributed against raw mpi4py on the same buffers, 2 ranks.

    python benchmarks/distributed_allreduce.py            # starts `mpiexec -n 2` itself
    python benchmarks/distributed_allreduce.py --ranks 2 --repeats 200

For each size (float32) every rank times, interleaved so that machine noise hits all alike:
  raw        comm.Allreduce(MPI.IN_PLACE, array)            mpi4py on the NumPy array
  tt         dist.all_reduce(tensor)                        with the cross-rank argument check
  tt-nocheck dist.all_reduce(tensor), check off             (TINYTENSOR_DISTRIBUTED_CHECKS=0)
  ddp-path   Iallreduce + Wait, what DDP's buckets do
and prints the median microseconds of rank 0 and the ratios to raw.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SIZES = [256, 16 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024]  # elements (float32)


def worker(repeats: int) -> None:
    import numpy as np
    from mpi4py import MPI

    import tinytensor as tt
    import tinytensor.distributed as dist
    from tinytensor.distributed import collectives

    dist.init_process_group("mpi")
    comm, rank = MPI.COMM_WORLD, dist.get_rank()
    backend = dist.process_group.current_backend("benchmark")

    def raw(a, t):
        comm.Allreduce(MPI.IN_PLACE, a)

    def checked(a, t):
        collectives.CHECK_CALLS = True
        dist.all_reduce(t)

    def unchecked(a, t):
        collectives.CHECK_CALLS = False
        dist.all_reduce(t)

    def ddp_path(a, t):
        backend.iall_reduce(a, dist.ReduceOp.SUM).wait()

    ways = {"raw": raw, "tt": checked, "tt-nocheck": unchecked, "ddp-path": ddp_path}
    rows = []
    for n in SIZES:
        t = tt.zeros(n, dtype=tt.float32)
        a = t._array  # the same buffer for every way
        times = {name: [] for name in ways}
        for fn in ways.values():  # warm up
            for _ in range(3):
                fn(a, t)
        for _ in range(repeats):
            for name, fn in ways.items():
                comm.Barrier()
                start = time.perf_counter()
                fn(a, t)
                times[name].append(time.perf_counter() - start)
        rows.append((n, {k: float(np.median(v)) * 1e6 for k, v in times.items()}))
    if rank == 0:
        print(f"all-reduce of float32 buffers on {dist.get_world_size()} ranks "
              f"(median of {repeats}, microseconds; ratio = / raw mpi4py)")  # fmt: skip
        print(f"{'bytes':>10} {'raw':>9} {'tt':>9} {'ratio':>6} {'nocheck':>9} {'ratio':>6} "
              f"{'ddp-path':>9} {'ratio':>6}")  # fmt: skip
        for n, m in rows:
            print(f"{4 * n:>10,} {m['raw']:>9.1f} {m['tt']:>9.1f} {m['tt'] / m['raw']:>6.2f} "
                  f"{m['tt-nocheck']:>9.1f} {m['tt-nocheck'] / m['raw']:>6.2f} "
                  f"{m['ddp-path']:>9.1f} {m['ddp-path'] / m['raw']:>6.2f}")  # fmt: skip
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.repeats)
        return 0
    from tinytensor.distributed.run import find_mpiexec

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    command = [find_mpiexec(), "-n", str(args.ranks), sys.executable, os.path.abspath(__file__),
               "--worker", "--repeats", str(args.repeats)]  # fmt: skip
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())
