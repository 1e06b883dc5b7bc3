"""`tt.nn.utils`: gradient clipping and the parameter-vector conversions, where PyTorch users
look for them (`nn.utils.clip_grad_norm_`, `nn.utils.parameters_to_vector`).

The clipping lives in tinytensor/optim/clip.py, next to the optimizers that use it.
"""

from tinytensor.function import no_grad
from tinytensor.ops import cat
from tinytensor.optim.clip import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from tinytensor.tensor import Tensor

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
    "parameters_to_vector",
    "vector_to_parameters",
]


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and joined into one vector (on the graph, as torch's)."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters) -> None:
    """Copies consecutive slices of `vec` into the parameters (the inverse of
    parameters_to_vector)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    parameters = list(parameters)
    total = sum(p.numel() for p in parameters)
    if vec.ndim != 1 or vec.numel() != total:
        raise ValueError(
            f"vector_to_parameters: vec has shape {tuple(vec.shape)}, the parameters hold "
            f"{total} elements; pass a 1-D vector of that length"
        )
    start = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[start : start + n].reshape(p.shape))
            start += n
