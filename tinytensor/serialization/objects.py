"""Nested Python objects <-> (a JSON description, {tensor name: array}).

`tt.save` stores every tensor of a nested object (dicts, lists, tuples) under its dotted path
("model.wte.weight", "optim.state.0.exp_avg") and describes the whole object (numbers,
strings, containers, and which tensor goes where) in JSON, so that optimizer states and training
metadata round-trip exactly while the file stays a plain safetensors file.

Description grammar: JSON scalars stand for themselves (str, int, finite float, bool, None);
containers and everything else are one-key objects: {"dict": [[key, value], ...]},
{"list": [...]}, {"tuple": [...]}, {"float": "nan" | "inf" | "-inf"},
{"numpy": dtype, "value": v} (a numpy scalar), {"ndarray": name},
{"tensor": name, "requires_grad": bool, "device": "cpu" | "cuda:0"}.

Unpacking validates every node: a description is data from a file, and a file can lie.
"""

from __future__ import annotations

import math

import numpy as np

from ..backend import Device, is_cupy_array, move_array
from ..tensor import Tensor
from .safetensors_format import CODE_OF_DTYPE, is_storable

MAX_DEPTH = 64  # containers nested deeper than this are refused on save and on load
_NUMPY_SCALARS = {str(dtype): dtype for dtype in CODE_OF_DTYPE}
_SPECIAL_FLOATS = {"nan", "inf", "-inf"}


def host_array(value, what: str) -> np.ndarray:
    """A C-contiguous little-endian numpy copy-or-view of a Tensor or array, for writing."""
    data = value._array if isinstance(value, Tensor) else value
    if is_cupy_array(data):
        data = move_array(data, "cpu")
    if not isinstance(data, np.ndarray):
        raise TypeError(f"{what} is a {type(value).__name__}, not a Tensor or array")
    if not is_storable(data):
        raise TypeError(f"{what} has dtype {data.dtype}, which safetensors cannot store")
    # NOTE: not np.ascontiguousarray, which turns a 0-d array into shape (1,)
    return np.asarray(data, dtype=data.dtype.newbyteorder("<"), order="C")


def _where(path) -> str:
    return ".".join(path) or "the top level"


