"""Samplers: which dataset indices a DataLoader visits, and in which order, as `torch.utils.data`.

    SequentialSampler(ds)              0, 1, ..., len(ds) - 1
    RandomSampler(ds, generator=g)     a fresh permutation every epoch (or draws with replacement)
    SubsetRandomSampler(indices)       a permutation of the given indices
    WeightedRandomSampler(w, n)        n indices drawn with probability w_i / Σw
    BatchSampler(sampler, 32, False)   groups another sampler's indices into lists

A sampler given no generator draws a fresh seed from the global one (`tt.manual_seed`) each time
it is iterated, so a seeded run shuffles the same way every time and every epoch differently.
`Sampler` is the base class to subclass (the distributed sampler does).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sized

import numpy as np

from ... import random as _random
from ...tensor import Tensor

__all__ = [
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
]


class Sampler:
    """Base class: subclasses implement `__iter__` (indices, or lists of indices for a batch
    sampler) and, where they know it, `__len__`."""

    def __init__(self, data_source=None) -> None:
        # NOTE: accepted and ignored, as PyTorch (which deprecated it); subclasses keep their own
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


# indices drawn at a time by RandomSampler(replacement=True)
_CHUNK = 1024


def _check_positive_int(value, where, name):
    if isinstance(value, builtins.bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{where}: {name} must be a positive integer, got {name}={value!r}")
    return int(value)


def _check_bool(value, where, name):
    if not isinstance(value, builtins.bool):
        raise TypeError(f"{where}: {name} must be a bool, got {name}={value!r}")
    return value


def _check_generator(generator, where):
    if generator is not None and not isinstance(generator, _random.Generator):
        raise TypeError(
            f"{where}: generator must be a tt.Generator or None, got {type(generator).__name__}"
        )
    return generator


def _epoch_rng(generator) -> np.random.Generator:
    """The NumPy generator to draw one epoch from: the given generator's, or a fresh one seeded
    from the global generator (so that `tt.manual_seed` makes the whole run reproducible)."""
    if generator is not None:
        return generator.rng
    return np.random.default_rng(int(_random.default_generator.rng.integers(2**63 - 1)))


class SequentialSampler(Sampler):
    """Indices 0, 1, ..., len(data_source) - 1, in order."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """Random indices of `data_source`: a permutation per epoch, or draws with replacement.

    Args:
        data_source: the dataset (only its length is used).
        replacement: draw `num_samples` indices independently (uniform) instead of permuting.
        num_samples: how many indices per epoch (default len(data_source)); without replacement
            and larger than the dataset, whole permutations are chained and the last one cut.
        generator: a `tt.Generator`; without one each epoch seeds from the global generator.

    Example:
        >>> g = tt.Generator().manual_seed(0)
        >>> list(RandomSampler(range(5), generator=g))
        [..., a permutation of 0..4]
    """

    def __init__(self, data_source: Sized, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = _check_bool(replacement, "RandomSampler", "replacement")
        self._num_samples = num_samples
        self.generator = _check_generator(generator, "RandomSampler")
        if num_samples is not None:
            _check_positive_int(num_samples, "RandomSampler", "num_samples")

    @property
    def num_samples(self) -> int:
        # read lazily: the dataset may change size between construction and iteration
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = _epoch_rng(self.generator)
        if self.replacement:
            # NOTE: in chunks, because programs ask for "endless" epochs (minGPT's trainer passes
            # num_samples=int(1e10)); a chunk amortizes the generator call over many indices
            for start in range(0, self.num_samples, _CHUNK):
                yield from rng.integers(0, n, size=min(_CHUNK, self.num_samples - start)).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (a fresh permutation every epoch), without replacement.

    Example:
        >>> train_sampler = SubsetRandomSampler(range(0, 800))   # and valid: range(800, 1000)
    """

    def __init__(self, indices, generator=None) -> None:
        self.indices = indices
        self.generator = _check_generator(generator, "SubsetRandomSampler")

    def __iter__(self) -> Iterator:
        rng = _epoch_rng(self.generator)
        for i in rng.permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices in [0, len(weights)), index i drawn with probability w_i / Σw.

    Args:
        weights: non-negative weights (need not sum to 1), a sequence or a 1-D Tensor.
        num_samples: how many indices per epoch.
        replacement: draw independently (True) or never repeat an index (False; then
            num_samples <= the number of non-zero weights).
        generator: a `tt.Generator`.

    Example:
        >>> class_weight = 1.0 / counts                  # rebalance classes
        >>> sampler = WeightedRandomSampler(class_weight[labels], num_samples=len(labels))
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None) -> None:
        where = "WeightedRandomSampler"
        self.num_samples = _check_positive_int(num_samples, where, "num_samples")
        self.replacement = _check_bool(replacement, where, "replacement")
        array = weights.numpy() if isinstance(weights, Tensor) else np.asarray(weights)
        if array.ndim != 1 or array.dtype.kind not in "fiub":
            raise ValueError(
                f"{where}: weights must be a 1-D sequence of numbers, got shape {array.shape} "
                f"({array.dtype})"
            )
        array = array.astype(np.float64)
        if not np.all(np.isfinite(array)) or np.any(array < 0) or array.sum() <= 0:
            raise ValueError(
                f"{where}: weights must be finite, non-negative and not all zero, got min "
                f"{array.min()}, max {array.max()}, sum {array.sum()}"
            )
        if not replacement and self.num_samples > np.count_nonzero(array):
            raise ValueError(
                f"{where}: cannot draw num_samples={num_samples} without replacement from "
                f"{np.count_nonzero(array)} non-zero weights"
            )
        self.weights = Tensor(array)
        self.generator = _check_generator(generator, where)

    def __iter__(self) -> Iterator[int]:
        p = self.weights.numpy() / self.weights.numpy().sum()
        rng = _epoch_rng(self.generator)
        draws = rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        yield from draws.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of `sampler` into lists of `batch_size` (the last shorter unless
    `drop_last`).

    Example:
        >>> list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        self.sampler = sampler
        self.batch_size = _check_positive_int(batch_size, "BatchSampler", "batch_size")
        self.drop_last = _check_bool(drop_last, "BatchSampler", "drop_last")

    def __iter__(self) -> Iterator[list]:
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
