"""Hostile checkpoint files: every one is a CheckpointError naming the file and the problem.

Each case is a crafted file (a header that lies, a flipped bit, a FIFO, ...) read through every
entry point: `tt.load(path)`, `tt.load(io.BytesIO)` and `load_safetensors(path)`. A case passes
only if the error is a CheckpointError whose message names the file and matches what is wrong,
and chains no low-level traceback. Nothing here may hang, allocate what the file claims, or load.
"""

import io
import json
import os
import struct
import threading
import zlib

import numpy as np
import pytest

import tinytensor as tt
from tinytensor.serialization import CheckpointError, load_safetensors

F32_4 = '"dtype":"F32","shape":[4]'  # a 4-float tensor, 16 bytes


def safetensors_bytes(header, data=b"", header_len=None) -> bytes:
    """An 8-byte header length, the header text as given (not re-encoded), the data."""
    text = header.encode() if isinstance(header, str) else header
    size = len(text) if header_len is None else header_len
    return struct.pack("<Q", size) + text + data


def crc(code, shape, data: bytes) -> int:
    """The documented per-tensor checksum, computed independently of tinytensor's code."""
    return zlib.crc32(data, zlib.crc32(f"{code}{list(shape)}".encode()))


def tinytensor_bytes(description, tensors=None, version="2", checksums=None) -> bytes:
    """A tinytensor checkpoint with a chosen description (and correct checksums by default).

    tensors: {name: float32 array}.
    """
    tensors = tensors or {}
    text = description if isinstance(description, str) else json.dumps(description)
    header, offset, data = {}, 0, b""
    table = {"description": zlib.crc32(text.encode()), "tensors": {}}
    for name, a in tensors.items():
        raw = a.astype("<f4").tobytes()
        header[name] = {
            "dtype": "F32",
            "shape": list(a.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        table["tensors"][name] = crc("F32", a.shape, raw)
        offset += len(raw)
        data += raw
    metadata = {"tinytensor": text, "tinytensor_version": version}
    if checksums is not False:
        metadata["tinytensor_checksums"] = json.dumps(checksums or table)
    header = {"__metadata__": metadata, **header}
    return safetensors_bytes(json.dumps(header), data)


def a_real_checkpoint() -> bytes:
    buffer = io.BytesIO()
    tt.save({"w": tt.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), "step": 1000}, buffer)
    return buffer.getvalue()


GOOD = a_real_checkpoint()
W = {"tensor": "w", "requires_grad": False, "device": "cpu"}
ONE = {"w": np.ones(2, np.float32)}
DEEP = "[" * 100_000 + "]" * 100_000

# id -> (file bytes, what the message must say). Header-level cases first, then tinytensor's.
CASES = {
    # -- the 8-byte length and the header JSON
    "empty file": (b"", "too short"),
    "5 bytes": (b"\x05\x00\x00\x00\x00", "too short"),
    "length past the end": (safetensors_bytes("{}", header_len=1000), "longer than the file"),
    "length 2**40": (safetensors_bytes("{}", header_len=2**40), "100 MB limit"),
    "length 2**64-1": (safetensors_bytes("{}", header_len=2**64 - 1), "100 MB limit|longer"),
    "header not JSON": (safetensors_bytes("not json"), "not a valid safetensors header"),
    "header a JSON list": (safetensors_bytes("[1,2]"), "not a valid safetensors header"),
    "header bad UTF-8": (safetensors_bytes(b'{"\xff\xfe":1}'), "safetensors"),
    "random bytes": (
        np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        "not a safetensors file",
    ),
    "deeply nested JSON": (
        safetensors_bytes(
            '{"w":{' + F32_4 + ',"data_offsets":[0,16],"x":' + DEEP + "}}", bytes(16)
        ),
        "recursion limit",
    ),
    "deep metadata": (safetensors_bytes('{"__metadata__":{"a":' + DEEP + "}}"), "not a valid"),
    # -- shapes and offsets must be integers
    'shape "22"': (
        safetensors_bytes('{"w":{"dtype":"F32","shape":"22","data_offsets":[0,16]}}', bytes(16)),
        'invalid type: string "22"',
    ),
    "shape of floats": (
        safetensors_bytes('{"w":{"dtype":"F32","shape":[2.0,2],"data_offsets":[0,16]}}', bytes(16)),
        "floating point",
    ),
    "shape of bools": (
        safetensors_bytes(
            '{"w":{"dtype":"F32","shape":[true,4],"data_offsets":[0,16]}}', bytes(16)
        ),
        "boolean",
    ),
    "shape of strings": (
        safetensors_bytes('{"w":{"dtype":"F32","shape":["4"],"data_offsets":[0,16]}}', bytes(16)),
        'string "4"',
    ),
    "negative shape": (
        safetensors_bytes('{"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}}', bytes(16)),
        "-4",
    ),
    "shape null": (
        safetensors_bytes('{"w":{"dtype":"F32","shape":null,"data_offsets":[0,16]}}', bytes(16)),
        "null",
    ),
    "offsets of strings": (
        safetensors_bytes('{"w":{' + F32_4 + ',"data_offsets":["0",16]}}', bytes(16)),
        'string "0"',
    ),
    "offsets of floats": (
        safetensors_bytes('{"w":{' + F32_4 + ',"data_offsets":[0,16.0]}}', bytes(16)),
        "floating",
    ),
    "offsets of bools": (
        safetensors_bytes('{"w":{' + F32_4 + ',"data_offsets":[false,16]}}', bytes(16)),
        "boolean",
    ),
    "three offsets": (
        safetensors_bytes('{"w":{' + F32_4 + ',"data_offsets":[0,8,16]}}', bytes(16)),
        "not a valid safetensors header",
    ),
    "no offsets": (safetensors_bytes('{"w":{' + F32_4 + "}}", bytes(16)), "data_offsets"),
    # -- offsets must tile the data exactly
    "overlapping offsets": (
        safetensors_bytes(
            '{"a":{' + F32_4 + ',"data_offsets":[0,16]},"b":{' + F32_4 + ',"data_offsets":[8,24]}}',
            bytes(24),
        ),
        "overlap or gap",
    ),
    "gap between tensors": (
        safetensors_bytes(
            '{"a":{'
            + F32_4
            + ',"data_offsets":[0,16]},"b":{'
            + F32_4
            + ',"data_offsets":[24,40]}}',
            bytes(40),
        ),
        "overlap or gap",
    ),
    "offsets disagree with shape": (
        safetensors_bytes('{"w":{' + F32_4 + ',"data_offsets":[0,8]}}', bytes(8)),
        "does not match its shape and dtype",
    ),
    "reversed offsets": (
        safetensors_bytes('{"w":{' + F32_4 + ',"data_offsets":[16,0]}}', bytes(16)),
        "safetensors",
    ),
    "trailing bytes": (
        safetensors_bytes('{"w":{' + F32_4 + ',"data_offsets":[0,16]}}', bytes(32)),
        "do not cover the data section exactly",
    ),
    "5 KB file claiming 128 GiB": (
        safetensors_bytes(
            '{"w":{"dtype":"F32","shape":[34359738368],"data_offsets":[0,137438953472]}}',
            bytes(5000),
        ),
        "do not cover the data section exactly",
    ),
    "shape product overflows": (
        safetensors_bytes(
            '{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],'
            '"data_offsets":[0,16]}}',
            bytes(16),
        ),
        "safetensors",
    ),
    # -- dtypes and keys
    "dtype O": (
        safetensors_bytes('{"w":{"dtype":"O","shape":[2],"data_offsets":[0,16]}}', bytes(16)),
        "unknown variant `O`",
    ),
    "dtype <f4 (NumPy's name)": (
        safetensors_bytes('{"w":{"dtype":"<f4","shape":[4],"data_offsets":[0,16]}}', bytes(16)),
        "unknown variant",
    ),
    "dtype NumPy lacks (F8_E4M3)": (
        safetensors_bytes('{"w":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}}', bytes(4)),
        "F8_E4M3, which NumPy cannot hold",
    ),
    "duplicate tensor key": (
        safetensors_bytes(
            '{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
            '"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}',
            bytes(8),
        ),
        "the key 'w' appears twice",
    ),
    "duplicate metadata key": (
        safetensors_bytes('{"__metadata__":{"a":"1","a":"2"}}'),
        "the key 'a' appears twice",
    ),
    "metadata not strings": (safetensors_bytes('{"__metadata__":{"a":1}}'), "expected a string"),
    "header names __metadata__ a tensor": (
        safetensors_bytes('{"__metadata__":{' + F32_4 + ',"data_offsets":[0,16]}}', bytes(16)),
        "not a valid safetensors header",
    ),
    # -- truncation of a real checkpoint
    **{
        f"truncated to {cut} bytes": (GOOD[:cut], "too short|longer than the file|cover the data")
        for cut in (7, 8, 30, len(GOOD) // 2, len(GOOD) - 1)
    },
    # -- tinytensor's own metadata: checksums, versions, descriptions
    "flipped bit in tensor data": (
        GOOD[:-5] + bytes([GOOD[-5] ^ 0x10]) + GOOD[-4:],
        "tensor 'w' fails its checksum",
    ),
    "changed number in the description": (
        GOOD.replace(b'"step\\",1000', b'"step\\",1001'),
        "description .* fails its checksum",
    ),
    "checksum table missing": (
        tinytensor_bytes({"dict": [["w", W]]}, ONE, checksums=False),
        "lacks 'tinytensor_checksums'",
    ),
    "checksum table malformed": (
        tinytensor_bytes({"dict": [["w", W]]}, ONE, checksums={"tensors": []}),
        "checksum table is malformed",
    ),
    "checksum table deeply nested": (
        safetensors_bytes(
            json.dumps(
                {
                    "__metadata__": {
                        "tinytensor": "1",
                        "tinytensor_version": "2",
                        "tinytensor_checksums": DEEP,
                    }
                }
            )
        ),
        "nests JSON 100000 levels deep",
    ),
    "tensor missing from checksum table": (
        tinytensor_bytes(
            {"dict": [["w", W]]},
            ONE,
            checksums={
                "description": zlib.crc32(json.dumps({"dict": [["w", W]]}).encode()),
                "tensors": {},
            },
        ),
        "checksum table disagree on \\['w'\\]",
    ),
    "format version from the future": (tinytensor_bytes(1, version="9"), "format 9, newer"),
    "format version garbage": (tinytensor_bytes(1, version="2x"), "'2x' is not one tinytensor"),
    "version missing": (
        safetensors_bytes(json.dumps({"__metadata__": {"tinytensor": "1"}})),
        "lacks \\['tinytensor_version'\\]",
    ),
    "description missing": (
        safetensors_bytes(json.dumps({"__metadata__": {"tinytensor_version": "2"}})),
        "lacks \\['tinytensor'\\]",
    ),
    "description not JSON": (tinytensor_bytes("{not json"), "description is not valid JSON"),
    "description NaN literal": (tinytensor_bytes("NaN"), "NaN is not a JSON value"),
    "description deeply nested": (
        tinytensor_bytes('{"list":' * 200 + "[]" + "}" * 200),
        "nests JSON 201 levels deep",
    ),
    "description 70 containers deep (valid JSON depth)": (
        tinytensor_bytes('{"list":[' * 70 + "1" + "]}" * 70),
        "nest more than 64 deep",
    ),
    "description names a missing tensor": (
        tinytensor_bytes({"tensor": "nope", "requires_grad": False, "device": "cpu"}),
        "names tensor 'nope', which the file lacks",
    ),
    "description unknown entry": (tinytensor_bytes({"pickle": "os.system"}), "unknown entry"),
    "description numpy dtype O": (tinytensor_bytes({"numpy": "O", "value": 1}), "bad numpy scalar"),
    "description bad special float": (tinytensor_bytes({"float": "1e999"}), "special float"),
    "description dict of non-pairs": (tinytensor_bytes({"dict": [[1, 2, 3]]}), "\\[key, value\\]"),
    "description unknown device": (
        tinytensor_bytes({"tensor": "w", "requires_grad": False, "device": "tpu"}, ONE),
        "unknown device 'tpu'",
    ),
    "description int tensor requiring grad": (
        safetensors_bytes(
            json.dumps(
                {
                    "__metadata__": {
                        "tinytensor": (d := json.dumps({"tensor": "i", "requires_grad": True})),
                        "tinytensor_version": "2",
                        "tinytensor_checksums": json.dumps(
                            {
                                "description": zlib.crc32(d.encode()),
                                "tensors": {"i": crc("I64", (1,), bytes(8))},
                            }
                        ),
                    },
                    "i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]},
                }
            ),
            bytes(8),
        ),
        "integer tensor 'i' cannot require gradients",
    ),
}


# load_safetensors reads the tensors (verifying checksums where present) but not the description
READ_BY_TT_LOAD_ONLY = (
    "description",
    "format version",
    "version missing",
    "checksum table missing",
)


def assert_checkpoint_error(load, source, name, match):
    with pytest.raises(CheckpointError, match=match) as info:
        load(source)
    message = str(info.value)
    assert name in message, f"the error does not name the file {name}: {message}"
    assert info.value.__cause__ is None and (
        info.value.__context__ is None or info.value.__suppress_context__
    ), "the error chains a low-level traceback"


def test_the_battery_has_enough_cases():
    print(f"{len(CASES)} hostile files, each read through 3 entry points")
    assert len(CASES) >= 60


def test_the_good_checkpoint_loads():
    assert tt.load(io.BytesIO(GOOD))["step"] == 1000  # the cases above are corruptions of it


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_file_is_a_checkpoint_error_naming_file_and_problem(case, tmp_path):
    data, match = CASES[case]
    path = tmp_path / "hostile.safetensors"
    path.write_bytes(data)
    assert_checkpoint_error(tt.load, path, str(path), match)
    assert_checkpoint_error(tt.load, io.BytesIO(data), "BytesIO", match)
    if not case.startswith(READ_BY_TT_LOAD_ONLY):
        assert_checkpoint_error(load_safetensors, path, str(path), match)


# ---- not regular files ---------------------------------------------------------------------------


def load_with_timeout(path, seconds=20):
    """tt.load in a thread: a hang (a FIFO opened for reading) fails the test, not the suite."""
    outcome = {}

    def run():
        try:
            outcome["value"] = tt.load(path)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        with open(path, "wb"):  # open the write end, so that the stuck open returns
            pass
        pytest.fail(f"tt.load({path}) hung")
    return outcome


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform (Windows)")
@pytest.mark.parametrize("through_symlink", [False, True])
def test_a_fifo_is_refused_without_hanging(tmp_path, through_symlink):
    fifo = tmp_path / "ckpt.safetensors"
    os.mkfifo(fifo)
    path = fifo
    if through_symlink:
        path = tmp_path / "link.safetensors"
        path.symlink_to(fifo)
    outcome = load_with_timeout(path)
    assert isinstance(outcome.get("error"), CheckpointError), outcome
    assert str(path) in str(outcome["error"]) and "FIFO" in str(outcome["error"])


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero on this platform")
def test_a_device_file_is_refused():
    outcome = load_with_timeout("/dev/zero")
    assert isinstance(outcome.get("error"), CheckpointError), outcome
    assert "/dev/zero" in str(outcome["error"]) and "character device" in str(outcome["error"])


def test_a_directory_and_a_dangling_symlink(tmp_path):
    assert_checkpoint_error(tt.load, tmp_path, str(tmp_path), "is a directory, not a regular file")
    link = tmp_path / "dangling.safetensors"
    link.symlink_to(tmp_path / "nowhere")
    assert_checkpoint_error(tt.load, link, str(link), "no such file")


def test_a_text_mode_file_object_is_a_clear_error(tmp_path):
    path = tmp_path / "c.st"
    path.write_bytes(GOOD)
    with open(path, encoding="latin-1") as f, pytest.raises(TypeError, match="binary mode"):
        tt.load(f)


# ---- bit flips -----------------------------------------------------------------------------------


def test_every_single_bit_flip_is_an_error_or_changes_nothing(tmp_path):
    """Flip each bit of a small checkpoint in turn: each load raises a CheckpointError or
    returns exactly the saved object (a flip in an unused byte, e.g. the "pt" format tag)."""
    obj = {
        "model": {"w": tt.randn(3, 4), "b": tt.zeros(4, dtype=tt.float64)},
        "ids": tt.tensor(np.arange(5)),
        "step": 12,
        "lr": 0.001,
        "betas": (0.9, 0.999),
        "name": "run-1",
    }
    buffer = io.BytesIO()
    tt.save(obj, buffer)
    data = bytearray(buffer.getvalue())
    expected = repr(jsonable(tt.load(io.BytesIO(bytes(data)))))
    counts = {"error": 0, "unchanged": 0}
    for bit in range(len(data) * 8):
        data[bit // 8] ^= 1 << (bit % 8)
        try:
            loaded = tt.load(io.BytesIO(bytes(data)))
        except CheckpointError:
            counts["error"] += 1
        else:
            got = repr(jsonable(loaded))
            assert got == expected, f"bit {bit} (byte {bit // 8}) changed the loaded object"
            counts["unchanged"] += 1
        data[bit // 8] ^= 1 << (bit % 8)
    print(f"{len(data) * 8} single-bit flips: {counts}")
    assert counts["error"] > 0.9 * len(data) * 8


def jsonable(obj):
    """A comparable form of a loaded object: tensors as (dtype, shape, bytes)."""
    if isinstance(obj, tt.Tensor):
        a = obj.numpy()
        return ("tensor", str(a.dtype), a.shape, a.tobytes(), obj.requires_grad)
    if isinstance(obj, dict):
        return [(type(k).__name__, k, jsonable(v)) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [jsonable(v) for v in obj])
    return (type(obj).__name__, obj)


def test_a_path_with_a_nul_byte(tmp_path):
    with pytest.raises(CheckpointError, match="embedded null byte"):
        tt.load(str(tmp_path / "a\x00b.st"))
