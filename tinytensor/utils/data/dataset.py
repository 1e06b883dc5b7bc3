"""Datasets, as `torch.utils.data`: what a DataLoader reads samples from.

Two kinds, as PyTorch:
    map-style (`Dataset`): `len(ds)` and `ds[i]`; a sampler chooses the indices (shuffling).
    iterable (`IterableDataset`): `iter(ds)` yields samples (streams, generated data); with
        worker processes each worker iterates its own copy, so shard it with `get_worker_info()`.

Ready-made: `TensorDataset` (rows of tensors), `Subset` (some indices of another dataset),
`ConcatDataset` (datasets one after another; also `ds1 + ds2`), `ChainDataset` (iterables
chained), and `random_split` (disjoint random subsets of given lengths or fractions).
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Sequence

import numpy as np

from ... import random as _random
from ...tensor import Tensor

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "Subset",
    "ConcatDataset",
    "ChainDataset",
    "random_split",
]


class Dataset:
    """Base class of map-style datasets: implement `__getitem__(index)` and `__len__()`.

    Example:
        >>> class Squares(Dataset):
        ...     def __len__(self):
        ...         return 10
        ...     def __getitem__(self, i):
        ...         return tt.tensor([float(i)]), i * i
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """Base class of datasets that are streams: implement `__iter__()`.

    With `num_workers > 0` every worker process runs its own `iter(dataset)`; without sharding
    each sample would come once per worker. Shard in `__iter__` with `get_worker_info()`:

        info = tt.utils.data.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        yield from itertools.islice(self.stream(), start, None, step)
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Sample i is `(t[i] for t in tensors)`: rows of tensors that share their first dimension.

    Example:
        >>> ds = TensorDataset(tt.randn(100, 3), tt.randint(0, 2, (100,)))
        >>> x, y = ds[0]          # shapes (3,) and ()
    """

    def __init__(self, *tensors: Tensor) -> None:
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"TensorDataset: argument {i} is a {type(t).__name__}, not a Tensor"
                )
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: tensor {i} is 0-d; samples are rows of dim 0")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            raise ValueError(
                f"TensorDataset: size mismatch between tensors: first dimensions are {sizes}"
            )
        self.tensors = tensors

    def __getitem__(self, index):
        if isinstance(index, np.integer):
            # NOTE: samplers over NumPy index arrays yield NumPy integers; Tensor indexing
            # takes plain ints (a NumPy scalar looked like an index array on another device)
            index = int(index)
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0] if self.tensors else 0


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order: `Subset(ds, idx)[i] == ds[idx[i]]`."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        # a batch at once where the underlying dataset can (as PyTorch's fetcher expects)
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after another: indices 0..len(d0)-1 are d0's, then d1's, ...

    Example:
        >>> both = ConcatDataset([train_a, train_b])     # or train_a + train_b
    """

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for i, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(
                    f"ConcatDataset: dataset {i} is an IterableDataset ({type(d).__name__}); "
                    "chain iterable datasets with ChainDataset"
                )
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise IndexError(f"ConcatDataset: index {idx} is out of range for length {n}")
            idx += n
        if idx >= n:
            raise IndexError(f"ConcatDataset: index {idx} is out of range for length {n}")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (lazily): `iter` runs through each in turn."""

    def __init__(self, datasets) -> None:
        self.datasets = datasets

    def __iter__(self):
        for i, d in enumerate(self.datasets):
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset: dataset {i} ({type(d).__name__}) is not iterable")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def random_split(dataset: Dataset, lengths, generator=None) -> list[Subset]:
    """Splits `dataset` into disjoint random `Subset`s of the given lengths, as PyTorch.

    Args:
        dataset: a map-style dataset.
        lengths: sizes that sum to len(dataset), or fractions that sum to 1; fractions get
            floor(f · n) each and the remaining samples go one each to the splits in order.
        generator: a `tt.Generator` (default: the global one, seeded by `tt.manual_seed`).

    Example:
        >>> train, valid = random_split(ds, [0.9, 0.1], generator=tt.Generator().manual_seed(42))
    """
    if generator is not None and not isinstance(generator, _random.Generator):
        raise TypeError(
            f"random_split: generator must be a tt.Generator, got {type(generator).__name__}"
        )
    lengths = list(lengths)
    n = len(dataset)
    fractions = all(isinstance(x, float) for x in lengths) and math.isclose(sum(lengths), 1)
    if fractions:
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: lengths[{i}]={frac} is a fraction outside [0, 1]")
        sizes = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(sizes)):  # the remainder, round-robin
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(
                    f"random_split: length of split at index {i} is 0; this split is empty",
                    stacklevel=2,
                )
        lengths = sizes
    for i, size in enumerate(lengths):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(
                f"random_split: lengths must be non-negative integers or fractions summing to 1, "
                f"got lengths[{i}]={size!r}"
            )
    if sum(lengths) != n:
        raise ValueError(
            f"random_split: lengths {lengths} sum to {sum(lengths)}, but the dataset has {n} "
            "samples"
        )
    rng = (generator or _random.default_generator).rng
    indices = rng.permutation(n).tolist()
    splits, start = [], 0
    for size in lengths:
        splits.append(Subset(dataset, indices[start : start + int(size)]))
        start += int(size)
    return splits
