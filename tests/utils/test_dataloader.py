"""DataLoader pipelines run on torch and on tinytensor: same batches where the order is
deterministic; every index once per epoch, reproducible under a seed, where it is shuffled; the
same batches with worker processes as without."""

import os
import time

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.utils.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    TensorDataset,
    get_worker_info,
)

from .pipelines import make_char_dataset, make_counting_stream, pad_collate, regression_training


def as_numpy(batch):
    """A batch (nested lists/tuples/dicts of tensors) as the same nesting of numpy arrays."""
    if hasattr(batch, "detach"):
        return batch.detach().numpy()
    if isinstance(batch, tt.Tensor):
        return batch.numpy()
    if isinstance(batch, dict):
        return {k: as_numpy(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [as_numpy(v) for v in batch]
    return batch


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs), f"{len(ours)} batches, torch gives {len(theirs)}"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        a, b = as_numpy(a), as_numpy(b)
        _assert_same_tree(a, b, f"batch {i}")


def _assert_same_tree(a, b, where):
    if isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b), where
        for k in b:
            _assert_same_tree(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same_tree(x, y, f"{where}[{i}]")
    else:
        assert np.asarray(a).dtype == np.asarray(b).dtype, f"{where}: {a.dtype} vs {b.dtype}"
        np.testing.assert_array_equal(a, b, err_msg=where)


# ---- programs compared with torch ----------------------------------------------------------------


@pytest.mark.parametrize("batch_size, drop_last", [(8, False), (8, True), (50, False), (7, True)])
def test_tensor_dataset_training_loop_matches_torch(torch, batch_size, drop_last):
    ours = regression_training(tt, batch_size=batch_size, drop_last=drop_last)
    theirs = regression_training(torch, batch_size=batch_size, drop_last=drop_last)
    assert ours[0] == theirs[0], "batch shapes differ"
    assert ours[3] == theirs[3], "len(loader) differs"
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, err_msg="losses")
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12, err_msg="final weights")


def test_training_loop_with_workers_matches_torch(torch):
    ours = regression_training(tt, batch_size=16, num_workers=2, epochs=2)
    theirs = regression_training(torch, batch_size=16, epochs=2)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_text_dataset_with_padding_collate_matches_torch(torch, num_workers):
    def batches(lib, workers):
        ds = make_char_dataset(lib)
        loader = lib.utils.data.DataLoader(
            ds, batch_size=3, collate_fn=pad_collate(lib), num_workers=workers
        )
        return list(loader)

    ours, theirs = batches(tt, num_workers), batches(torch, 0)
    assert_same_batches(ours, theirs)
    assert [tuple(b[0].shape) for b in ours] == [(3, 30), (3, 33), (1, 9)]


def test_shuffled_text_dataset_visits_every_sentence_once(torch):
    tt.manual_seed(3)
    loader = DataLoader(
        make_char_dataset(tt), batch_size=2, shuffle=True, collate_fn=pad_collate(tt)
    )
    orders = []
    for _ in range(3):
        seen = []
        for ids, mask, lengths, _ in loader:
            assert bool((mask.sum(1) == lengths).all())
            seen += [tuple(row[: int(n)].tolist()) for row, n in zip(ids, lengths)]
        orders.append(seen)
    sentences = [tuple(ids.tolist()) for ids, _ in make_char_dataset(tt)]
    for seen in orders:
        assert sorted(seen) == sorted(sentences)
    assert orders[0] != orders[1] or orders[1] != orders[2], "every epoch had the same order"


@pytest.mark.parametrize("num_workers", [0, 2, 3])
@pytest.mark.parametrize("batch_size, drop_last", [(4, False), (4, True), (None, False)])
def test_iterable_dataset_with_workers_matches_torch(torch, num_workers, batch_size, drop_last):
    """Workers shard the stream with get_worker_info(); batches interleave worker by worker, in
    torch's order (so num_workers changes the batches, the same way in both libraries)."""

    def batches(lib):
        loader = lib.utils.data.DataLoader(
            make_counting_stream(lib),
            batch_size=batch_size,
            drop_last=drop_last,
            num_workers=num_workers,
        )
        return list(loader)

    ours, theirs = batches(tt), batches(torch)
    if batch_size is None:  # default_convert leaves dicts of tensors and ints as they are
        ours = [{"x": b["x"], "index": np.int64(b["index"])} for b in ours]
        theirs = [{"x": b["x"], "index": np.int64(b["index"])} for b in theirs]
    assert_same_batches(ours, theirs)
    indices = sorted(int(i) for b in ours for i in np.atleast_1d(as_numpy(b)["index"]))
    if not drop_last:
        assert indices == list(range(23)), "every sample exactly once"


