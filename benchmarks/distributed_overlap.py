"""How much of DDP's gradient communication hides behind backward, on the main job's GPT.

    python benchmarks/distributed_overlap.py            # starts `mpiexec -n 2` itself

Per step (forward + backward of the default train_gpt model, 16 sequences per rank), medians:
  local      forward + backward with no communication (inside ddp.no_sync()), then a barrier
             (as in a synchronized step, the faster rank waits for the slower one)
  comm       one blocking all-reduce of all the gradients (the same bytes, one message)
  ddp        forward + backward with DDP: buckets all-reduced from the hooks, waited at the end
  ddp-lazy   the same without testing in-flight buckets during backward (MPI then moves them
             only in the final wait)
hidden = 1 - (ddp - local) / comm: the share of the communication that cost no time (noisy:
the step times include waiting for the slower rank); and, robust to that, exposed = per step
the shorter of the ranks' final waits for their buckets after backward. The rank that finished
backward last finds every other rank's contribution there, so its wait is the communication
left over when backward ended, not waiting for a slower rank; the faster rank waits longer.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(steps: int, bucket_cap_mb: float) -> None:
    import numpy as np

    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import train_gpt
    from tinytensor.nn.parallel import DistributedDataParallel as DDP

    import tinytensor as tt
    import tinytensor.distributed as dist
    from tinytensor.distributed import Work

    dist.init_process_group("mpi")
    rank = dist.get_rank()
    args = train_gpt.build_parser().parse_args([])
    tt.manual_seed(0)
    model = train_gpt.build_model(args, vocab_size=103)
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    reducer = ddp._reducer
    backend = reducer.backend
    rng = np.random.default_rng(rank)
    flat = np.zeros(sum(p.numel() for p in model.parameters()), dtype=np.float32)

    def batch():
        x = rng.integers(0, 103, size=(16, args.block_size))
        return tt.tensor(x), tt.tensor(np.roll(x, -1, axis=1))

    def local():
        with ddp.no_sync():
            ddp(*batch()).loss.backward()
        dist.barrier()  # a step waits for the slower rank, with or without communication

    def comm():
        backend.all_reduce(flat, dist.ReduceOp.SUM)

    waited = []  # seconds in the final waits, per step
    launch = backend.iall_reduce

    def timed_launch(array, op):
        work = launch(array, op)

        def timed_wait():
            start = time.perf_counter()
            work.wait()
            waited[-1] += time.perf_counter() - start

        return Work(timed_wait, None, work.is_completed)

    backend.iall_reduce = timed_launch
    exposed = {"ddp": [], "ddp-lazy": []}

    def synced(drive):
        reducer.drive_progress = drive
        waited.append(0.0)
        ddp(*batch()).loss.backward()
        exposed["ddp" if drive else "ddp-lazy"].append(waited[-1])

    ways = {"local": local, "comm": comm, "ddp": lambda: synced(True),
            "ddp-lazy": lambda: synced(False)}  # fmt: skip
    times = {name: [] for name in ways}
    for step in range(steps + 3):
        for name, fn in ways.items():
            model.zero_grad()
            dist.barrier()
            start = time.perf_counter()
            fn()
            if step >= 3:
                times[name].append(time.perf_counter() - start)
    median = {k: float(np.median(v)) * 1e3 for k, v in times.items()}
    if rank == 0:
        sizes = ", ".join(f"{b.flat.nbytes / 2**20:.2f}" for b in reducer.buckets)
        print(f"GPT {flat.size / 1e6:.2f}M parameters ({flat.nbytes / 2**20:.1f} MiB of float32 "
              f"gradients), buckets [{sizes}] MiB, {dist.get_world_size()} ranks, "
              f"median of {steps} steps (ms)")  # fmt: skip
        for name in ways:
            print(f"  {name:<9} {median[name]:8.2f}")
    # per step, the shortest wait over the ranks: the last rank out of backward waits only for
    # the communication still left then (see the module docstring)
    shortest = {
        name: np.min(np.array(backend.all_gather_object(exposed[name][3:])), axis=0)
        for name in exposed
    }
    if rank == 0:
        for name in ("ddp", "ddp-lazy"):
            hidden = 1 - (median[name] - median["local"]) / median["comm"]
            wait = float(np.median(shortest[name])) * 1e3
            print(f"  {name}: exposed wait after backward {wait:.2f} ms of {median['comm']:.2f} "
                  f"ms of communication; hidden by timing: {hidden:.0%}")  # fmt: skip
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--bucket-cap-mb", type=float, default=0.5)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.bucket_cap_mb)
        return 0
    from tinytensor.distributed.run import find_mpiexec

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    command = [find_mpiexec(), "-n", "2", sys.executable, os.path.abspath(__file__), "--worker",
               "--steps", str(args.steps), "--bucket-cap-mb", str(args.bucket_cap_mb)]  # fmt: skip
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())
