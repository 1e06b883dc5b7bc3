"""Fetchers: turn what the sampler yields into a batch, the same way in the main process and in
worker processes.

    map-style, batching:   indices [i, j, ...]  -> collate_fn([ds[i], ds[j], ...])
    map-style, no batching (batch_size=None): index i -> collate_fn(ds[i])
    iterable, batching:    the next batch_size samples of iter(ds) -> collate_fn(samples)
    iterable, no batching: the next sample -> collate_fn(sample)
"""

from __future__ import annotations


class MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation = dataset, auto_collation
        self.collate_fn, self.drop_last = collate_fn, drop_last

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):  # a dataset that loads a whole batch at once
            samples = getitems(index)
        else:
            samples = [self.dataset[i] for i in index]
        return self.collate_fn(samples)


class IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn, self.drop_last = collate_fn, drop_last
        self.ended = False

    def fetch(self, batch_of_nones):
        """The sampler of an iterable dataset yields None (or lists of None): only the count
        matters, one sample per entry. Raises StopIteration when the stream has ended."""
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        samples = []
        for _ in batch_of_nones:
            try:
                samples.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not samples or (self.ended and self.drop_last and len(samples) < len(batch_of_nones)):
            raise StopIteration
        return self.collate_fn(samples)