def test_len_matches_torch(torch):
    class Sized(IterableDataset):
        def __iter__(self):
            return iter(range(10))

        def __len__(self):
            return 10

    class TorchSized(torch.utils.data.IterableDataset):
        __iter__, __len__ = Sized.__iter__, Sized.__len__

    ds = TensorDataset(tt.zeros(10, 2))
    tds = torch.utils.data.TensorDataset(torch.zeros(10, 2))
    for kwargs in [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
                   dict(batch_size=10), dict(batch_size=11, drop_last=True)]:  # fmt: skip
        assert len(DataLoader(ds, **kwargs)) == len(torch.utils.data.DataLoader(tds, **kwargs))
        assert len(DataLoader(Sized(), **kwargs)) == len(
            torch.utils.data.DataLoader(TorchSized(), **kwargs)
        )


# ---- shuffling: coverage and reproducibility -----------------------------------------------------


def epoch_order(loader):
    return [i for (batch,) in loader for i in batch.tolist()]


def test_shuffle_visits_every_index_once_per_epoch_and_changes_order():
    loader = DataLoader(TensorDataset(tt.arange(37)), batch_size=5, shuffle=True)
    epochs = [epoch_order(loader) for _ in range(4)]
    for order in epochs:
        assert sorted(order) == list(range(37))
    assert len({tuple(order) for order in epochs}) == 4, "epochs should be shuffled differently"
    dropped = DataLoader(TensorDataset(tt.arange(37)), batch_size=5, shuffle=True, drop_last=True)
    order = epoch_order(dropped)
    assert len(order) == 35 and len(set(order)) == 35


def test_shuffle_is_reproducible_under_manual_seed_and_generator():
    ds = TensorDataset(tt.arange(20))

    def two_epochs(**kwargs):
        loader = DataLoader(ds, batch_size=4, shuffle=True, **kwargs)
        return [epoch_order(loader), epoch_order(loader)]

    tt.manual_seed(7)
    first = two_epochs()
    tt.manual_seed(7)
    assert two_epochs() == first
    tt.manual_seed(8)
    assert two_epochs() != first

    # a private generator: independent of the global seed, reproducible by its own
    tt.manual_seed(1)
    a = two_epochs(generator=tt.Generator().manual_seed(5))
    tt.manual_seed(2)
    b = two_epochs(generator=tt.Generator().manual_seed(5))
    assert a == b and a[0] != a[1]


