"""Checkpoints in the safetensors format: `tt.save`, `tt.load`, and HF's `model.safetensors` files.

    tt.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": 1000}, "ckpt.st")
    ckpt = tt.load("ckpt.st", map_location="cpu")
    weights = tt.serialization.load_safetensors("model.safetensors")   # dict of numpy arrays

A checkpoint is a plain safetensors file, readable by `safetensors.numpy.load_file` and HF
tools: the tensors under their dotted paths, and in the metadata a JSON description of the
whole object (objects.py) with a CRC-32 per tensor and one for the description, so that a
flipped bit anywhere is an error naming what changed, never a silently different model.

Loading trusts nothing (files.py, safetensors_format.py): regular files only, the header
checked by the safetensors library's own parser before anything is allocated, JSON size and
depth capped, every failure a `CheckpointError` naming the file and the problem. Nothing is
ever unpickled, so no file can run code.

Saving to a path is atomic (temp file, fsync, `os.replace`): a crash never leaves a half-written
checkpoint in place of the previous one, and the next save removes temp files that a killed
save left behind.
"""

from __future__ import annotations

import io
import json
import zlib

import numpy as np

from ..backend import Device, move_array
from ..tensor import Tensor
from . import files, safetensors_format
from .files import CheckpointError, CheckpointNotFoundError
from .objects import (
    MAX_DEPTH,
    DescriptionError,
    Packer,
    Unpacker,
    check_saved_device,
    host_array,
    saved_devices,
)
from .safetensors_format import tensor_checksum

__all__ = [
    "save",
    "load",
    "load_safetensors",
    "save_safetensors",
    "read_safetensors",
    "CheckpointError",
    "CheckpointNotFoundError",
]

# Metadata entries of a tinytensor checkpoint.
_DESCRIPTION_KEY = "tinytensor"  # the JSON description of the saved object
_VERSION_KEY = "tinytensor_version"
_CHECKSUMS_KEY = "tinytensor_checksums"  # {"description": crc32, "tensors": {name: crc32}}
_FORMAT_VERSION = 2  # 1: no checksums (still read); 2: checksums
# A container level takes 3 JSON levels ({"dict": [[key, value]]}).
_DESCRIPTION_MAX_JSON_DEPTH = 3 * MAX_DEPTH + 4

# tinytensor holds these dtypes; other integer tensors of a foreign file are widened to int64.
_TENSOR_DTYPES = {"bool", "uint8", "int8", "float16", "float32", "float64", "int32", "int64"}


# ---- the raw format ------------------------------------------------------------------------------


def read_safetensors(source, where: str) -> tuple[str, dict[str, np.ndarray], dict[str, str]]:
    """(the file's name for messages, {name: array} in file order, metadata) of a safetensors
    file, given as a path or a binary file object. Every failure is a CheckpointError."""
    if hasattr(source, "read"):  # a file object: its bytes, wherever they come from
        name, raw = files.read_file(source, where)
        arrays, metadata = safetensors_format.read_bytes(raw, name, where)
    else:
        with files.open_regular_file(source, where) as (f, name):
            arrays, metadata = safetensors_format.read_open_file(f, name, where)
    if _CHECKSUMS_KEY in metadata:  # a file tt.save wrote: verify it, whoever reads it
        _verify_checksums(where, name, arrays, metadata)
    return name, arrays, metadata


def load_safetensors(path) -> dict[str, np.ndarray]:
    """Reads every tensor of a safetensors file (e.g. HF's model.safetensors) as numpy arrays.

    bfloat16 tensors come back as float32 (exactly: every bf16 value is a float32 value);
    float16 stays float16. No torch needed.

    Args:
        path: the .safetensors file (a path or a binary file object).

    Returns:
        `{name: np.ndarray}` in the file's order.

    Raises:
        CheckpointError: not a regular file, or not a valid safetensors file (the message
            names the file and what is wrong).

    Example:
        >>> sd = load_safetensors("gpt2/model.safetensors")
        >>> sd["wte.weight"].shape
        (50257, 768)
    """
    return read_safetensors(path, "load_safetensors")[1]


def save_safetensors(tensors: dict, path, metadata: dict | None = None) -> None:
    """Writes a flat `{name: array or Tensor}` dict as a safetensors file.

    Args:
        tensors: names (str) to numpy/cupy arrays or Tensors; copied to the host.
        path: the file to write (replaced atomically if it exists), or a binary file object.
        metadata: optional string-to-string map stored in the header ("__metadata__").
    """
    where = "save_safetensors"
    arrays = {}
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(
                f"{where}: tensor names must be strings other than '__metadata__', got {name!r}"
            )
        arrays[name] = host_array(value, f"{where}: tensor {name!r}")
    if metadata is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise TypeError(f"{where}: metadata must map strings to strings")
    _write(path, lambda f: safetensors_format.write(f, arrays, metadata), where)


