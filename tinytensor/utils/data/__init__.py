"""`tt.utils.data`: datasets, samplers and the DataLoader, as `torch.utils.data`.

from tinytensor.utils.data import DataLoader, TensorDataset, random_split

train, valid = random_split(TensorDataset(x, y), [0.9, 0.1])
for xb, yb in DataLoader(train, batch_size=32, shuffle=True, num_workers=2):
    ...

dataset.py     Dataset, IterableDataset, TensorDataset, Subset, ConcatDataset, ChainDataset,
               random_split
sampler.py     Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler,
               WeightedRandomSampler, BatchSampler
collate.py     default_collate, default_convert
dataloader.py  DataLoader (worker processes: worker.py, loading: fetch.py)
distributed.py DistributedSampler (each rank of a data-parallel job reads its own share)
"""

from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from .worker import WorkerInfo, get_worker_info

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "Subset",
    "ConcatDataset",
    "ChainDataset",
    "random_split",
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
    "BatchSampler",
    "DistributedSampler",
    "DataLoader",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "WorkerInfo",
]