class RandomCrop(Dataset):
    """A dataset with random augmentation from the global generators (tt, NumPy, random)."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        import random

        noise = tt.rand(1).item() + np.random.rand() + random.random()
        return tt.tensor([float(i), noise])


@pytest.mark.parametrize("persistent_workers", [False, True])
def test_two_workers_give_the_batches_of_zero_workers(persistent_workers):
    ds = TensorDataset(tt.arange(30), tt.randn(30, 2))

    def epochs(num_workers, **kwargs):
        tt.manual_seed(11)
        loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=num_workers, **kwargs)
        return [[as_numpy(b) for b in loader] for _ in range(2 if not kwargs else 1)]

    zero = epochs(0)
    two = epochs(2)
    for e0, e2 in zip(zero, two):
        assert_same_batches(e2, e0)
    if persistent_workers:
        tt.manual_seed(11)
        loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2, persistent_workers=True)
        first, second = [as_numpy(b) for b in loader], [as_numpy(b) for b in loader]
        assert_same_batches(first, zero[0])
        assert sorted(int(i) for b in second for i in b[0]) == list(range(30))


def test_workers_are_seeded_reproducibly_and_differently():
    def augmented():
        tt.manual_seed(0)
        return np.concatenate([b.numpy() for b in DataLoader(RandomCrop(), 3, num_workers=2)])

    a, b = augmented(), augmented()
    np.testing.assert_array_equal(a, b)
    # batches 0 and 2 come from worker 0, 1 and 3 from worker 1: different seeds, different noise
    assert len(set(np.round(a[:, 1], 12))) == 12


def test_worker_init_fn_and_get_worker_info():
    assert get_worker_info() is None

    class WhoLoads(Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            info = get_worker_info()
            return tt.tensor([i, info.id, info.num_workers, os.getpid(), WhoLoads.tag])

    def init(worker_id):
        WhoLoads.tag = 100 + worker_id  # runs in the worker, after seeding

    WhoLoads.tag = -1
    rows = np.concatenate(
        [b.numpy() for b in DataLoader(WhoLoads(), 2, num_workers=2, worker_init_fn=init)]
    )
    np.testing.assert_array_equal(rows[:, 0], np.arange(8))
    np.testing.assert_array_equal(rows[:, 1], [0, 0, 1, 1, 0, 0, 1, 1])  # round-robin
    assert (rows[:, 2] == 2).all() and (rows[:, 4] == 100 + rows[:, 1]).all()
    assert os.getpid() not in rows[:, 3] and len(set(rows[:, 3])) == 2, "real worker processes"
    assert WhoLoads.tag == -1, "worker_init_fn ran in the main process"


class NumpyNoise(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return np.random.rand(), get_worker_info().seed, tt.initial_seed()


def seed_numpy_from_initial_seed(worker_id):
    """PyTorch's documented reproducibility idiom for worker_init_fn."""
    np.random.seed(tt.initial_seed() % 2**32)


def test_worker_init_fn_idiom_with_initial_seed():
    def run():
        tt.manual_seed(3)
        loader = DataLoader(
            NumpyNoise(), batch_size=2, num_workers=2, worker_init_fn=seed_numpy_from_initial_seed
        )
        batches = list(loader)
        return [np.concatenate([b[k].numpy() for b in batches]) for k in range(3)]

    (noise, seeds, initial), again = run(), run()
    np.testing.assert_array_equal(noise, again[0])
    assert len(set(noise.tolist())) == 8, "the two workers' NumPy streams differ"
    np.testing.assert_array_equal(seeds, initial)  # initial_seed() is the worker's seed
    assert seeds.dtype == np.int64 and seeds[0] + 1 == seeds[2], "worker 1: base_seed + 1"