def _write(target, write, where) -> None:
    if hasattr(target, "write"):  # a file object (io.BytesIO, open(..., "wb")): written as is
        if isinstance(target, io.TextIOBase):
            raise TypeError(f"{where}: the file is open in text mode; open it with 'wb'")
        write(target)
    else:
        files.atomic_write(files.fspath(target, where), write, where)


# ---- tt.save / tt.load -------------------------------------------------------------------------


def save(obj, f) -> None:
    """Saves Tensors and nested containers of them (state dicts, optimizer states).

    The file is a safetensors file: tensors keep their dtype and bits exactly, and a plain
    `{name: Tensor}` state dict is stored under its own names, readable by HF tools. Each tensor
    carries a CRC-32 checksum that `tt.load` verifies.

    Args:
        obj: Tensors, numpy arrays, Python numbers, strings, None, numpy scalars, and dicts /
            lists / tuples nesting them (e.g. `{"model": sd, "optim": opt.state_dict(),
            "step": 10, "rng": gen.get_state()}`). A tensor that appears twice is stored once
            and loads back as one shared tensor. Not a Module or optimizer itself: tinytensor
            never pickles, so save its `state_dict()`.
        f: a path (str or os.PathLike), written atomically: the previous file stays intact
            until the new one is complete; or a binary file object (`open(p, "wb")`,
            `io.BytesIO()`), written in place from its current position.

    Example:
        >>> tt.save(model.state_dict(), "model.safetensors")
    """
    packer = Packer()
    description = packer.pack(obj, [])
    text = json.dumps(description, separators=(",", ":"))
    checksums = {
        "description": zlib.crc32(text.encode("utf-8")),
        "tensors": {name: tensor_checksum(a) for name, a in packer.arrays.items()},
    }
    metadata = {
        # NOTE: "pt" is the format tag HF's loaders accept; the bytes and names follow the
        # same conventions as a PyTorch state dict saved with safetensors.
        "format": "pt",
        _DESCRIPTION_KEY: text,
        _VERSION_KEY: str(_FORMAT_VERSION),
        _CHECKSUMS_KEY: json.dumps(checksums, separators=(",", ":")),
    }
    _write(f, lambda out: safetensors_format.write(out, packer.arrays, metadata), "tt.save")


def load(f, map_location=None, *, weights_only=None, mmap=None):
    """Loads what `tt.save` wrote (or any safetensors file, as a `{name: Tensor}` dict).

    Args:
        f: a path, or a binary file object (`open(p, "rb")`, `io.BytesIO`).
        map_location: None puts each tensor back on the device it was saved from; "cpu",
            "cuda" or a tt.device puts all of them there; a dict maps saved devices to new
            ones (`{"cuda:0": "cpu"}`), as in PyTorch.
        weights_only: accepted as in PyTorch (None, True or False) and changes nothing:
            tinytensor never unpickles, so loading runs no code whatever its value; the file
            holds only tensors and plain data either way.
        mmap: accepted as in PyTorch; the file is always read into memory.

    Returns:
        The saved object, with the same nesting, key types (int keys stay ints), tuples, numbers
        and bit-exact tensors. A safetensors file from elsewhere gives `{name: Tensor}`, with
        bfloat16 widened to float32.

    Raises:
        CheckpointNotFoundError: no file at `f` (also a FileNotFoundError).
        CheckpointError: not a regular file; truncated, corrupt, or not a safetensors file; a
            tensor whose checksum fails. The message names the file and what is wrong.
    """
    for arg, value in (("weights_only", weights_only), ("mmap", mmap)):
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"tt.load: {arg} must be None, True or False, got {value!r}")
    target_device = _device_map(map_location)
    name, arrays, metadata = read_safetensors(f, "tt.load")
    if not any(key.startswith(_DESCRIPTION_KEY) for key in metadata):
        # a file from elsewhere (e.g. HF's model.safetensors): a flat state dict
        device = target_device(Device("cpu"))
        _check_cuda([device], name, map_location)
        return {k: _foreign_tensor(a, device) for k, a in arrays.items()}
    description = _verified_description(name, arrays, metadata)
    try:
        devices = [target_device(check_saved_device(d)) for d in saved_devices(description)]
        _check_cuda(devices, name, map_location)
        return Unpacker(arrays, lambda d: target_device(check_saved_device(d))).unpack(description)
    except DescriptionError as e:
        problem = f"its tinytensor description is invalid: {e}"
        raise CheckpointError(f"tt.load: cannot read {name}: {problem}") from None