class Packer:
    """Turns a nested object into (JSON description, {tensor name: array})."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.seen: dict[int, dict] = {}  # id -> description: one tensor saved once (tied weights)

    def name_for(self, path: list[str]) -> str:
        name = ".".join(path) or "tensor"
        base, n = name, 1
        while name in self.arrays or name == "__metadata__":
            name, n = f"{base}#{n}", n + 1
        return name

    def pack(self, obj, path: list[str]):
        if len(path) > MAX_DEPTH:
            raise ValueError(
                f"tt.save: the object nests more than {MAX_DEPTH} containers deep at "
                f"{_where(path[:8])}...; checkpoints are limited to {MAX_DEPTH} levels"
            )
        # numpy scalars first: np.float64 is a subclass of float and would lose its type
        if isinstance(obj, np.generic) and is_storable(np.asarray(obj)):
            return {"numpy": str(obj.dtype), "value": self.pack(obj.item(), path)}
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj) if math.isfinite(obj) else {"float": repr(float(obj))}
        if isinstance(obj, (Tensor, np.ndarray)) or is_cupy_array(obj):
            return self.pack_array(obj, path)
        if isinstance(obj, dict):
            return {
                "dict": [
                    [self.pack_key(k, path), self.pack(v, [*path, str(k)])] for k, v in obj.items()
                ]
            }
        if isinstance(obj, (list, tuple)):
            kind = "tuple" if isinstance(obj, tuple) else "list"
            return {kind: [self.pack(v, [*path, str(i)]) for i, v in enumerate(obj)]}
        raise TypeError(_unsupported(obj, path))

    def pack_key(self, key, path):
        if isinstance(key, (str, int, float, bool, tuple)) or key is None:
            return self.pack(key, path)
        raise TypeError(
            f"tt.save: a dict key at {_where(path)} is a {type(key).__name__}; keys must be "
            "str, int, float, bool, None or tuples of them"
        )

    def pack_array(self, obj, path):
        if id(obj) in self.seen:
            return self.seen[id(obj)]
        name = self.name_for(path)
        self.arrays[name] = host_array(obj, f"tt.save: the tensor at {name}")
        if isinstance(obj, Tensor):
            desc = {"tensor": name, "requires_grad": obj.requires_grad, "device": str(obj.device)}
        else:
            desc = {"ndarray": name}
        self.seen[id(obj)] = desc
        return desc


def _unsupported(obj, path) -> str:
    kind = type(obj).__name__
    where = "" if not path else f" at {_where(path)}"
    if hasattr(obj, "state_dict"):
        # nn.Module, optimizers, schedulers: PyTorch pickles the object itself; we store data
        # only, never code, so the object has to be rebuilt and its state loaded into it.
        example = "model" if hasattr(obj, "parameters") else "optimizer"
        return (
            f"tt.save: cannot save a whole {kind} object{where}: tinytensor checkpoints hold "
            f"tensors and plain data, never pickled objects. Save its state_dict() instead: "
            f"tt.save({example}.state_dict(), path), and restore it with "
            f"{example}.load_state_dict(tt.load(path))"
        )
    return (
        f"tt.save: cannot store a {kind}{where}; a checkpoint holds Tensors, numpy arrays, "
        "numbers, strings, None, and dicts, lists, tuples of them"
    )


class DescriptionError(ValueError):
    """A description node that is not in the grammar; load turns it into a CheckpointError."""


class Unpacker:
    """Rebuilds the object a description describes, from the file's arrays."""

    def __init__(self, arrays: dict[str, np.ndarray], target_device):
        self.arrays = arrays
        self.target_device = target_device  # callable: saved device string -> Device
        self.made: dict[str, object] = {}  # tensor name -> object (shared tensors stay shared)

    def unpack(self, d, depth=0):
        if depth > MAX_DEPTH:
            raise DescriptionError(f"containers nest more than {MAX_DEPTH} deep")
        if d is None or isinstance(d, (bool, int, str)):
            return d
        if isinstance(d, float):
            return d
        if not isinstance(d, dict) or len(d) == 0:
            raise DescriptionError(f"unknown entry {d!r:.80}")
        if "dict" in d:
            pairs = _expect(d, "dict", list)
            if not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                raise DescriptionError(f"a dict entry is not [key, value] pairs: {d!r:.80}")
            return {self.key(k, depth): self.unpack(v, depth + 1) for k, v in pairs}
        if "list" in d:
            return [self.unpack(v, depth + 1) for v in _expect(d, "list", list)]
        if "tuple" in d:
            return tuple(self.unpack(v, depth + 1) for v in _expect(d, "tuple", list))
        if "float" in d:
            if d["float"] not in _SPECIAL_FLOATS:
                raise DescriptionError(f"unknown special float {d['float']!r:.40}")
            return float(d["float"])
        if "numpy" in d:
            dtype = _NUMPY_SCALARS.get(d["numpy"])
            value = self.unpack(d.get("value"), depth + 1)
            if dtype is None or not isinstance(value, (bool, int, float)):
                raise DescriptionError(f"bad numpy scalar {d!r:.80}")
            return dtype.type(value)
        if "tensor" in d or "ndarray" in d:
            return self.array(d)
        raise DescriptionError(f"unknown entry {d!r:.80}")

    def key(self, k, depth):
        k = self.unpack(k, depth + 1)
        return tuple(k) if isinstance(k, list) else k

    def array(self, d):
        name = d.get("tensor", d.get("ndarray"))
        if not isinstance(name, str):
            raise DescriptionError(f"a tensor entry without a name: {d!r:.80}")
        if name in self.made:
            return self.made[name]
        if name not in self.arrays:
            raise DescriptionError(f"it names tensor {name!r}, which the file lacks")
        array = self.arrays[name]
        if "ndarray" in d:
            obj = array
        else:
            requires_grad = d.get("requires_grad", False)
            saved_device = d.get("device", "cpu")
            if not isinstance(requires_grad, bool) or not isinstance(saved_device, str):
                raise DescriptionError(f"bad tensor entry {d!r:.80}")
            if requires_grad and array.dtype.kind != "f":
                raise DescriptionError(f"integer tensor {name!r} cannot require gradients")
            device = self.target_device(saved_device)
            obj = Tensor._wrap(move_array(array, device), requires_grad, None)
        self.made[name] = obj
        return obj


def _expect(d, key, kind):
    if len(d) != 1 or not isinstance(d[key], kind):
        raise DescriptionError(f"malformed {key!r} entry {d!r:.80}")
    return d[key]


def saved_devices(description) -> set:
    """The device strings the description's tensors were saved from."""
    found, stack = set(), [description]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            if "tensor" in d and isinstance(d.get("device", "cpu"), str):
                found.add(d.get("device", "cpu"))
            stack.extend(d.values())
        elif isinstance(d, list):
            stack.extend(d)
    return found


def check_saved_device(device: str) -> Device:
    try:
        return Device(device)
    except (TypeError, ValueError):
        raise DescriptionError(f"unknown device {device!r:.40}") from None
