"""`default_collate` and `default_convert`: samples to batches, as `torch.utils.data`.

`default_collate` turns a list of samples into one batch by the type of the first sample:

    Tensor                  -> stack along a new dim 0              (B, *shape)
    NumPy array / scalar    -> stacked into a Tensor (string and object arrays are errors)
    float / int / bool      -> a float64 / int64 / bool Tensor of shape (B,)
    str / bytes             -> the list as is
    dict (Mapping)          -> a dict of batches, key by key (same keys, same order)
    namedtuple              -> the same namedtuple of batches, field by field
    tuple / list (Sequence) -> a list of batches, position by position (equal lengths required)

`default_convert` is what a DataLoader with `batch_size=None` applies to each sample: NumPy
arrays become Tensors, containers are walked, everything else is left alone.
"""

from __future__ import annotations

import collections.abc
import re

import numpy as np

from ...creation import as_tensor, tensor
from ...ops import stack
from ...tensor import Tensor

__all__ = ["default_collate", "default_convert"]

# NumPy dtypes that cannot become a Tensor: bytes (S, a), unicode (U), Python objects (O)
_STRING_OR_OBJECT = re.compile(r"[SaUO]")

_ERROR = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_collate(batch):
    """Collates a list of samples into a batch (see the module docstring for the rules).

    Example:
        >>> default_collate([(tt.zeros(3), 0), (tt.ones(3), 1)])
        [tensor of shape (2, 3), tensor([0, 1])]
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        shapes = {tuple(t.shape) for t in batch}
        if len(shapes) > 1:
            raise RuntimeError(
                "default_collate: stack expects each tensor to be equal size, got shapes "
                f"{[tuple(t.shape) for t in batch]} (pad them in a collate_fn)"
            )
        return stack(batch, 0)
    if type(elem).__module__ == "numpy" and not isinstance(elem, (np.str_, np.bytes_)):
        if isinstance(elem, np.ndarray) and _STRING_OR_OBJECT.search(elem.dtype.str):
            raise TypeError(_ERROR.format(elem.dtype))
        if isinstance(elem, np.ndarray):
            return default_collate([as_tensor(np.asarray(b)) for b in batch])
        return tensor(np.asarray(batch))  # NumPy scalars keep their dtype
    if isinstance(elem, float):
        return tensor(batch, dtype="float64")
    if isinstance(elem, int):  # also bool: a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(collated)  # keeps OrderedDict and friends
        except TypeError:
            return collated
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        lengths = {len(sample) for sample in batch}
        if len(lengths) > 1:
            raise RuntimeError(
                "default_collate: each element in list of batch should be of equal size, got "
                f"lengths {[len(sample) for sample in batch]}"
            )
        transposed = [list(samples) for samples in zip(*batch)]
        return [default_collate(samples) for samples in transposed]
    raise TypeError(_ERROR.format(type(elem)))


def default_convert(data):
    """NumPy arrays (and scalars) to Tensors, recursively through dicts, tuples and lists."""
    if isinstance(data, Tensor):
        return data
    if type(data).__module__ == "numpy" and not isinstance(data, (np.str_, np.bytes_)):
        if isinstance(data, np.ndarray) and _STRING_OR_OBJECT.search(data.dtype.str):
            return data
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        converted = {key: default_convert(data[key]) for key in data}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, as PyTorch
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
