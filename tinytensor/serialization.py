"""Checkpoints in the safetensors format: `tt.save`, `tt.load`, and HF's `model.safetensors` files.

    tt.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": 1000}, "ckpt.st")
    ckpt = tt.load("ckpt.st", map_location="cpu")
    weights = tt.serialization.load_safetensors("model.safetensors")   # dict of numpy arrays

A safetensors file (https://github.com/huggingface/safetensors) is an 8-byte little-endian
header length N, N bytes of JSON naming each tensor's dtype, shape and byte range, then the raw
little-endian tensor bytes. It holds only tensors and a string-to-string metadata map, and unlike
pickle it runs no code when read. `tt.save` stores every tensor of a nested object (dicts, lists,
tuples) under its dotted path ("model.wte.weight", "optim.state.0.exp_avg") and puts a JSON
description of the whole object (the numbers, strings, containers and which tensor goes where)
in the metadata under "tinytensor", so that optimizer states and training metadata round-trip
exactly while the file stays readable by `safetensors.numpy.load_file` and HF tools.

Files are written atomically (temp file in the same directory, fsync, `os.replace`), so a crash
never leaves a half-written checkpoint in place of the previous one.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import struct

import numpy as np

from .backend import Device, is_cupy_array, move_array
from .tensor import Tensor

__all__ = ["save", "load", "load_safetensors", "save_safetensors", "CheckpointError"]

_DESCRIPTION_KEY = "tinytensor"  # metadata entry holding the JSON description of the object
_FORMAT_VERSION = 1
_MAX_HEADER_BYTES = 100_000_000  # the limit the safetensors library itself enforces

_CODE_OF_DTYPE = {
    np.dtype("bool"): "BOOL",
    np.dtype("uint8"): "U8",
    np.dtype("int8"): "I8",
    np.dtype("int16"): "I16",
    np.dtype("uint16"): "U16",
    np.dtype("float16"): "F16",
    np.dtype("int32"): "I32",
    np.dtype("uint32"): "U32",
    np.dtype("float32"): "F32",
    np.dtype("float64"): "F64",
    np.dtype("int64"): "I64",
    np.dtype("uint64"): "U64",
}
# Little-endian on disk whatever the machine; BF16 is read as its raw 16 bits (see _bf16_to_f32).
_DTYPE_OF_CODE = {code: dtype.newbyteorder("<") for dtype, code in _CODE_OF_DTYPE.items()}
_DTYPE_OF_CODE["BF16"] = np.dtype("<u2")

# tinytensor holds these dtypes; other integer tensors of a foreign file are widened to int64.
_TENSOR_DTYPES = {"bool", "uint8", "int8", "float16", "float32", "float64", "int32", "int64"}


class CheckpointError(RuntimeError):
    """A file that is not a readable safetensors checkpoint (truncated, corrupt, wrong format)."""


# ---- the raw format ------------------------------------------------------------------------------


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 (raw uint16 bits) to float32, exactly.

    NOTE: NumPy has no bfloat16. A bf16 number is the top half of the float32 with the same
    sign, exponent and leading mantissa bits, so shifting its 16 bits up gives that float32.
    """
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _write_array(f, array: np.ndarray) -> None:
    """Writes one tensor's bytes (a seam the tests use to simulate a crash mid-write)."""
    f.write(array.reshape(-1).view(np.uint8).data)


