"""The safetensors format: written here, read through the `safetensors` library's own parser.

A safetensors file (https://github.com/huggingface/safetensors) is an 8-byte little-endian
header length N, N bytes of JSON naming each tensor's dtype, shape and byte range, then the raw
little-endian tensor bytes. It holds only tensors and a string-to-string metadata map, and unlike
pickle it runs no code when read.

Reading trusts nothing. The library's parser (Rust) enforces the spec before any tensor is made:
a header of at most 100 MB, JSON nested at most 128 deep, integer shapes and offsets, known
dtypes, byte ranges that match each shape and dtype and tile the data section exactly (no
overlap, no gap, nothing past the end: a 5 KB file cannot ask for 128 GiB), string-only
metadata. On top of it we refuse duplicate keys (JSON allows them; the last would silently win)
and dtypes NumPy cannot hold, and wrap every failure in a CheckpointError naming the file.

Writing is ours: it streams each array to the file without an intermediate copy.
"""

from __future__ import annotations

import json
import re
import struct
import zlib

import numpy as np
import safetensors

from .files import CheckpointError, parse_json, same_file_path

CODE_OF_DTYPE = {
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
# Little-endian on disk whatever the machine; BF16 is read as its raw 16 bits (see bf16_to_f32).
DTYPE_OF_CODE = {code: dtype.newbyteorder("<") for dtype, code in CODE_OF_DTYPE.items()}
DTYPE_OF_CODE["BF16"] = np.dtype("<u2")


_HEADER_MAX_DEPTH = 128  # what the library's parser allows; a valid header needs 3


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 (raw uint16 bits) to float32, exactly.

    NOTE: NumPy has no bfloat16. A bf16 number is the top half of the float32 with the same
    sign, exponent and leading mantissa bits, so shifting its 16 bits up gives that float32.
    """
    return (bits.astype(np.uint32) << 16).view(np.float32)


def tensor_checksum(array: np.ndarray) -> int:
    """CRC-32 of a tensor's dtype, shape and little-endian bytes, as stored in the file.

    NOTE: CRC-32 detects every error burst up to 32 bits (every single flipped bit) and misses
    a random corruption with probability 2^-32; it runs at memory speed (zlib, C). Dtype and
    shape are included so that a header edit that keeps the byte count is caught too.
    """
    code = CODE_OF_DTYPE[array.dtype.newbyteorder("=")]
    data = np.asarray(array, dtype=array.dtype.newbyteorder("<"), order="C")
    crc = zlib.crc32(f"{code}{list(array.shape)}".encode())
    return zlib.crc32(data.reshape(-1).view(np.uint8).data, crc)


def is_storable(array: np.ndarray) -> bool:
    return array.dtype.newbyteorder("=") in CODE_OF_DTYPE


# ---- writing -------------------------------------------------------------------------------------


def write_array(f, array: np.ndarray) -> None:
    """Writes one tensor's bytes (a seam the tests use to simulate a crash mid-write)."""
    f.write(array.reshape(-1).view(np.uint8).data)


def write(f, arrays: dict[str, np.ndarray], metadata: dict[str, str] | None) -> None:
    """Writes a safetensors file to the binary file object `f`.

    `arrays` are C-contiguous little-endian NumPy arrays of storable dtypes.
    """
    # Widest dtypes first so that every tensor starts at a multiple of its itemsize (the order
    # the safetensors library writes; it lets readers map the data without copying).
    order = sorted(arrays, key=lambda name: -arrays[name].dtype.itemsize)
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name in order:
        a = arrays[name]
        header[name] = {
            "dtype": CODE_OF_DTYPE[a.dtype.newbyteorder("=")],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # pad so that the data starts 8-byte aligned
    f.write(struct.pack("<Q", len(raw)))
    f.write(raw)
    for name in order:
        write_array(f, arrays[name])


# ---- reading -------------------------------------------------------------------------------------

# What the parser's messages mean, in the reader's terms (its own words follow in parentheses).
_EXPLANATIONS = [
    ("header too small", "it is too short to be a safetensors file (empty or truncated)"),
    (
        "invalid header length",
        "its first 8 bytes give a header longer than the file: truncated, or not a "
        "safetensors file",
    ),
    (
        "header too large",
        "its first 8 bytes give a header over the 100 MB limit: not a safetensors file",
    ),
    ("invalid header start", "its header does not start with '{': not a safetensors file"),
    ("invalid JSON", "its header is not a valid safetensors header"),
    ("invalid UTF-8", "its header is not valid UTF-8: not a safetensors file"),
    (
        "invalid offset",
        "a tensor's byte range does not start where the previous one ends (overlap or gap) "
        "or does not match its shape and dtype",
    ),
    (
        "not fully covered",
        "the tensors in its header do not cover the data section exactly: the file is "
        "truncated or padded, or its header lies about sizes",
    ),
    (
        "invalid shape, data type, or offset",
        "a tensor's byte range does not match its shape and dtype",
    ),
    ("overflow", "a tensor's shape is too large to be real"),
    ("invalid info", "a tensor's shape, dtype and byte range disagree"),
]


def _explain(message: str) -> str:
    meaning = next((text for key, text in _EXPLANATIONS if key in message), None)
    words = re.sub(r"^Error while deserializing( header)?: ", "", message)
    if meaning is None:
        return f"not a valid safetensors file ({words})"
    return f"{meaning} (safetensors: {words})"


def _failure(e: Exception, name: str, where: str) -> CheckpointError:
    return CheckpointError(f"{where}: cannot read {name}: {_explain(str(e))}")


def _check_dtype(code: str, tensor: str, name: str, where: str) -> None:
    if code not in DTYPE_OF_CODE:
        raise CheckpointError(
            f"{where}: cannot read {name}: tensor {tensor!r} has dtype {code}, which NumPy "
            f"cannot hold (readable: {', '.join(sorted(DTYPE_OF_CODE))})"
        )


def _parse_header(raw: bytes, name: str, where: str) -> dict:
    """The header JSON of `raw` (8-byte length, then the header) once the parser accepted it:
    read once more for what the parser does not check (a repeated key) and for the metadata."""
    (header_len,) = struct.unpack("<Q", raw[:8])
    what = f"{where}: cannot read {name}: the header"
    header = parse_json(raw[8 : 8 + header_len], what, _HEADER_MAX_DEPTH)
    if not isinstance(header, dict):
        raise CheckpointError(f"{where}: cannot read {name}: its header is not a JSON object")
    return header


def _native(array: np.ndarray, code: str) -> np.ndarray:
    array = array.astype(array.dtype.newbyteorder("="), copy=False)
    return bf16_to_f32(array) if code == "BF16" else array


def read_bytes(raw: bytes, name: str, where: str) -> tuple[dict[str, np.ndarray], dict]:
    """(arrays by name in file order, metadata) of the safetensors file whose bytes are `raw`.

    Arrays are writable copies in native byte order; BF16 becomes float32 (exactly).
    """
    try:
        entries = safetensors.deserialize(raw)
    except MemoryError:
        raise
    except Exception as e:  # SafetensorError, and anything else the parser rejects with
        raise _failure(e, name, where) from None
    metadata = _parse_header(raw, name, where).get("__metadata__") or {}
    arrays = {}
    entries.reverse()
    while entries:  # pop as we go: each tensor's bytes are freed once copied
        tensor, info = entries.pop()
        code = info["dtype"]
        _check_dtype(code, tensor, name, where)
        array = np.frombuffer(info["data"], DTYPE_OF_CODE[code]).reshape(info["shape"])
        arrays[tensor] = _native(array.copy(), code)  # a writable copy
    return arrays, metadata


def read_open_file(f, name: str, where: str) -> tuple[dict[str, np.ndarray], dict]:
    """Like read_bytes, for a regular file open as `f`: the parser maps the file, so each
    tensor is copied once, straight from the page cache."""
    try:
        handle = safetensors.safe_open(same_file_path(f, name), framework="np")
    except MemoryError:
        raise
    except Exception as e:
        raise _failure(e, name, where) from None
    with handle:
        # Our own copy of the header, from our own handle on the same file.
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = _parse_header(struct.pack("<Q", header_len) + f.read(header_len), name, where)
        metadata = header.pop("__metadata__", None) or {}
        changed = CheckpointError(f"{where}: cannot read {name}: the file changed while read")
        if sorted(header) != sorted(handle.keys()):
            raise changed
        arrays = {}
        for tensor in sorted(header, key=lambda t: header[t]["data_offsets"][0]):  # file order
            code, shape = header[tensor]["dtype"], header[tensor]["shape"]
            _check_dtype(code, tensor, name, where)
            if code == "BF16":  # NumPy has no bfloat16, so the parser cannot make the array
                array = np.empty(shape, DTYPE_OF_CODE[code])
                f.seek(8 + header_len + header[tensor]["data_offsets"][0])
                if f.readinto(array.reshape(-1).view(np.uint8)) != array.nbytes:
                    raise CheckpointError(
                        f"{where}: cannot read {name}: the file changed while read"
                    )
            else:
                array = handle.get_tensor(tensor)
            arrays[tensor] = _native(array, code)
    return arrays, metadata
