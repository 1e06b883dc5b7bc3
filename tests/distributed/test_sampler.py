"""DistributedSampler against torch.utils.data.distributed.DistributedSampler, index for index."""

import pytest

from tinytensor.utils.data import Sampler
from tinytensor.utils.data.distributed import DistributedSampler, torch_randperm


@pytest.mark.parametrize("n", [0, 1, 5, 10, 11, 64, 97])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_same_indices_as_torch(torch, n, replicas, shuffle, drop_last):
    from torch.utils.data.distributed import DistributedSampler as TorchSampler

    for rank in range(replicas):
        for seed, epoch in ((0, 0), (5, 3)):
            ours = DistributedSampler(range(n), replicas, rank, shuffle, seed, drop_last)
            theirs = TorchSampler(range(n), replicas, rank, shuffle, seed, drop_last)
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs), (rank, seed, epoch)
            assert len(ours) == len(theirs)


@pytest.mark.parametrize("n, seed", [(1000, 0), (4096, 2**32 + 7), (3, 2**63 - 1)])
def test_permutation_is_torch_randperm(torch, n, seed):
    expected = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    assert torch_randperm(n, seed) == expected


@pytest.mark.parametrize("n, replicas", [(10, 3), (12, 4), (5, 8)])
def test_every_index_once_per_epoch_across_ranks(n, replicas):
    for epoch in range(3):
        shares = []
        for rank in range(replicas):
            sampler = DistributedSampler(range(n), replicas, rank, shuffle=True, seed=1)
            sampler.set_epoch(epoch)
            shares.append(list(sampler))
        everything = [i for share in shares for i in share]
        assert sorted(set(everything)) == list(range(n))  # every index ...
        assert len(everything) == replicas * -(-n // replicas)  # ... once, plus the padding
        assert len(everything) - len(set(everything)) == len(everything) - n  # padding repeats
    orders = []
    for epoch in range(2):
        s = DistributedSampler(range(50), 2, 0, shuffle=True)
        s.set_epoch(epoch)
        orders.append(list(s))
    assert orders[0] != orders[1]  # set_epoch changes the order


def test_is_a_sampler_and_checks_its_arguments():
    assert isinstance(DistributedSampler(range(4), 2, 0), Sampler)
    with pytest.raises(
        ValueError, match=r"invalid rank 2, rank should be in the interval \[0, 1\]"
    ):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be >= 1"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
    with pytest.raises(RuntimeError, match="pass num_replicas and rank, or call"):
        DistributedSampler(range(4))