def _atomic_write(path: str, write, where: str) -> None:
    """Runs write(f) into a temp file next to `path`, makes it durable, then renames it over.

    os.replace is atomic on POSIX and Windows: readers see the old file or the new one, never a
    mix; if anything fails before it, the temp file is removed and the old file is untouched.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"{where}: cannot write {path}: directory {directory} does not exist"
        )
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666 lets the umask decide the permissions, as for a plain open().
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # The rename itself is durable only once the directory entry is flushed (POSIX only).
    with contextlib.suppress(OSError, AttributeError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def save_safetensors(tensors: dict, path, metadata: dict | None = None) -> None:
    """Writes a flat `{name: array or Tensor}` dict as a safetensors file, atomically.

    Args:
        tensors: names (str) to numpy/cupy arrays or Tensors; copied to the host.
        path: the file to write (replaced atomically if it exists).
        metadata: optional string-to-string map stored in the header ("__metadata__").
    """
    where = "save_safetensors"
    path = _fspath(path, where)
    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(
                f"{where}: tensor names must be strings other than '__metadata__', got {name!r}"
            )
        arrays[name] = _host_array(value, f"{where}: tensor {name!r}")
    if metadata is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise TypeError(f"{where}: metadata must map strings to strings")
    # Widest dtypes first so that every tensor starts at a multiple of its itemsize (the order
    # the safetensors library writes; it lets readers map the data without copying).
    order = sorted(arrays, key=lambda name: -arrays[name].dtype.itemsize)
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in order:
        a = arrays[name]
        header[name] = {
            "dtype": _CODE_OF_DTYPE[a.dtype.newbyteorder("=")],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # pad so that the data starts 8-byte aligned

    def write(f):
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for name in order:
            _write_array(f, arrays[name])

    _atomic_write(path, write, where)


def _host_array(value, what: str) -> np.ndarray:
    """A C-contiguous little-endian numpy copy-or-view of a Tensor or array, for writing."""
    data = value._array if isinstance(value, Tensor) else value
    if is_cupy_array(data):
        data = move_array(data, "cpu")
    if not isinstance(data, np.ndarray):
        raise TypeError(f"{what} is a {type(value).__name__}, not a Tensor or array")
    if data.dtype.newbyteorder("=") not in _CODE_OF_DTYPE:
        raise TypeError(f"{what} has dtype {data.dtype}, which safetensors cannot store")
    # NOTE: not np.ascontiguousarray, which turns a 0-d array into shape (1,)
    return np.asarray(data, dtype=data.dtype.newbyteorder("<"), order="C")


def _corrupt(path, problem: str) -> CheckpointError:
    return CheckpointError(f"cannot read {path}: {problem}")


def _read_safetensors(path, where: str) -> tuple[dict, dict]:
    """(arrays by name in header order, metadata) of a safetensors file; BF16 becomes float32.

    Every length and offset is checked against the file size before anything is read, so a
    truncated or foreign file gives one clear CheckpointError naming the path.
    """
    path = _fspath(path, where)
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no such file: {path}") from None
    except IsADirectoryError:
        raise IsADirectoryError(f"{where}: {path} is a directory, not a checkpoint file") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise _corrupt(
                path,
                f"the file has {size} bytes, too few for a safetensors header (truncated or empty)",
            )
        (header_len,) = struct.unpack("<Q", f.read(8))
        if header_len > size - 8 or header_len > _MAX_HEADER_BYTES:
            raise _corrupt(
                path,
                f"its first 8 bytes give a header of {header_len} bytes but the file has "
                f"{size} bytes: the file is truncated or not a safetensors file",
            )
        try:
            header = json.loads(f.read(header_len).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _corrupt(
                path, "its header is not valid JSON: the file is not a safetensors file"
            ) from None
        if not isinstance(header, dict):
            raise _corrupt(path, "its header is not a JSON object: not a safetensors file")
        metadata = header.pop("__metadata__", None) or {}
        data_len = size - 8 - header_len
        entries = [
            (name, _check_entry(path, name, info, data_len)) for name, info in header.items()
        ]
        end = max((stop for _, (_, _, _, stop) in entries), default=0)
        if end != data_len:
            raise _corrupt(
                path, f"its header describes {end} bytes of tensor data but {data_len} follow it"
            )
        arrays = {}
        for name, (dtype, shape, start, stop) in entries:
            array = np.empty(shape, dtype)
            f.seek(8 + header_len + start)
            if f.readinto(array.reshape(-1).view(np.uint8)) != stop - start:
                raise _corrupt(path, f"tensor {name!r} could not be read in full (truncated?)")
            array = array.astype(array.dtype.newbyteorder("="), copy=False)
            arrays[name] = _bf16_to_f32(array) if header[name]["dtype"] == "BF16" else array
    return arrays, metadata


def _check_entry(path, name, info, data_len):
    """Validates one header entry: (dtype, shape, start, stop) or a CheckpointError."""
    try:
        code, shape, (start, stop) = info["dtype"], info["shape"], info["data_offsets"]
        shape = tuple(int(n) for n in shape)
        start, stop = int(start), int(stop)
    except (TypeError, KeyError, ValueError):
        raise _corrupt(
            path, f"the header entry of tensor {name!r} is malformed: {info!r}"
        ) from None
    if code not in _DTYPE_OF_CODE:
        raise _corrupt(path, f"tensor {name!r} has dtype {code}, which tinytensor cannot read")
    dtype = _DTYPE_OF_CODE[code]
    nbytes = math.prod(shape) * dtype.itemsize
    if min(shape, default=0) < 0 or not 0 <= start <= stop or stop - start != nbytes:
        raise _corrupt(
            path,
            f"tensor {name!r} ({code}, shape {list(shape)}) has byte range [{start}, {stop}], "
            f"which does not hold its {nbytes} bytes",
        )
    if stop > data_len:
        raise _corrupt(
            path,
            f"tensor {name!r} ends at data byte {stop} but only {data_len} bytes of data "
            "follow the header: the file is truncated",
        )
    return dtype, shape, start, stop


def load_safetensors(path) -> dict[str, np.ndarray]:
    """Reads every tensor of a safetensors file (e.g. HF's model.safetensors) as numpy arrays.

    bfloat16 tensors come back as float32 (exactly: every bf16 value is a float32 value);
    float16 stays float16. No torch needed.

    Args:
        path: the .safetensors file.

    Returns:
        `{name: np.ndarray}` in the file's order.

    Example:
        >>> sd = load_safetensors("gpt2/model.safetensors")
        >>> sd["wte.weight"].shape
        (50257, 768)
    """
    arrays, _ = _read_safetensors(path, "load_safetensors")
    return arrays


# ---- tt.save / tt.load -------------------------------------------------------------------------


def _fspath(path, where):
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(
            f"{where}: expected a file path (str or os.PathLike), got {type(path).__name__}"
        ) from None


class _Packer:
    """Turns a nested object into (JSON description, {tensor name: array}).

    Description grammar: JSON scalars stand for themselves (str, int, finite float, bool,
    None); containers and everything else are one-key objects: {"dict": [[key, value], ...]},
    {"list": [...]}, {"tuple": [...]}, {"float": "nan" | "inf" | "-inf"},
    {"numpy": dtype, "value": v} (a numpy scalar), {"ndarray": name},
    {"tensor": name, "requires_grad": bool, "device": "cpu" | "cuda:0"}.
    """

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
        # numpy scalars first: np.float64 is a subclass of float and would lose its type
        if isinstance(obj, np.generic) and obj.dtype.newbyteorder("=") in _CODE_OF_DTYPE:
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
        where = ".".join(path) or "the top level"
        hint = " (save its .state_dict() instead)" if hasattr(obj, "state_dict") else ""
        raise TypeError(
            f"tt.save: cannot store a {type(obj).__name__} at {where}{hint}; a checkpoint holds "
            "Tensors, numpy arrays, numbers, strings, None, and dicts, lists, tuples of them"
        )

    def pack_key(self, key, path):
        if isinstance(key, (str, int, float, bool)) or key is None:
            return self.pack(key, path)
        if isinstance(key, tuple):
            return self.pack(key, path)
        raise TypeError(
            f"tt.save: a dict key at {'.'.join(path) or 'the top level'} is a "
            f"{type(key).__name__}; keys must be str, int, float, bool, None or tuples of them"
        )

    def pack_array(self, obj, path):
        if id(obj) in self.seen:
            return self.seen[id(obj)]
        name = self.name_for(path)
        self.arrays[name] = _host_array(obj, f"tt.save: the tensor at {name}")
        if isinstance(obj, Tensor):
            desc = {"tensor": name, "requires_grad": obj.requires_grad, "device": str(obj.device)}
        else:
            desc = {"ndarray": name}
        self.seen[id(obj)] = desc
        return desc


def save(obj, path) -> None:
    """Saves Tensors and nested containers of them (state dicts, optimizer states) to `path`.

    The file is a safetensors file: tensors keep their dtype and bits exactly, and a plain
    `{name: Tensor}` state dict is stored under its own names, readable by HF tools. It is
    written atomically: the previous file at `path` stays intact until the new one is complete.

    Args:
        obj: Tensors, numpy arrays, Python numbers, strings, None, numpy scalars, and dicts /
            lists / tuples nesting them (e.g. `{"model": sd, "optim": opt.state_dict(),
            "step": 10, "rng": gen.get_state()}`). A tensor that appears twice is stored once
            and loads back as one shared tensor.
        path: the file to write.

    Example:
        >>> tt.save(model.state_dict(), "model.safetensors")
    """
    path = _fspath(path, "tt.save")
    packer = _Packer()
    description = packer.pack(obj, [])
    metadata = {
        # NOTE: "pt" is the format tag HF's loaders accept; the bytes and names follow the
        # same conventions as a PyTorch state dict saved with safetensors.
        "format": "pt",
        _DESCRIPTION_KEY: json.dumps(description, separators=(",", ":")),
        f"{_DESCRIPTION_KEY}_version": str(_FORMAT_VERSION),
    }
    save_safetensors(packer.arrays, path, metadata)


class _Unpacker:
    def __init__(self, path, arrays, device):
        self.path, self.arrays, self.device = path, arrays, device
        self.made: dict[str, object] = {}  # tensor name -> object (shared tensors stay shared)

    def unpack(self, d):
        if not isinstance(d, (dict, list)):
            return d
        if isinstance(d, list):
            raise self.bad(d)
        if "dict" in d:
            return {self.key(k): self.unpack(v) for k, v in d["dict"]}
        if "list" in d:
            return [self.unpack(v) for v in d["list"]]
        if "tuple" in d:
            return tuple(self.unpack(v) for v in d["tuple"])
        if "float" in d:
            return float(d["float"])
        if "numpy" in d:
            return np.dtype(d["numpy"]).type(self.unpack(d["value"]))
        if "tensor" in d or "ndarray" in d:
            return self.array(d)
        raise self.bad(d)

    def key(self, k):
        k = self.unpack(k)
        return tuple(k) if isinstance(k, list) else k

    def array(self, d):
        name = d.get("tensor", d.get("ndarray"))
        if name in self.made:
            return self.made[name]
        if name not in self.arrays:
            raise _corrupt(self.path, f"its description names tensor {name!r}, which it lacks")
        array = self.arrays[name]
        if "ndarray" in d:
            obj = array
        else:
            device = self.device or Device(d.get("device", "cpu"))
            obj = Tensor._wrap(move_array(array, device), False, None)
            if d.get("requires_grad"):
                obj.requires_grad_(True)
        self.made[name] = obj
        return obj

    def bad(self, d):
        return _corrupt(self.path, f"its tinytensor description has an unknown entry {d!r:.80}")


def _target_device(map_location, path):
    if map_location is None:
        return None
    if not isinstance(map_location, (str, Device)):
        raise TypeError(
            f"tt.load: map_location must be None, 'cpu', 'cuda' or a tt.device, got "
            f"{type(map_location).__name__}"
        )
    return Device(map_location)


def _check_cuda(devices, path, map_location):
    from . import cuda

    if any(Device(d).type == "cuda" for d in devices) and not cuda.is_available():
        if map_location is None:
            raise RuntimeError(
                f"tt.load: {path} holds tensors saved on cuda, but no CUDA GPU is available "
                "here; pass map_location='cpu' to load them onto the CPU"
            )
        raise RuntimeError(
            f"tt.load: map_location={str(map_location)!r} but no CUDA GPU is available here "
            "(CuPy missing or no device); use map_location='cpu'"
        )


def _saved_devices(description) -> set:
    found, stack = set(), [description]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            if "tensor" in d:
                found.add(d.get("device", "cpu"))
            stack.extend(d.values())
        elif isinstance(d, list):
            stack.extend(d)
    return found


def load(path, map_location=None, weights_only=None):
    """Loads what `tt.save` wrote (or any safetensors file, as a `{name: Tensor}` dict).

    Args:
        path: the file to read.
        map_location: None puts each tensor back on the device it was saved from; "cpu" or
            "cuda" (or a tt.device) puts all of them there.
        weights_only: accepted for PyTorch compatibility and ignored: loading never runs code.

    Returns:
        The saved object, with the same nesting, key types (int keys stay ints), tuples, numbers
        and bit-exact tensors. A safetensors file from elsewhere gives `{name: Tensor}`, with
        bfloat16 widened to float32.

    Raises:
        FileNotFoundError: no file at `path`.
        CheckpointError: the file is truncated, corrupt or not a safetensors file.
    """
    del weights_only
    path = _fspath(path, "tt.load")
    device = _target_device(map_location, path)
    arrays, metadata = _read_safetensors(path, "tt.load")
    text = metadata.get(_DESCRIPTION_KEY)
    if text is None:  # a file from elsewhere (e.g. HF's model.safetensors): a flat state dict
        _check_cuda([device] if device else [], path, map_location)
        return {name: _foreign_tensor(a, device) for name, a in arrays.items()}
    version = metadata.get(f"{_DESCRIPTION_KEY}_version", "1")
    if not version.isdigit() or int(version) > _FORMAT_VERSION:
        raise _corrupt(
            path,
            f"it was written in checkpoint format {version}, newer than this "
            f"tinytensor reads ({_FORMAT_VERSION}); upgrade tinytensor",
        )
    try:
        description = json.loads(text)
    except json.JSONDecodeError:
        raise _corrupt(path, "its tinytensor description is not valid JSON") from None
    _check_cuda([device] if device else _saved_devices(description), path, map_location)
    return _Unpacker(path, arrays, device).unpack(description)


def _foreign_tensor(array, device) -> Tensor:
    if str(array.dtype) not in _TENSOR_DTYPES:
        array = array.astype(np.int64)  # I16/U16/U32/U64: integer types tinytensor lacks
    return Tensor._wrap(move_array(array, device or "cpu"), False, None)
