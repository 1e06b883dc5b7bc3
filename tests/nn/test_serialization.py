"""Checkpoints: tt.save / tt.load round trips, HF-compatible files, atomic writes, bad files."""

import io
import json
import math
import os
import signal
import subprocess
import sys
import zlib

import numpy as np
import pytest
import safetensors.numpy

import tinytensor as tt
from tinytensor import serialization
from tinytensor.serialization import CheckpointError


def assert_same(a, b, where="obj"):
    """Recursive equality that also checks types, dtypes and exact bits (NaN payloads, -0.0)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, tt.Tensor):
        assert a.requires_grad == b.requires_grad, where
        a, b = a.numpy(), b.numpy()
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, (
            f"{where}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        )
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), where
    elif isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), where
        for k in a:
            assert type(k) is type(next(kb for kb in b if kb == k)), f"{where}: key {k!r}"
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    elif isinstance(a, (float, np.floating)):
        assert np.array(a).tobytes() == np.array(b).tobytes(), f"{where}: {a!r} vs {b!r}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def every_dtype():
    rng = np.random.default_rng(0)
    floats = rng.normal(size=(3, 4))
    floats[0, :3] = [np.nan, -0.0, np.inf]
    return {
        "f16": tt.tensor(floats.astype(np.float16)),
        "f32": tt.tensor(floats.astype(np.float32), requires_grad=True),
        "f64": tt.tensor(floats),
        "i64": tt.tensor(rng.integers(-(2**62), 2**62, size=(5,))),
        "i32": tt.tensor(rng.integers(-1000, 1000, size=(2, 2)).astype(np.int32)),
        "i8": tt.tensor(np.array([-128, 0, 127], dtype=np.int8)),
        "u8": tt.tensor(np.array([0, 255], dtype=np.uint8)),
        "bool": tt.tensor(np.array([[True, False], [False, True]])),
        "scalar": tt.tensor(3.5, dtype=tt.float64),
        "empty": tt.zeros(0, 3),
        "transposed": tt.tensor(floats.T),  # non-contiguous view: must be written in order
    }


def test_round_trip_is_bit_exact_for_nested_objects(tmp_path):
    obj = {
        "model": every_dtype(),
        "optim": {
            "state": {0: {"step": 7, "exp_avg": tt.ones(2)}, 3: {"momentum_buffer": tt.zeros(1)}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1, 2, 3]}],
        },
        "numbers": [1, -(2**70), 0.1, float("nan"), float("inf"), -float("inf"), -0.0, True, None],
        "text": "déjà vu ✓",
        "tuple_keys": {(1, "a"): "x", 2.5: "y", None: "z", False: "w"},
        "numpy": {
            "array": np.arange(6).reshape(2, 3),
            "f32": np.float32(0.1),
            "i": np.int64(9),
            "f64": np.float64(0.3),
            "nan": np.float16("nan"),
            "b": np.bool_(True),
        },
        "empty": {"dict": {}, "list": [], "tuple": ()},
    }
    path = tmp_path / "ckpt.safetensors"
    tt.save(obj, path)
    assert_same(obj, tt.load(path))


def test_single_tensor_and_str_path(tmp_path):
    t = tt.randn(2, 3)
    tt.save(t, str(tmp_path / "t.st"))
    assert_same(t, tt.load(str(tmp_path / "t.st")))


def test_shared_tensors_stay_shared_and_names_may_collide(tmp_path):
    shared = tt.randn(4, 2)
    obj = {"wte": shared, "lm_head": shared, "a.b": tt.ones(1), "a": {"b": tt.zeros(1)}}
    tt.save(obj, tmp_path / "c.st")
    back = tt.load(tmp_path / "c.st")
    assert back["wte"] is back["lm_head"]
    assert_same(obj, back)


def test_rng_state_round_trips(tmp_path):
    gen = tt.Generator(123)
    gen.rng.normal(size=5)  # advance it
    tt.save({"rng": gen.get_state(), "step": 10}, tmp_path / "meta.st")
    expected = gen.rng.normal(size=3)
    restored = tt.Generator()
    restored.set_state(tt.load(tmp_path / "meta.st")["rng"])
    np.testing.assert_array_equal(restored.rng.normal(size=3), expected)


# ---- HuggingFace compatibility -------------------------------------------------------------------


def test_state_dict_file_is_readable_by_safetensors(tmp_path):
    sd = {k: v for k, v in every_dtype().items()}
    path = tmp_path / "model.safetensors"
    tt.save(sd, path)
    loaded = safetensors.numpy.load_file(str(path))
    assert sorted(loaded) == sorted(sd)
    for k, v in sd.items():
        assert loaded[k].dtype == v.dtype
        np.testing.assert_array_equal(loaded[k], v.numpy())
    with safetensors.safe_open(str(path), "np") as f:
        assert f.metadata()["format"] == "pt"


def test_files_written_by_safetensors_load(tmp_path):
    arrays = {"h.0.w": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.arange(3)}
    path = str(tmp_path / "hf.safetensors")
    safetensors.numpy.save_file(arrays, path)
    plain = serialization.load_safetensors(path)
    as_tensors = tt.load(path)
    for k, v in arrays.items():
        assert plain[k].dtype == v.dtype and as_tensors[k].dtype == v.dtype
        np.testing.assert_array_equal(plain[k], v)
        np.testing.assert_array_equal(as_tensors[k].numpy(), v)


def test_bf16_and_fp16_from_torch_files(tmp_path, torch):
    import safetensors.torch

    rng = np.random.default_rng(0)
    values = torch.tensor(rng.normal(size=(4, 5)) * 100)
    values[0, :3] = torch.tensor([float("nan"), float("-inf"), -0.0])
    tensors = {"bf16": values.to(torch.bfloat16), "fp16": values.to(torch.float16)}
    path = str(tmp_path / "model.safetensors")
    safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})
    loaded = serialization.load_safetensors(path)
    assert loaded["bf16"].dtype == np.float32 and loaded["fp16"].dtype == np.float16
    expected_bf16 = tensors["bf16"].float().numpy()
    assert loaded["bf16"].tobytes() == expected_bf16.tobytes()  # exact widening, NaN included
    assert loaded["fp16"].tobytes() == tensors["fp16"].numpy().tobytes()
    assert tt.load(path)["bf16"].dtype == tt.float32
    with open(path, "rb") as f:  # the file-object reader (safetensors.deserialize) agrees
        assert tt.load(f)["bf16"].numpy().tobytes() == expected_bf16.tobytes()


def test_save_safetensors_with_metadata(tmp_path):
    path = str(tmp_path / "w.safetensors")
    serialization.save_safetensors({"w": tt.ones(2, 2), "b": np.zeros(2)}, path, {"k": "v"})
    with safetensors.safe_open(path, "np") as f:
        assert f.metadata() == {"k": "v"}
        np.testing.assert_array_equal(f.get_tensor("w"), np.ones((2, 2), np.float32))


# ---- atomic writes -------------------------------------------------------------------------------


def test_a_crash_mid_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    old = {"w": tt.ones(1000), "step": 1}
    tt.save(old, path)

    real_write = serialization.safetensors_format.write_array

    def write_half_then_crash(f, array):
        real_write(f, array[: len(array) // 2])
        f.flush()
        raise OSError("simulated crash: disk full")

    monkeypatch.setattr(serialization.safetensors_format, "write_array", write_half_then_crash)
    with pytest.raises(OSError, match="simulated crash"):
        tt.save({"w": tt.zeros(1000), "step": 2}, path)
    with pytest.raises(OSError, match="simulated crash"):
        tt.save({"w": tt.zeros(1000)}, tmp_path / "new.safetensors")

    assert sorted(os.listdir(tmp_path)) == ["ckpt.safetensors"], "temp files were left behind"
    assert_same(old, tt.load(path))


def test_save_into_a_missing_directory_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        tt.save({"w": tt.ones(1)}, tmp_path / "no" / "such" / "dir.st")


# ---- bad files -----------------------------------------------------------------------------------


def assert_clear_error(path, error=CheckpointError, match=None):
    with pytest.raises(error, match=match) as info:
        tt.load(path)
    assert str(path) in str(info.value), f"the error does not name the file: {info.value}"
    assert info.value.__cause__ is None and (
        info.value.__context__ is None or info.value.__suppress_context__
    ), "the error should not chain a low-level traceback"


def test_truncated_files_give_a_clear_error(tmp_path):
    good = tmp_path / "good.st"
    tt.save({"w": tt.randn(10, 10), "b": tt.randn(10), "step": 3}, good)
    data = good.read_bytes()
    for cut in [0, 5, 8, 40, len(data) // 2, len(data) - 1]:
        bad = tmp_path / f"cut{cut}.st"
        bad.write_bytes(data[:cut])
        assert_clear_error(bad, match="too short|truncated|header longer than the file")


def test_random_bytes_and_other_formats_give_a_clear_error(tmp_path):
    rng = np.random.default_rng(0)
    noise = tmp_path / "noise.bin"
    noise.write_bytes(rng.integers(0, 256, size=4096, dtype=np.uint8).tobytes())
    assert_clear_error(noise, match="not a safetensors file")

    text = tmp_path / "config.json"
    text.write_text('{"hidden_size": 768, "num_layers": 12}')
    assert_clear_error(text, match="not a safetensors file")

    small_header = tmp_path / "header.st"
    small_header.write_bytes((8).to_bytes(8, "little") + b"not json")
    assert_clear_error(small_header, match="not a valid safetensors header")

    # a header whose offsets disagree with the tensor's size
    lying = tmp_path / "lying.st"
    header = b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}}'
    lying.write_bytes(len(header).to_bytes(8, "little") + header + bytes(8))
    assert_clear_error(lying, match="does not match its shape and dtype")


def test_missing_file_and_directory(tmp_path):
    assert_clear_error(tmp_path / "nope.safetensors", FileNotFoundError, match="no such file")
    assert_clear_error(tmp_path / "nope.safetensors", CheckpointError, match="no such file")
    assert_clear_error(tmp_path, CheckpointError, match="is a directory, not a regular file")


def test_unsupported_objects_are_named(tmp_path):
    with pytest.raises(TypeError, match=r"set at optim\.state"):
        tt.save({"optim": {"state": {1, 2}}}, tmp_path / "x.st")

    class Model:
        def state_dict(self):
            return {}

    with pytest.raises(TypeError, match="state_dict"):
        tt.save(Model(), tmp_path / "x.st")
    assert not (tmp_path / "x.st").exists()


# ---- devices -------------------------------------------------------------------------------------


def test_map_location(tmp_path, device):
    obj = {"w": tt.randn(3, 2), "n": 4}
    tt.save(obj, tmp_path / "c.st")
    back = tt.load(tmp_path / "c.st", map_location=device)
    assert back["w"].device == device
    np.testing.assert_array_equal(back["w"].numpy(), obj["w"].numpy())
    cpu = tt.load(tmp_path / "c.st", map_location=tt.device("cpu"))
    assert cpu["w"].device == "cpu"


def test_map_location_cuda_without_a_gpu_is_a_clear_error(tmp_path):
    if tt.cuda.is_available():
        pytest.skip("a CUDA GPU is available here, so loading onto cuda works instead of failing")
    tt.save({"w": tt.ones(2)}, tmp_path / "c.st")
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        tt.load(tmp_path / "c.st", map_location="cuda")
    with pytest.raises(TypeError, match="map_location"):
        tt.load(tmp_path / "c.st", map_location=lambda storage, location: storage)


# ---- file objects, PyTorch's arguments -----------------------------------------------------------


def test_save_and_load_through_file_objects_and_bytesio(tmp_path):
    obj = {"model": every_dtype(), "step": 3}
    buffer = io.BytesIO()
    tt.save(obj, buffer)
    buffer.seek(0)
    assert_same(obj, tt.load(buffer))
    with open(tmp_path / "c.st", "wb") as f:
        tt.save(obj, f)
    with open(tmp_path / "c.st", "rb") as f:
        assert_same(obj, tt.load(f))
    assert (tmp_path / "c.st").read_bytes() == buffer.getvalue()  # the same bytes either way
    # a file tt.save wrote through a file object is a normal safetensors file
    assert sorted(safetensors.numpy.load(buffer.getvalue())) == sorted(
        f"model.{k}" for k in every_dtype()
    )


def test_saving_to_a_text_mode_file_is_a_clear_error(tmp_path):
    with open(tmp_path / "c.st", "w") as f, pytest.raises(TypeError, match="text mode.*'wb'"):
        tt.save({"w": tt.ones(1)}, f)


def test_load_accepts_pytorchs_arguments(tmp_path):
    obj = {"w": tt.randn(2, 2), "n": 1}
    tt.save(obj, tmp_path / "c.st")
    for weights_only in (None, True, False):  # we never unpickle: all three load the same
        assert_same(obj, tt.load(tmp_path / "c.st", map_location="cpu", weights_only=weights_only))
    assert_same(obj, tt.load(tmp_path / "c.st", "cpu", mmap=True))
    assert_same(obj, tt.load(tmp_path / "c.st", map_location={"cuda:0": "cpu"}))
    with pytest.raises(TypeError, match="weights_only must be None, True or False, got 'yes'"):
        tt.load(tmp_path / "c.st", weights_only="yes")
    with pytest.raises(ValueError, match="map_location='tpu'"):
        tt.load(tmp_path / "c.st", map_location="tpu")


def test_map_location_dict_moves_cuda_tensors_to_the_cpu(tmp_path):
    """A checkpoint saved on a GPU machine (its description says cuda:0) loads on a CPU one."""
    tt.save({"w": tt.ones(2)}, tmp_path / "c.st")
    data = (tmp_path / "c.st").read_bytes()
    # rewrite the saved device, keeping the header length and the description checksum valid
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_len])
    meta = header["__metadata__"]
    meta["tinytensor"] = meta["tinytensor"].replace('"device":"cpu"', '"device":"cuda:0"')
    table = json.loads(meta["tinytensor_checksums"])
    table["description"] = zlib.crc32(meta["tinytensor"].encode())
    meta["tinytensor_checksums"] = json.dumps(table)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    (tmp_path / "gpu.st").write_bytes(
        len(text).to_bytes(8, "little") + text + data[8 + header_len :]
    )
    back = tt.load(tmp_path / "gpu.st", map_location={"cuda:0": "cpu"})
    assert back["w"].device == "cpu"
    if not tt.cuda.is_available():
        with pytest.raises(RuntimeError, match="saved on cuda.*map_location='cpu'"):
            tt.load(tmp_path / "gpu.st")


def test_saving_a_module_or_optimizer_says_to_save_its_state_dict(tmp_path):
    model = tt.nn.Linear(3, 2)
    with pytest.raises(TypeError, match=r"whole Linear object.*model\.state_dict\(\)"):
        tt.save(model, tmp_path / "m.st")
    opt = tt.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=r"whole SGD object.*optimizer\.state_dict\(\)"):
        tt.save({"optim": opt}, tmp_path / "m.st")
    assert not list(tmp_path.iterdir()), "a failed save must not leave files"
    tt.save(model.state_dict(), tmp_path / "m.st")  # what the message says works
    fresh = tt.nn.Linear(3, 2)
    fresh.load_state_dict(tt.load(tmp_path / "m.st"))
    np.testing.assert_array_equal(fresh.weight.numpy(), model.weight.numpy())


def test_too_deeply_nested_objects_are_refused_on_save(tmp_path):
    obj = [1]
    for _ in range(100):
        obj = [obj]
    with pytest.raises(ValueError, match="more than 64 containers deep"):
        tt.save(obj, tmp_path / "deep.st")


def test_format_1_checkpoints_without_checksums_still_load(tmp_path):
    description = '{"dict":[["w",{"tensor":"w","requires_grad":false,"device":"cpu"}],["step",7]]}'
    metadata = {"format": "pt", "tinytensor": description, "tinytensor_version": "1"}
    serialization.save_safetensors({"w": np.arange(3.0)}, tmp_path / "old.st", metadata)
    back = tt.load(tmp_path / "old.st")
    assert back["step"] == 7
    np.testing.assert_array_equal(back["w"].numpy(), np.arange(3.0))


def test_checkpoints_carry_a_crc32_per_tensor(tmp_path):
    """The documented checksum: CRC-32 over f"{dtype}{shape}" then the little-endian bytes."""
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    tt.save({"w": tt.tensor(w)}, tmp_path / "c.st")
    with safetensors.safe_open(str(tmp_path / "c.st"), "np") as f:
        table = json.loads(f.metadata()["tinytensor_checksums"])
        description = f.metadata()["tinytensor"]
    expected = zlib.crc32(w.astype("<f4").tobytes(), zlib.crc32(b"F32[2, 3]"))
    assert table == {"description": zlib.crc32(description.encode()), "tensors": {"w": expected}}


# ---- kill -9 during a save ---------------------------------------------------------------------

KILLED_SAVER = """
import sys, time
import tinytensor as tt
from tinytensor.serialization import safetensors_format

