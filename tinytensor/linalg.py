"""`tinytensor.linalg`: the vector norms of `torch.linalg` (composed from differentiable ops)."""

from .ops.torch_extras import vector_norm


def norm(x, ord=None, dim=None, keepdim=False):  # noqa: A002 - PyTorch's argument name
    """The 2-norm of the flattened input (ord=None) or a vector p-norm along `dim`."""
    if ord is None:
        ord = 2  # noqa: A001
    elif isinstance(ord, str) or (x.ndim == 2 and dim is None):
        raise NotImplementedError("linalg.norm: matrix norms are not supported; use vector_norm")
    return vector_norm(x, ord, dim, keepdim)


__all__ = ["norm", "vector_norm"]