class SpawnSafe(Dataset):
    """Module-level, so a spawned worker (which imports this module) can unpickle it."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return {"x": np.full(2, i, dtype=np.float32), "y": i}


def test_spawn_start_method_and_pin_memory_and_in_order_false():
    loader = DataLoader(
        SpawnSafe(), batch_size=2, num_workers=2, multiprocessing_context="spawn", pin_memory=True
    )
    batches = list(loader)
    assert [b["y"].tolist() for b in batches] == [[0, 1], [2, 3], [4, 5]]
    assert batches[0]["x"].dtype == tt.float32 and batches[0]["x"].shape == (2, 2)
    unordered = DataLoader(SpawnSafe(), batch_size=1, num_workers=2, in_order=False)
    assert sorted(int(b["y"]) for b in unordered) == list(range(6))


def test_getitems_loads_a_batch_at_once():
    class Batched(Dataset):
        calls = []

        def __len__(self):
            return 5

        def __getitem__(self, i):
            raise AssertionError("the loader should use __getitems__")

        def __getitems__(self, indices):
            Batched.calls.append(list(indices))
            return [tt.tensor(float(i)) for i in indices]

    out = [b.tolist() for b in DataLoader(Batched(), batch_size=2)]
    assert out == [[0.0, 1.0], [2.0, 3.0], [4.0]] and Batched.calls == [[0, 1], [2, 3], [4]]


def test_breaking_out_early_shuts_the_workers_down():
    loader = DataLoader(TensorDataset(tt.arange(100)), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    workers = list(it._workers)
    del it
    deadline = time.monotonic() + 10
    while any(w.is_alive() for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(w.is_alive() for w in workers)


# ---- errors --------------------------------------------------------------------------------------


class Faulty(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 3:
            raise KeyError(f"no sample {i}")
        return tt.tensor(float(i))


class Dies(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        os._exit(3)


class Unpicklable(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return {"x": tt.tensor(float(i)), "transform": lambda v: v}


def test_a_batch_that_cannot_be_pickled_raises_instead_of_hanging():
    with pytest.raises(Exception, match=r"(?s)worker process 0 \(sending its batch\).*lambda"):
        loader = DataLoader(Unpicklable(), batch_size=2, num_workers=1, collate_fn=list, timeout=20)
        next(iter(loader))


def test_worker_errors_reach_the_main_process():
    it = iter(DataLoader(Faulty(), batch_size=2, num_workers=2))
    assert next(it).tolist() == [0.0, 1.0]
    with pytest.raises(KeyError, match=r"(?s)in DataLoader worker process 1.*no sample 3"):
        next(it)
    with pytest.raises(RuntimeError, match="exited unexpectedly"):
        list(DataLoader(Dies(), batch_size=2, num_workers=1))


class Slow(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        time.sleep(30)
        return i


def test_timeout_raises_instead_of_waiting_forever():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"DataLoader: timed out after timeout=0.3 seconds"):
        next(iter(DataLoader(Slow(), num_workers=1, timeout=0.3)))
    assert time.monotonic() - start < 20, "the loader waited for the slow worker"


def test_distributed_sampler_feeds_a_dataloader():
    from tinytensor.utils.data import DistributedSampler, Sampler

    assert issubclass(DistributedSampler, Sampler)
    ds = TensorDataset(tt.arange(10))
    shares = [
        epoch_order(DataLoader(ds, batch_size=3, sampler=DistributedSampler(ds, 2, rank)))
        for rank in (0, 1)
    ]
    assert sorted(shares[0] + shares[1]) == list(range(10)) and len(shares[0]) == 5


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(num_workers=-1), ValueError, "DataLoader: num_workers .* got num_workers=-1"),
        (dict(batch_size=0), ValueError, "DataLoader: batch_size .* got batch_size=0"),
        (dict(batch_size=None, drop_last=True), ValueError, "batch_size=None"),
        (dict(shuffle=True, sampler=[0, 1]), ValueError, "sampler is mutually exclusive"),
        (dict(batch_sampler=[[0]], batch_size=2), ValueError, "batch_size=2"),
        (dict(prefetch_factor=2), ValueError, "prefetch_factor=2 needs num_workers > 0"),
        (dict(persistent_workers=True), ValueError, "persistent_workers=True needs num_workers"),
        (dict(timeout=-1), ValueError, "timeout=-1"),
        (dict(generator=np.random.default_rng()), TypeError, "generator must be a tt.Generator"),
        (dict(num_workers=1, multiprocessing_context="nope"), ValueError, "'nope'"),
        (dict(worker_init_fn=3), TypeError, "DataLoader: worker_init_fn must be callable, got 3"),
        (dict(num_workers=1, prefetch_factor=0), ValueError, "got prefetch_factor=0"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        iter(DataLoader(TensorDataset(tt.zeros(4)), **kwargs))


def test_iterable_dataset_rejects_shuffle_and_samplers():
    stream = make_counting_stream(tt)
    with pytest.raises(ValueError, match="got shuffle=True"):
        DataLoader(stream, shuffle=True)
    with pytest.raises(ValueError, match="sampler"):
        DataLoader(stream, sampler=[0, 1])
    with pytest.raises(TypeError, match="has no __len__"):
        len(DataLoader(stream))
    with pytest.raises(TypeError, match="DataLoader: dataset must be a map-style"):
        DataLoader(42)


def test_unequal_samples_name_the_problem():
    ragged = [tt.zeros(2), tt.zeros(3)]
    with pytest.raises(RuntimeError, match=r"equal size, got shapes \[\(2,\), \(3,\)\]"):
        next(iter(DataLoader(ragged, batch_size=2)))
