"""Data-parallel training for the example scripts: `mpiexec -n 2 python examples/train_gpt.py`.

Started under mpiexec (or `python -m tinytensor.distributed.run --nproc-per-node 2 ...`), each
process trains a replica wrapped in DistributedDataParallel on its own share of every batch,
so the run takes the same steps as one process on the whole batch, faster. Alone (no launcher,
or `mpiexec -n 1`) nothing here changes anything: the same seeds, batches and files as before.

- Rank 0 alone prints, evaluates, and writes checkpoints, plots, metrics and samples.
- Each rank draws its own batches and dropout masks from seeds derived from (seed, rank): they
  differ across ranks and are the same in every run; a checkpoint holds every rank's RNG
  state, so `--resume` (with the same number of processes) continues exactly.
- Decisions that end the loop (Ctrl-C, --max-minutes) are agreed by all ranks, so that none
  is left waiting for the others in a collective.
"""

from __future__ import annotations

import numpy as np

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor.distributed.launcher_env import WORLD_SIZE, launcher_value


def launched_processes() -> int:
    """How many processes the launcher started (1 without a launcher)."""
    return launcher_value(WORLD_SIZE, 1)


def start() -> None:
    """Joins the job's process group when launched on several processes (MPI backend)."""
    if launched_processes() > 1 and not dist.is_initialized():
        dist.init_process_group("mpi")


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def is_main() -> bool:
    """True on the rank that prints and writes files (rank 0, or the only process)."""
    return rank() == 0


def rank_seed(seed: int) -> int:
    """The seed of this rank's batches and dropout: `seed` alone; in a job, one drawn from the
    seed sequence (seed, rank): distinct per rank, the same in every run."""
    if world_size() == 1:
        return seed
    return int(np.random.SeedSequence([seed, rank()]).generate_state(1, np.uint64)[0])


def per_rank_batch(batch_size: int) -> int:
    """This rank's share of a global batch; the batch must divide evenly among the ranks."""
    n = world_size()
    if batch_size % n:
        raise SystemExit(
            f"--batch-size {batch_size} does not divide among {n} processes; use a multiple of {n}"
        )
    return batch_size // n


def wrap(model):
    """The model to train: DistributedDataParallel(model) in a job, else the model itself."""
    if world_size() == 1:
        return model
    from tinytensor.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model)


def unwrap(model):
    """The plain model inside a DDP wrapper (its state_dict has no `module.` prefix)."""
    from tinytensor.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


def mean(value: float) -> float:
    """The mean of `value` over the ranks (the loss of the whole batch)."""
    if world_size() == 1:
        return value
    total = tt.tensor([value], dtype=tt.float64)
    dist.all_reduce(total, op=dist.ReduceOp.AVG)
    return total.item()


def any_rank(*flags: bool) -> tuple[bool, ...]:
    """Each flag, true if it is true on any rank (one small all-reduce)."""
    if world_size() == 1:
        return tuple(bool(f) for f in flags)
    values = tt.tensor([int(bool(f)) for f in flags], dtype=tt.int64)
    dist.all_reduce(values, op=dist.ReduceOp.MAX)
    return tuple(bool(v) for v in values.tolist())


def gather_rng_states(state: dict) -> dict:
    """What a checkpoint stores of the RNGs: this state alone, or every rank's in a job."""
    if world_size() == 1:
        return state
    states = [None] * world_size()
    dist.all_gather_object(states, state)
    return {"world_size": world_size(), "ranks": states}


def this_ranks_rng_state(saved: dict) -> dict:
    """This rank's RNG state from a checkpoint; an error if it was written by another number
    of processes (the batches and dropout of each rank would not continue)."""
    saved_world = int(saved.get("world_size", 1)) if "ranks" in saved else 1
    if saved_world != world_size():
        raise SystemExit(
            f"--resume: the checkpoint was written by {saved_world} process(es), this run has "
            f"{world_size()}; resume with the same number (mpiexec -n {saved_world})"
        )
    return saved["ranks"][rank()] if "ranks" in saved else saved
