"""`DataLoader`: batches from a dataset, shuffled or not, loaded in the main process or in worker
processes, as `torch.utils.data.DataLoader`.

    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=2)
    for epoch in range(epochs):
        for xb, yb in loader:          # (32, ...) batches; a new order every epoch
            ...

The pipeline is PyTorch's: a sampler yields indices (`SequentialSampler`, or `RandomSampler` for
`shuffle=True`), a `BatchSampler` groups them, a fetcher loads the samples and `collate_fn`
(default `default_collate`) makes one batch of them. With `num_workers > 0` the loading runs in
that many worker processes (`worker.py`); batches still arrive in the order of num_workers=0.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing
import pickle
import queue
import time

from ... import random as _random
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .fetch import IterableFetcher, MapFetcher
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
from .worker import ExceptionWrapper, IterableExhausted, ResumeIteration, worker_loop

__all__ = ["DataLoader"]

# how long the main process waits on the result queue before checking that workers are alive
_STATUS_CHECK_INTERVAL = 1.0


class _InfiniteConstantSampler(Sampler):
    """The sampler of an iterable dataset: None forever (the dataset itself says when to stop)."""

    def __iter__(self):
        while True:
            yield None


def _make_fetcher(iterable, auto_collation, collate_fn, drop_last, dataset):
    fetcher = IterableFetcher if iterable else MapFetcher
    return fetcher(dataset, auto_collation, collate_fn, drop_last)


class DataLoader:
    """Iterates over a dataset in batches, as `torch.utils.data.DataLoader` (same arguments).

    Args:
        dataset: a map-style `Dataset` (len and [i]) or an `IterableDataset`.
        batch_size: samples per batch; None turns batching off (each sample is passed through
            `default_convert`, or `collate_fn`, on its own).
        shuffle: a new random order every epoch (map-style datasets only).
        sampler: the indices to visit (instead of `shuffle`).
        batch_sampler: yields whole lists of indices (instead of batch_size, shuffle, sampler
            and drop_last).
        num_workers: load in this many worker processes (0: in the main process). Batches come
            in the same order and with the same contents as with 0.
        collate_fn: list of samples -> batch (default `default_collate`).
        pin_memory: accepted for PyTorch compatibility; it has no effect (batches are NumPy
            arrays in ordinary host memory, which is what CuPy copies to the GPU from).
        drop_last: drop the last batch when it is smaller than batch_size.
        timeout: seconds to wait for a batch from the workers before raising (0: forever).
        worker_init_fn: called as worker_init_fn(worker_id) in each worker, after seeding.
        multiprocessing_context: a `multiprocessing` start method name ("fork", "spawn",
            "forkserver") or context; default: the platform's default (fork on Linux). A
            dataset that makes CuPy arrays in the workers needs "spawn": CUDA does not
            survive a fork.
        generator: a `tt.Generator` for the shuffle and the workers' base seed (default: the
            global generator, so `tt.manual_seed` makes the run reproducible).
        prefetch_factor: batches each worker loads ahead (default 2; needs num_workers > 0).
        persistent_workers: keep the worker processes between epochs (needs num_workers > 0).
        pin_memory_device: accepted and ignored with pin_memory (see above).
        in_order: hand out batches in sampler order (True), or as workers finish them.

    Example:
        >>> loader = DataLoader(ds, batch_size=32, shuffle=True, drop_last=True)
        >>> for xb, yb in loader:
        ...     loss = F.cross_entropy(model(xb), yb)
    """

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=None,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers=False,
        pin_memory_device="",
        in_order=True,
    ):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(
                f"DataLoader: num_workers must be a non-negative integer (0 loads in the main "
                f"process), got num_workers={num_workers!r}"
            )
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout must be non-negative, got timeout={timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                f"DataLoader: prefetch_factor={prefetch_factor!r} needs num_workers > 0 (it is "
                "the number of batches each worker loads ahead)"
            )
        if prefetch_factor is None:
            prefetch_factor = 2
        if (
            isinstance(prefetch_factor, bool)
            or not isinstance(prefetch_factor, int)
            or (prefetch_factor < 1)
        ):
            raise ValueError(
                f"DataLoader: prefetch_factor must be a positive integer, got "
                f"prefetch_factor={prefetch_factor!r}"
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers=True needs num_workers > 0")
        if generator is not None and not isinstance(generator, _random.Generator):
            raise TypeError(
                f"DataLoader: generator must be a tt.Generator, got {type(generator).__name__}"
            )
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"DataLoader: worker_init_fn must be callable, got {worker_init_fn!r}")

        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):  # fmt: skip
                if value not in (None, False):
                    raise ValueError(
                        f"DataLoader: an IterableDataset decides its own order; expected "
                        f"unspecified {name}, got {name}={value!r}"
                    )
        elif not hasattr(dataset, "__getitem__"):
            raise TypeError(
                f"DataLoader: dataset must be a map-style dataset (with __getitem__ and __len__) "
                f"or an IterableDataset, got {type(dataset).__name__}"
            )
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, "
                    f"sampler and drop_last; got batch_size={batch_size!r}, shuffle={shuffle!r}, "
                    f"sampler={sampler!r}, drop_last={drop_last!r}"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError(
                "DataLoader: batch_size=None turns batching off, so drop_last=True means nothing"
            )
        if sampler is not None and shuffle:
            raise ValueError(
                f"DataLoader: sampler is mutually exclusive with shuffle; got shuffle={shuffle!r} "
                f"and sampler={type(sampler).__name__}"
            )
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
                raise ValueError(
                    f"DataLoader: batch_size must be a positive integer or None, got "
                    f"batch_size={batch_size!r}"
                )
            batch_sampler = BatchSampler(sampler, batch_size, bool(drop_last))

        self.dataset = dataset
        self.batch_size, self.drop_last = batch_size, bool(drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self.num_workers, self.timeout = num_workers, timeout
        self.collate_fn = collate_fn or (
            default_collate if batch_sampler is not None else default_convert
        )
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor if num_workers > 0 else None
        self._prefetch = prefetch_factor
        self.persistent_workers, self.in_order = persistent_workers, in_order
        self._iterable = iterable
        self._iterator = None

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _context(self):
        ctx = self.multiprocessing_context
        if ctx is None:
            return multiprocessing.get_context()
        if isinstance(ctx, str):
            try:
                return multiprocessing.get_context(ctx)
            except ValueError:
                raise ValueError(
                    f"DataLoader: multiprocessing_context={ctx!r} is not a start method here; "
                    f"choose one of {multiprocessing.get_all_start_methods()}"
                ) from None
        return ctx

    def __iter__(self):
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._iterator = _MultiProcessIter(self)
            else:
                self._iterator._reset()
            return self._iterator
        return _MultiProcessIter(self)

    def __len__(self) -> int:
        if self._iterable:
            try:
                n = len(self.dataset)
            except TypeError:
                raise TypeError(
                    f"DataLoader: {type(self.dataset).__name__} (an IterableDataset) has no "
                    "__len__, so neither has the loader"
                ) from None
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)


class _BaseIter:
    def __init__(self, loader: DataLoader):
        self._loader = loader
        self._sampler_iter = iter(loader._index_sampler)
        # NOTE: drawn whatever num_workers is, so that the shuffle that follows (from the same
        # generator) is the same with and without workers.
        generator = loader.generator or _random.default_generator
        self._base_seed = int(generator.rng.integers(2**62))
        self._fetcher_factory = functools.partial(
            _make_fetcher, loader._iterable, loader._auto_collation, loader.collate_fn,
            loader.drop_last,
        )  # fmt: skip

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = self._fetcher_factory(loader.dataset)

    def __next__(self):
        return self._fetcher.fetch(next(self._sampler_iter))


class _MultiProcessIter(_BaseIter):
    """Batches loaded by worker processes, handed out in sampler order.

    Tasks go to the workers round-robin (skipping workers whose iterable dataset has ended), at
    most `prefetch_factor` per worker ahead; results arrive in any order and wait in
    `self._pending` until their turn.
    """

    def __init__(self, loader):
        super().__init__(loader)
        ctx = loader._context()
        n = loader.num_workers
        self._result_queue = ctx.Queue()
        self._done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        for worker_id in range(n):
            index_queue = ctx.Queue()
            index_queue.cancel_join_thread()  # tasks left unread must not block our exit
            worker = ctx.Process(
                target=worker_loop,
                args=(
                    self._fetcher_factory, loader.dataset, index_queue, self._result_queue,
                    self._done_event, self._base_seed, loader.worker_init_fn, worker_id, n,
                ),
                daemon=True,
            )  # fmt: skip
            worker.start()
            self._index_queues.append(index_queue)
            self._workers.append(worker)
        self._shutdown = False
        self._reset(first=True)

    def _reset(self, first=False):
        loader = self._loader
        self._sampler_iter = iter(loader._index_sampler)
        self._send_idx = 0  # index of the next task to send
        self._rcvd_idx = 0  # index of the next batch to hand out
        self._task_worker = {}  # task index -> worker id, for tasks not yet handed out
        self._pending = {}  # task index -> batch that arrived before its turn
        self._active = [True] * loader.num_workers
        self._next_worker = itertools.cycle(range(loader.num_workers))
        if not first:  # persistent workers: every worker acknowledges the new epoch
            for q in self._index_queues:
                q.put(ResumeIteration())
            acks = 0
            while acks < loader.num_workers:
                index, _ = self._get_result()
                if isinstance(index, ResumeIteration):
                    acks += 1
        for _ in range(loader._prefetch * loader.num_workers):
            self._send_task()

    def _send_task(self):
        for _ in range(self._loader.num_workers):
            worker_id = next(self._next_worker)
            if self._active[worker_id]:
                break
        else:
            return
        try:
            batch_indices = next(self._sampler_iter)
        except StopIteration:
            return
        self._index_queues[worker_id].put((self._send_idx, batch_indices))
        self._task_worker[self._send_idx] = worker_id
        self._send_idx += 1

    def _get_result(self):
        """The next (task index, batch) from any worker; raises if workers died or time is up."""
        timeout = self._loader.timeout
        start = time.monotonic()
        while True:
            wait = _STATUS_CHECK_INTERVAL if not timeout else min(timeout, _STATUS_CHECK_INTERVAL)
            try:
                index, data = self._result_queue.get(timeout=wait)
                # batches come pickled by the worker (worker.py); control messages as they are
                return index, pickle.loads(data) if isinstance(data, bytes) else data
            except queue.Empty:
                dead = [w.pid for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown_workers()
                    raise RuntimeError(
                        f"DataLoader: worker process(es) {dead} exited unexpectedly"
                    ) from None
                if timeout and time.monotonic() - start >= timeout:
                    self._shutdown_workers()
                    raise RuntimeError(
                        f"DataLoader: timed out after timeout={timeout} seconds waiting for a batch"
                    ) from None

    def __next__(self):
        while True:
            # pass over tasks that will not come: handed out early (in_order=False), or sent to
            # a worker whose iterable dataset has since ended
            while self._rcvd_idx < self._send_idx and self._rcvd_idx not in self._pending:
                worker_id = self._task_worker.get(self._rcvd_idx)
                if worker_id is not None and self._active[worker_id]:
                    break
                self._task_worker.pop(self._rcvd_idx, None)
                self._rcvd_idx += 1
            if self._rcvd_idx >= self._send_idx:
                if not self._loader.persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            if self._rcvd_idx in self._pending:
                return self._hand_out(self._rcvd_idx, self._pending.pop(self._rcvd_idx))
            index, data = self._get_result()
            if isinstance(data, IterableExhausted):
                self._active[data.worker_id] = False
                continue
            if index == self._rcvd_idx or not self._loader.in_order:
                return self._hand_out(index, data)
            self._pending[index] = data

    def _hand_out(self, index, data):
        del self._task_worker[index]
        if index == self._rcvd_idx:
            self._rcvd_idx += 1
        self._send_task()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        self._done_event.set()
        for q in self._index_queues:
            q.put(None)
        for w in self._workers:
            w.join(timeout=_STATUS_CHECK_INTERVAL)
        for w in self._workers:
            if w.is_alive():
                w.terminate()
        for q in self._index_queues:
            q.close()
        self._result_queue.cancel_join_thread()
        self._result_queue.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:  # interpreter shutdown: the queues may already be gone
            pass