real_write = safetensors_format.write_array
def write_half_then_hang(f, array):
    real_write(f, array[: len(array) // 2])
    f.flush()
    print("mid-save", flush=True)
    time.sleep(600)  # killed here, with SIGKILL: no finally, no cleanup runs
safetensors_format.write_array = write_half_then_hang
tt.save({"w": tt.zeros(100_000), "step": 2}, sys.argv[1])
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="SIGKILL is POSIX-only")
def test_kill_9_mid_save_keeps_the_old_checkpoint_and_the_next_save_cleans_up(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    old = {"w": tt.ones(100_000), "step": 1}
    tt.save(old, path)
    for _ in range(2):  # two killed saves: the second removes the first one's temp file
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED_SAVER, str(path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout.readline().strip() == "mid-save", "the child never started saving"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        assert child.returncode == -signal.SIGKILL
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != path.name]
    assert len(leftovers) == 1 and leftovers[0].endswith(".tmp"), leftovers  # no pile-up
    assert_same(old, tt.load(path))  # the kill never touched the checkpoint itself

    new = {"w": tt.full((100_000,), 3.0), "step": 3}
    tt.save(new, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], "temp files were left"
    assert_same(new, tt.load(path))


def test_cleanup_spares_temp_files_of_live_saves_and_other_files(tmp_path):
    path = tmp_path / "ckpt.st"
    live = tmp_path / f".ckpt.st.{os.getpid()}-0123abcd.tmp"  # this process: still saving
    other = tmp_path / ".other.st.999999999-0123abcd.tmp"  # another checkpoint's
    mine = tmp_path / ".ckpt.st.notapid.tmp"  # not a name tt.save makes
    for p in (live, other, mine):
        p.write_bytes(b"x")
    tt.save({"w": tt.ones(1)}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, live.name, other.name, mine.name]
    )
