"""`Embedding`: a lookup table of learned vectors, one row per id."""

from __future__ import annotations

from tinytensor.creation import empty
from tinytensor.function import no_grad
from tinytensor.ops import embedding
from tinytensor.ops._checks import check_int

from . import init
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    """z = W[ids], as `torch.nn.Embedding`.

    Args:
        num_embeddings: size of the table (vocabulary, positions, buckets).
        embedding_dim: size of each vector.
        padding_idx: this row is initialized to zeros and never receives a gradient (as
            PyTorch); negative values count from the end.
        device, dtype: where and in which float type to create the table.

    Shape:
        ids (*) integer -> (*, embedding_dim); `weight` is (num_embeddings, embedding_dim).

    Initialized as PyTorch: W ~ N(0, 1).

    Example:
        >>> nn.Embedding(10, 4)(tt.tensor([[1, 2, 3]])).shape
        (1, 3, 4)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = check_int(num_embeddings, "Embedding", "num_embeddings", minimum=0)
        self.embedding_dim = check_int(embedding_dim, "Embedding", "embedding_dim", minimum=0)
        if padding_idx is not None:
            check_int(padding_idx, "Embedding", "padding_idx")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx {padding_idx} is out of range for {num_embeddings} "
                    "embeddings"
                )
            padding_idx = padding_idx % num_embeddings
        self.padding_idx = padding_idx
        self.weight = Parameter(empty(num_embeddings, embedding_dim, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight._array[self.padding_idx] = 0

    def forward(self, ids):
        return embedding(ids, self.weight, padding_idx=self.padding_idx)

    def extra_repr(self):
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"
