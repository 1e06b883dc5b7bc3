"""Shape modules: Flatten and Unflatten (as torch.nn), for use inside Sequential."""

from __future__ import annotations

from tinytensor.ops._checks import check_int

from .module import Module


class Flatten(Module):
    """Merges dims start_dim..end_dim into one; the default keeps the batch dim."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        check_int(start_dim, "Flatten", "start_dim"), check_int(end_dim, "Flatten", "end_dim")
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    """Splits dim `dim` into `unflattened_size`."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        check_int(dim, "Unflatten", "dim")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        return x.unflatten(self.dim, self.unflattened_size)