def _verified_description(name, arrays, metadata):
    """The parsed description, after checking the format version (read_safetensors has
    verified the checksums)."""

    def corrupt(problem):
        return CheckpointError(f"tt.load: cannot read {name}: {problem}")

    missing = [k for k in (_DESCRIPTION_KEY, _VERSION_KEY) if k not in metadata]
    if missing:
        raise corrupt(f"its metadata lacks {missing}: the header is corrupt")
    version = metadata[_VERSION_KEY]
    if version not in ("1", "2"):
        if version.isdigit() and int(version) > _FORMAT_VERSION:
            raise corrupt(
                f"it was written in checkpoint format {version}, newer than this tinytensor "
                f"reads ({_FORMAT_VERSION}); upgrade tinytensor"
            )
        raise corrupt(f"its format version {version!r:.20} is not one tinytensor wrote")
    if version != "1" and _CHECKSUMS_KEY not in metadata:  # format 1 had no checksums
        raise corrupt(f"its metadata lacks {_CHECKSUMS_KEY!r}: the header is corrupt")
    text = metadata[_DESCRIPTION_KEY]
    return files.parse_json(
        text,
        f"tt.load: cannot read {name}: its tinytensor description",
        _DESCRIPTION_MAX_JSON_DEPTH,
    )


def _verify_checksums(where, name, arrays, metadata) -> None:
    """Checks the description's and every tensor's CRC-32 against the checksum table."""

    def corrupt(problem):
        return CheckpointError(f"{where}: cannot read {name}: {problem}")

    checksums = files.parse_json(
        metadata[_CHECKSUMS_KEY], f"{where}: cannot read {name}: its checksum table", max_depth=2
    )
    if not (
        isinstance(checksums, dict)
        and isinstance(checksums.get("tensors"), dict)
        and isinstance(checksums.get("description"), int)
    ):
        raise corrupt("its checksum table is malformed: the header is corrupt")
    text = metadata.get(_DESCRIPTION_KEY, "")
    if zlib.crc32(text.encode("utf-8")) != checksums["description"]:
        raise corrupt(
            "its tinytensor description (the numbers, strings and structure around the "
            "tensors) fails its checksum: the header was changed or corrupted"
        )
    expected = checksums["tensors"]
    if set(expected) != set(arrays):
        unlisted = sorted(set(arrays) ^ set(expected))
        raise corrupt(
            f"its tensors and its checksum table disagree on {unlisted[:5]}: a tensor "
            "name in the header was changed or corrupted"
        )
    for tensor, array in arrays.items():
        if tensor_checksum(array) != expected[tensor]:
            raise corrupt(
                f"tensor {tensor!r} fails its checksum: its bytes, dtype or shape changed "
                "since it was saved (bit flip or partial overwrite)"
            )


def _device_map(map_location):
    """map_location as a function: saved Device -> the Device to load onto."""
    if map_location is None:
        return lambda saved: saved
    if isinstance(map_location, (str, Device)):
        target = _as_device(map_location, "map_location")
        return lambda saved: target
    if isinstance(map_location, dict):
        mapping = {
            str(_as_device(k, "map_location key")): _as_device(v, f"map_location[{k!r}]")
            for k, v in map_location.items()
        }
        return lambda saved: mapping.get(str(saved), saved)
    raise TypeError(
        "tt.load: map_location must be None, a device ('cpu', 'cuda', tt.device) or a dict "
        f"mapping saved devices to new ones, got {type(map_location).__name__}"
    )


def _as_device(spec, what) -> Device:
    try:
        return Device(spec)
    except (TypeError, ValueError) as e:
        raise type(e)(f"tt.load: {what}={spec!r}: {e}") from None


def _check_cuda(devices, name, map_location):
    from .. import cuda

    if any(Device(d).type == "cuda" for d in devices) and not cuda.is_available():
        if map_location is None:
            raise RuntimeError(
                f"tt.load: {name} holds tensors saved on cuda, but no CUDA GPU is available "
                "here; pass map_location='cpu' to load them onto the CPU"
            )
        raise RuntimeError(
            f"tt.load: map_location={map_location!r} loads onto cuda but no CUDA GPU is "
            "available here (CuPy missing or no device); use map_location='cpu'"
        )


def _foreign_tensor(array, device) -> Tensor:
    if str(array.dtype) not in _TENSOR_DTYPES:
        array = array.astype(np.int64)  # I16/U16/U32/U64: integer types tinytensor lacks
    return Tensor._wrap(move_array(array, device), False, None)
