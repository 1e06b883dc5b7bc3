"""Small data pipelines written the way PyTorch projects write them, once for either library.

Each takes `lib` (torch or tinytensor) and uses only `lib.utils.data` and tensor basics, so the
same code runs on both and the results can be compared. The datasets are classes made inside a
function (they subclass `lib`'s Dataset), so worker processes get them by fork, Linux's default
start method, in both libraries.
"""

import itertools

import numpy as np

PAD = 0


def make_regression(n=50, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = x @ np.array([[1.0], [-2.0], [0.5]]) + 0.1 * rng.normal(size=(n, 1))
    return x, y


def regression_training(lib, batch_size=8, drop_last=False, epochs=3, num_workers=0):
    """A TensorDataset + DataLoader + SGD loop; returns batch shapes, losses and the weights."""
    data = lib.utils.data
    x, y = make_regression()
    ds = data.TensorDataset(lib.tensor(x), lib.tensor(y))
    loader = data.DataLoader(
        ds, batch_size=batch_size, shuffle=False, drop_last=drop_last, num_workers=num_workers
    )
    w = lib.zeros(3, 1, dtype=lib.float64, requires_grad=True)
    b = lib.zeros(1, dtype=lib.float64, requires_grad=True)
    opt = lib.optim.SGD([w, b], lr=0.1, momentum=0.9)
    shapes, losses = [], []
    for _ in range(epochs):
        for xb, yb in loader:
            shapes.append((tuple(xb.shape), tuple(yb.shape)))
            loss = ((xb @ w + b - yb) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return shapes, losses, w.detach().numpy().copy(), len(loader)


# ---- a map-style text dataset with a padding collate_fn ------------------------------------------

SENTENCES = [
    "the cat sat on the mat",
    "a dog",
    "tensors flow through the graph",
    "hello",
    "one two three four five six seven",
    "padding makes batches rectangular",
    "short one",
]


def make_char_dataset(lib):
    class Chars(lib.utils.data.Dataset):
        """Sentence i as (character ids, label = the length's parity)."""

        def __init__(self, sentences):
            self.sentences = sentences

        def __len__(self):
            return len(self.sentences)

        def __getitem__(self, i):
            ids = [ord(c) - 96 if c != " " else 27 for c in self.sentences[i]]
            return lib.tensor(ids, dtype=lib.int64), len(ids) % 2

    return Chars(SENTENCES)


def pad_collate(lib):
    """A collate_fn that right-pads variable-length sequences: (ids, mask, lengths, labels)."""

    def collate(batch):
        lengths = [len(ids) for ids, _ in batch]
        width = max(lengths)
        padded = lib.full((len(batch), width), PAD, dtype=lib.int64)
        for row, (ids, _) in enumerate(batch):
            padded[row, : len(ids)] = ids
        mask = padded != PAD
        labels = lib.tensor([label for _, label in batch])
        return padded, mask, lib.tensor(lengths), labels

    return collate


# ---- an iterable dataset sharded over workers ----------------------------------------------------


def make_counting_stream(lib, n=23):
    class CountingStream(lib.utils.data.IterableDataset):
        """Samples 0..n-1 as float vectors [i, i²]; each worker takes every num_workers-th."""

        def __iter__(self):
            info = lib.utils.data.get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            for i in itertools.islice(range(n), start, None, step):
                yield {"x": lib.tensor([float(i), float(i * i)], dtype=lib.float32), "index": i}

    return CountingStream()
