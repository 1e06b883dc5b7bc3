"""Datasets, samplers and collation against torch.utils.data: same structure, types, shapes,
dtypes and values; shuffles cover every index and are reproducible; errors name the argument."""

import collections

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.utils import data

from .test_dataloader import assert_same_batches

Point = collections.namedtuple("Point", "x y")


def samples(lib):
    """Samples of every kind default_collate handles, built the same way in both libraries."""
    return [
        {
            "image": lib.ones(2, 3, dtype=lib.float32) * i,
            "pixels": np.full((2,), i, dtype=np.uint8),
            "label": i,
            "weight": 0.5 * i,
            "flag": i % 2 == 0,
            "name": f"sample{i}",
            "pair": (lib.tensor([i, -i]), np.float32(i)),
            "point": Point(x=float(i), y=[i, i + 1]),
        }
        for i in range(3)
    ]


def test_default_collate_matches_torch(torch):
    ours = data.default_collate(samples(tt))
    theirs = torch.utils.data.default_collate(samples(torch))
    assert list(ours) == list(theirs)
    assert ours["name"] == theirs["name"] == ["sample0", "sample1", "sample2"]
    assert type(ours["point"]) is Point and type(ours["pair"]) is list is type(theirs["pair"])
    assert isinstance(ours["point"].y, list) and len(ours["point"].y) == 2
    flat = lambda b: [b["image"], b["pixels"], b["label"], b["weight"], b["flag"], *b["pair"],
                      b["point"].x, *b["point"].y]  # fmt: skip
    assert_same_batches(flat(ours), flat(theirs))


def test_default_convert_matches_torch_with_batching_off(torch):
    def batches(lib):
        items = [(np.arange(3.0) + i, i, "s") for i in range(2)]
        return list(lib.utils.data.DataLoader(items, batch_size=None))

    ours, theirs = batches(tt), batches(torch)
    assert len(ours) == 2 and isinstance(ours[0], list) and isinstance(ours[0][0], tt.Tensor)
    assert [b[1:] for b in ours] == [b[1:] for b in theirs]  # ints and strings left alone
    assert_same_batches([b[0] for b in ours], [b[0] for b in theirs])


@pytest.mark.parametrize(
    "batch, error, match",
    [
        ([object(), object()], TypeError, "default_collate: batch must contain tensors"),
        ([np.array(["a"]), np.array(["b"])], TypeError, "found <U1"),
        ([[1, 2], [3]], RuntimeError, r"equal size, got lengths \[2, 1\]"),
    ],
)
def test_default_collate_errors(batch, error, match):
    with pytest.raises(error, match=match):
        data.default_collate(batch)


# ---- datasets ------------------------------------------------------------------------------------


def test_tensor_dataset_subset_and_concat_index_as_torch(torch):
    x, y = np.arange(12.0).reshape(6, 2), np.arange(6)
    ours = data.TensorDataset(tt.tensor(x), tt.tensor(y))
    theirs = torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y))
    assert len(ours) == len(theirs) == 6
    sub, tsub = data.Subset(ours, [4, 0, 2]), torch.utils.data.Subset(theirs, [4, 0, 2])
    both = data.ConcatDataset([ours, sub])
    tboth = torch.utils.data.ConcatDataset([theirs, tsub])
    assert both.cumulative_sizes == tboth.cumulative_sizes == [6, 9]
    for i in [0, 5, 6, 8, -1, -9]:
        assert_same_batches([list(both[i])], [list(tboth[i])])
    plus = ours + sub
    assert isinstance(plus, data.ConcatDataset) and len(plus) == 9
    for bad in (9, -10):
        with pytest.raises(IndexError, match=f"ConcatDataset: index {bad} is out of range"):
            both[bad]


def test_dataset_errors():
    with pytest.raises(ValueError, match=r"TensorDataset: size mismatch .* \[3, 4\]"):
        data.TensorDataset(tt.zeros(3), tt.zeros(4))
    with pytest.raises(TypeError, match="TensorDataset: argument 1 is a list"):
        data.TensorDataset(tt.zeros(3), [1, 2, 3])
    with pytest.raises(ValueError, match="TensorDataset: tensor 0 is 0-d"):
        data.TensorDataset(tt.tensor(1.0))
    with pytest.raises(TypeError, match="RandomSampler: generator must be a tt.Generator"):
        data.RandomSampler(range(3), generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="ConcatDataset: datasets should not be an empty"):
        data.ConcatDataset([])
    with pytest.raises(TypeError, match="ConcatDataset: dataset 0 is an IterableDataset"):
        data.ConcatDataset([data.IterableDataset()])
    with pytest.raises(NotImplementedError, match="must implement __getitem__"):
        data.Dataset()[0]


def test_chain_dataset_and_iterable_addition():
    class Count(data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(self.n))

    assert (
        list(Count(2) + Count(3))
        == list(data.ChainDataset([Count(2), Count(3)]))
        == [0, 1, 0, 1, 2]
    )
    assert [b.tolist() for b in data.DataLoader(Count(3) + Count(2), 2)] == [[0, 1], [2, 0], [1]]


@pytest.mark.parametrize(
    "n, lengths", [(10, [3, 7]), (11, [0.3, 0.3, 0.4]), (10, [0.5, 0.5]), (7, [0.1, 0.9])]
)
def test_random_split_sizes_match_torch_and_partition(torch, n, lengths):
    ours = data.random_split(range(n), lengths, generator=tt.Generator().manual_seed(0))
    theirs = torch.utils.data.random_split(
        range(n), lengths, generator=torch.Generator().manual_seed(0)
    )
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    everything = [i for s in ours for i in s]
    assert sorted(everything) == list(range(n))
    again = data.random_split(range(n), lengths, generator=tt.Generator().manual_seed(0))
    assert [s.indices for s in again] == [s.indices for s in ours]
    tt.manual_seed(4)
    a = data.random_split(range(n), lengths)
    tt.manual_seed(4)
    assert [s.indices for s in data.random_split(range(n), lengths)] == [s.indices for s in a]


