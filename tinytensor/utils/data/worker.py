"""Worker processes of a DataLoader: the loop each one runs, and `get_worker_info()`.

Each worker is a separate process (`multiprocessing`) with its own copy of the dataset. The main
process sends it tasks `(task index, batch indices)` on the worker's own queue; the worker loads
and collates the batch and puts `(task index, batch)` on the shared result queue. The main
process hands batches to the user in task order, so the batches (and their order) are those of
`num_workers=0` whatever order the workers finish in.

Before anything else a worker seeds Python's `random`, NumPy's global generator and `tt`'s
global generator with `base_seed + worker_id` (base_seed is drawn from the loader's generator for
every epoch), so random augmentations are reproducible and differ between workers.
"""

from __future__ import annotations

import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np

from ... import random as _random

__all__ = ["WorkerInfo", "get_worker_info"]

# how often a waiting worker checks that its parent is still alive (seconds)
_STATUS_CHECK_INTERVAL = 5.0


@dataclass(frozen=True)
class WorkerInfo:
    """What a worker process knows about itself (`get_worker_info()` inside a worker).

    id: this worker's index in [0, num_workers).  num_workers: how many workers the loader runs.
    seed: the seed this worker's generators got.  dataset: this worker's copy of the dataset.
    """

    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """This process's `WorkerInfo` inside a DataLoader worker; None in the main process.

    Example (sharding an IterableDataset):
        >>> info = get_worker_info()
        >>> mine = range(n) if info is None else range(info.id, n, info.num_workers)
    """
    return _worker_info


class ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as its type and traceback."""

    def __init__(self, where: str) -> None:
        exc_type = sys.exc_info()[0]
        try:  # the type travels by name: one defined inside a function cannot
            pickle.dumps(exc_type)
            self.exc_type = exc_type
        except Exception:
            self.exc_type = RuntimeError
        self.message = f"Caught {exc_type.__name__} {where}.\nOriginal {traceback.format_exc()}"

    def reraise(self):
        try:
            error = self.exc_type(self.message)
        except Exception:  # an exception type whose constructor wants other arguments
            error = RuntimeError(self.message)
        raise error


@dataclass(frozen=True)
class IterableExhausted:
    """Sent by a worker whose copy of an IterableDataset has no more batches."""

    worker_id: int


class ResumeIteration:
    """Tells a persistent worker to start a new epoch (a fresh iterator over its dataset)."""


def seed_worker(seed: int) -> None:
    """Seeds every global generator a dataset might use: random, NumPy's and tinytensor's."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    _random.manual_seed(seed)


def _pickled(data, where) -> bytes:
    """The batch as bytes, pickled here rather than in the queue's background thread: a batch
    that cannot be pickled then reaches the main process as an error instead of never arriving
    (which would leave the loader waiting forever)."""
    try:
        return bytes(ForkingPickler.dumps(data))
    except Exception:
        return bytes(ForkingPickler.dumps(ExceptionWrapper(f"{where} (sending its batch)")))


def worker_loop(
    fetcher_factory, dataset, index_queue, result_queue, done_event, base_seed, worker_init_fn,
    worker_id, num_workers,
):  # fmt: skip
    """The body of one worker process (see the module docstring)."""
    global _worker_info
    seed = base_seed + worker_id
    seed_worker(seed)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    where = f"in DataLoader worker process {worker_id}"
    init_error, fetcher = None, None
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        fetcher = fetcher_factory(dataset)
    except Exception:
        init_error = ExceptionWrapper(where)
    parent = os.getppid()
    exhausted = False
    while True:
        try:
            task = index_queue.get(timeout=_STATUS_CHECK_INTERVAL)
        except queue.Empty:
            if os.getppid() != parent:  # the main process died: nobody will collect our work
                break
            continue
        if task is None:  # shutdown
            break
        if isinstance(task, ResumeIteration):
            result_queue.put((task, None))
            exhausted = False
            if init_error is None:
                fetcher = fetcher_factory(dataset)
            continue
        if done_event.is_set() or exhausted:
            continue  # drain the queue until the shutdown message
        index, batch_indices = task
        if init_error is not None:
            data, init_error = init_error, None
        else:
            try:
                data = fetcher.fetch(batch_indices)
            except StopIteration:
                data, exhausted = IterableExhausted(worker_id), True
            except Exception:
                data = ExceptionWrapper(where)
        result_queue.put((index, _pickled(data, where)))
        del data  # free the batch before waiting for the next task
    if done_event.is_set():
        # NOTE: results nobody will read must not keep this process alive at exit
        result_queue.cancel_join_thread()
        result_queue.close()
