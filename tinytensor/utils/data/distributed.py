"""`DistributedSampler`: each rank of a data-parallel job reads its own share of a dataset.

    sampler = DistributedSampler(dataset, shuffle=True, seed=0)   # rank, replicas from dist
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)      # a new order each epoch, the same on every rank
        for batch in loader: ...

As `torch.utils.data.distributed.DistributedSampler`, index for index: every rank computes the
same order (a permutation seeded with seed + epoch, or 0..n-1), pads it by repeating its start
until it divides evenly (or drops the tail with drop_last=True), and rank r takes positions
r, r + R, r + 2R, ... (R = num_replicas). Together the ranks see every index once per epoch
(plus the padding).

NOTE: the permutation is PyTorch's own: torch.randperm on the CPU is a Fisher-Yates shuffle
driven by MT19937 seeded with the 32-bit seed, and NumPy's legacy RandomState is that same
MT19937, so a script ported from PyTorch reads its data in exactly the same order. The
shuffle is a Python loop: about a second per million indices per epoch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from .sampler import Sampler

__all__ = ["DistributedSampler", "torch_randperm"]


def torch_randperm(n: int, seed: int) -> list[int]:
    """The permutation `torch.randperm(n, generator=torch.Generator().manual_seed(seed))` gives.

    Fisher-Yates: for i = 0 .. n-2, swap position i with i + (u_i mod (n - i)), where u_i are
    the 32-bit outputs of MT19937 seeded with seed mod 2**32.
    """
    draws = np.random.RandomState(seed & 0xFFFFFFFF).randint(
        0, 2**32, size=max(n - 1, 0), dtype=np.uint32
    )
    order = list(range(n))
    for i, u in enumerate(draws.tolist()):
        j = i + u % (n - i)
        order[i], order[j] = order[j], order[i]
    return order


class DistributedSampler(Sampler):
    """Restricts sampling to this rank's share of the dataset.

    Args:
        dataset: anything with `len()`.
        num_replicas: how many ranks share the data (default: the process group's world size).
        rank: this rank (default: the process group's rank).
        shuffle: a new permutation each epoch (set with `set_epoch`), else 0..n-1.
        seed: the permutation's seed; it must be the same on every rank.
        drop_last: drop the tail so every rank gets floor(n / R) indices, instead of padding
            with repeated indices up to ceil(n / R).

    Example:
        >>> list(DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=False))
        [1, 4, 7, 0]
    """

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        where = "DistributedSampler"
        if num_replicas is None or rank is None:
            from tinytensor import distributed as dist

            if not dist.is_initialized():
                raise RuntimeError(
                    f"{where}: pass num_replicas and rank, or call "
                    "tinytensor.distributed.init_process_group() first"
                )
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, (int, np.integer)):
            raise TypeError(f"{where}: num_replicas must be an int, got {num_replicas!r}")
        if num_replicas < 1:
            raise ValueError(f"{where}: num_replicas must be >= 1, got {num_replicas}")
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)):
            raise TypeError(f"{where}: rank must be an int, got {rank!r}")
        if not 0 <= rank < num_replicas:
            raise ValueError(
                f"{where}: invalid rank {rank}, rank should be in the interval "
                f"[0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.epoch = 0
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        n = len(dataset)
        if self.drop_last and n % self.num_replicas:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:  # fewer indices than ranks: repeat the whole list as often as needed
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Chooses the epoch's permutation (seed + epoch); call it before each epoch."""
        self.epoch = int(epoch)