def test_random_split_errors():
    with pytest.raises(ValueError, match=r"random_split: lengths \[3, 3\] sum to 6, .* has 7"):
        data.random_split(range(7), [3, 3])
    with pytest.raises(ValueError, match=r"lengths\[1\]=-1"):
        data.random_split(range(2), [3, -1])
    with pytest.raises(ValueError, match=r"random_split: lengths\[0\]=1.5 is a fraction outside"):
        data.random_split(range(2), [1.5, -0.5])
    with pytest.raises(TypeError, match="random_split: generator must be a tt.Generator"):
        data.random_split(range(2), [1, 1], generator=0)
    with pytest.warns(UserWarning, match="split at index 1 is 0"):
        data.random_split(range(2), [0.9, 0.05, 0.05])


# ---- samplers ------------------------------------------------------------------------------------


def test_sequential_and_batch_samplers_match_torch(torch):
    for n, size, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False)]:
        ours = data.BatchSampler(data.SequentialSampler(range(n)), size, drop)
        theirs = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(n)),
                                               size, drop)  # fmt: skip
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_random_sampler_permutations_and_replacement():
    g = tt.Generator().manual_seed(0)
    sampler = data.RandomSampler(range(10), generator=g)
    epochs = [list(sampler) for _ in range(3)]
    assert all(sorted(e) == list(range(10)) for e in epochs) and epochs[0] != epochs[1]
    more = list(data.RandomSampler(range(4), num_samples=10, generator=g))
    assert len(more) == 10 and sorted(more[:8]) == [0, 0, 1, 1, 2, 2, 3, 3]
    drawn = list(data.RandomSampler(range(3), replacement=True, num_samples=300, generator=g))
    assert len(drawn) == 300 and set(drawn) == {0, 1, 2}
    assert len(data.RandomSampler(range(3), replacement=True, num_samples=7)) == 7
    # minGPT's trainer: an "endless" epoch, drawn lazily
    endless = data.RandomSampler(range(5), replacement=True, num_samples=int(1e10), generator=g)
    loader = iter(data.DataLoader(range(5), batch_size=4, sampler=endless))
    assert len(endless) == 10**10 and all(len(next(loader)) == 4 for _ in range(300))
    with pytest.raises(ValueError, match="RandomSampler: num_samples .* got num_samples=0"):
        data.RandomSampler(range(3), num_samples=0)
    with pytest.raises(TypeError, match="RandomSampler: replacement .* got replacement=1"):
        data.RandomSampler(range(3), replacement=1)


def test_subset_and_weighted_samplers():
    g = tt.Generator().manual_seed(1)
    indices = [10, 20, 30, 40]
    drawn = list(data.SubsetRandomSampler(indices, generator=g))
    assert sorted(drawn) == indices
    loader = data.DataLoader(range(100), batch_size=2, sampler=data.SubsetRandomSampler(indices))
    assert sorted(i for b in loader for i in b.tolist()) == indices

    # indices as a NumPy array (e.g. np.flatnonzero(mask)) into a TensorDataset
    ds = data.TensorDataset(tt.arange(10) * 10)
    picked = np.flatnonzero(np.arange(10) % 3 == 0)
    loader = data.DataLoader(ds, batch_size=3, sampler=data.SubsetRandomSampler(picked))
    assert sorted(i for (b,) in loader for i in b.tolist()) == [0, 30, 60, 90]

    weights = [0.0, 1.0, 3.0]
    draws = list(data.WeightedRandomSampler(weights, 4000, generator=g))
    counts = np.bincount(draws, minlength=3)
    assert counts[0] == 0 and abs(counts[2] / counts[1] - 3) < 0.4
    once = list(data.WeightedRandomSampler(tt.tensor(weights), 2, replacement=False, generator=g))
    assert sorted(once) == [1, 2]
    with pytest.raises(ValueError, match="WeightedRandomSampler: cannot draw num_samples=3"):
        data.WeightedRandomSampler(weights, 3, replacement=False)
    with pytest.raises(ValueError, match="WeightedRandomSampler: weights must be a 1-D sequence"):
        data.WeightedRandomSampler([[1.0]], 1)
    with pytest.raises(ValueError, match="non-negative"):
        data.WeightedRandomSampler([1.0, -1.0], 1)


def test_batch_sampler_errors_and_custom_batch_sampler():
    with pytest.raises(ValueError, match="BatchSampler: batch_size .* got batch_size=0"):
        data.BatchSampler(range(3), 0, False)
    with pytest.raises(TypeError, match="BatchSampler: drop_last .* got drop_last=None"):
        data.BatchSampler(range(3), 2, None)

    class LongestFirst(data.Sampler):
        """Buckets by length, as text pipelines do: a subclass of the Sampler base class."""

        def __init__(self, lengths, batch_size):
            self.lengths, self.batch_size = lengths, batch_size

        def __iter__(self):
            order = sorted(range(len(self.lengths)), key=lambda i: -self.lengths[i])
            for start in range(0, len(order), self.batch_size):
                yield order[start : start + self.batch_size]

        def __len__(self):
            return -(-len(self.lengths) // self.batch_size)

    sentences = ["a", "abcd", "ab", "abc", "abcde"]
    loader = data.DataLoader(sentences, batch_sampler=LongestFirst([len(s) for s in sentences], 2))
    assert list(loader) == [["abcde", "abcd"], ["abc", "ab"], ["a"]] and len(loader) == 3
