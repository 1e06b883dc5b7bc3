"""What PyTorch programs touch besides ops: numbers, dtypes and promotion, legacy tensor types,
the device world (cuda.*, accelerator, backends flags, inference_mode) and mixed precision.
Each behaviour is checked against torch on the same calls."""

import math
import operator

import numpy as np
import pytest

import tinytensor as tt


def test_one_element_tensors_work_as_numbers(torch):
    for lib in (torch, tt):
        loss = lib.tensor(2.71828, dtype=lib.float32)
        assert f"{loss:.3f}" == "2.718"
        assert float(loss) == pytest.approx(2.71828) and int(lib.tensor(7)) == 7
        assert bool(lib.tensor(0.0)) is False
        assert operator.index(lib.tensor(3)) == 3 and [10, 20, 30, 40][lib.tensor(2)] == 30
    # round() on a tensor: torch has no __round__; ours rounds the number, as a user expects
    assert round(tt.tensor(2.6)) == 3 and round(tt.tensor(2.567), 2) == pytest.approx(2.57)
    with pytest.raises(TypeError):
        operator.index(tt.tensor(2.0))
    with pytest.raises(ValueError, match="one-element"):
        float(tt.ones(2))


PROMOTIONS = [
    ("dim float32 * 0-d float64", lambda lib: lib.ones(2) * lib.tensor(2.0, dtype=lib.float64)),
    ("dim int64 * 0-d float64", lambda lib: lib.arange(3) * lib.tensor(1.5, dtype=lib.float64)),
    ("dim int64 * python float", lambda lib: lib.arange(3) * 1.5),
    ("dim int32 + dim int64", lambda lib: lib.arange(3, dtype=lib.int32) + lib.arange(3)),
    ("bool + 0-d int", lambda lib: lib.tensor([True]) + lib.tensor(2)),
    ("uint8 + int8", lambda lib: lib.ones(2, dtype=lib.uint8) + lib.ones(2, dtype=lib.int8)),
    ("int16 * python int", lambda lib: lib.ones(2, dtype=lib.int16) * 3),
    ("float16 + float32 0-d", lambda lib: lib.ones(2, dtype=lib.float16) + lib.tensor(1.0)),
    ("exp(int)", lambda lib: lib.exp(lib.arange(3))),
    ("sin(int)", lambda lib: lib.sin(lib.arange(3))),
    ("sigmoid(bool)", lambda lib: lib.sigmoid(lib.tensor([True, False]))),
    ("int / int", lambda lib: lib.arange(3) / 2),
    ("Tensor(3)", lambda lib: lib.Tensor(3).zero_()),
    ("Tensor(2, 3)", lambda lib: lib.Tensor(2, 3).zero_()),
    ("Tensor(list of ints)", lambda lib: lib.Tensor([1, 2])),
    ("FloatTensor(list)", lambda lib: lib.FloatTensor([1, 2])),
    ("LongTensor(sizes)", lambda lib: lib.LongTensor(2, 2).zero_()),
    ("BoolTensor(list)", lambda lib: lib.BoolTensor([1, 0])),
    (".half()", lambda lib: lib.ones(2).half()),
    (".long()", lambda lib: lib.ones(2).long()),
    (".bool()", lambda lib: lib.ones(2).bool()),
    (".type(DoubleTensor)", lambda lib: lib.ones(2).type("torch.DoubleTensor")),
]


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


@pytest.mark.parametrize("name,fn", PROMOTIONS, ids=[n for n, _ in PROMOTIONS])
def test_dtypes_and_promotion_match_torch(torch, name, fn):
    torch.set_default_dtype(torch.float32)
    try:
        expected = fn(torch)
    finally:
        torch.set_default_dtype(torch.float64)
    got = fn(tt)
    assert _dtype_name(got) == _dtype_name(expected), name
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(got.numpy().astype(np.float64), expected.numpy().astype(np.float64))


def test_legacy_types_and_type_names(torch):
    for lib in (torch, tt):
        x = lib.ones(2, dtype=lib.float32)
        assert isinstance(x, lib.FloatTensor) and not isinstance(x, lib.LongTensor)
        assert lib.arange(2).type() == "torch.LongTensor"
        assert lib.zeros(2, dtype=lib.float64).type() == "torch.DoubleTensor"
    with pytest.raises(TypeError, match="unknown tensor type"):
        tt.ones(2).type("torch.ComplexTensor")


def test_bfloat16_is_a_clear_error_not_silent_float32():
    with pytest.raises(TypeError, match="bfloat16 is not supported.*float32"):
        tt.ones(2).to(tt.bfloat16)
    with pytest.raises(TypeError, match="bfloat16"):
        tt.zeros(2, dtype=tt.bfloat16)
    assert tt.cuda.is_bf16_supported() is False


def test_cpu_program_device_calls(torch):
    """The device calls a CPU run of a typical training script makes."""
    for lib in (torch, tt):
        device = lib.device("cuda" if lib.cuda.is_available() else "cpu")
        assert str(device) == "cpu"
        lib.cuda.manual_seed(3)
        lib.cuda.manual_seed_all(3)
        lib.cuda.synchronize() if lib.cuda.is_available() else None
        lib.cuda.empty_cache()
        assert lib.cuda.device_count() == 0
        lib.backends.cuda.matmul.allow_tf32 = True
        lib.backends.cudnn.allow_tf32 = True
        assert lib.backends.cuda.matmul.allow_tf32 is True
        assert lib.accelerator.is_available() is False
        assert lib.accelerator.current_accelerator() is None
        with lib.inference_mode():
            y = lib.ones(2, requires_grad=True) * 2
        assert not y.requires_grad
    tt.backends.cuda.matmul.allow_tf32 = False
    tt.backends.cudnn.allow_tf32 = True


def test_cuda_manual_seed_seeds_the_generator():
    tt.cuda.manual_seed(5)
    a = tt.randn(3).numpy()
    tt.manual_seed(5)
    np.testing.assert_array_equal(a, tt.randn(3).numpy())


def test_autocast_on_cpu_says_it_is_unsupported_and_disabled_is_a_no_op():
    with pytest.raises(RuntimeError, match="autocast: mixed precision on the CPU is not supported"):
        tt.autocast("cpu", dtype=tt.float16)
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        tt.amp.autocast("cuda")
    with tt.autocast("cpu", enabled=False):
        y = tt.ones(2, 2) @ tt.ones(2, 2)
    assert y.dtype == tt.float32
    assert issubclass(tt.cuda.amp.GradScaler, tt.amp.GradScaler)  # (torch.cuda.amp: a subclass)


def _scaler_run(lib, grads_per_step):
    w = lib.nn.Parameter(lib.zeros(3))
    opt = lib.optim.SGD([w], lr=0.5)
    scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    scales, weights = [], []
    for g in grads_per_step:
        opt.zero_grad()
        loss = (w * lib.tensor(g, dtype=w.dtype)).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(w.detach().numpy().copy())
    return scales, weights


def test_grad_scaler_matches_torch(torch):
    torch.set_default_dtype(torch.float32)
    try:
        steps = [[1.0, 2.0, 3.0], [math.inf, 1.0, 1.0], [0.5, 0.5, 0.5], [1.0, math.nan, 0.0]]
        steps += [[1.0, -1.0, 2.0]] * 3
        expected = _scaler_run(torch, steps)
    finally:
        torch.set_default_dtype(torch.float64)
    got = _scaler_run(tt, steps)
    assert got[0] == expected[0]
    for g, e in zip(got[1], expected[1], strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_grad_scaler_bad_arguments():
    with pytest.raises(ValueError, match="init_scale must be a positive number, got -1"):
        tt.amp.GradScaler(init_scale=-1)
    with pytest.raises(ValueError, match="backoff_factor"):
        tt.amp.GradScaler(backoff_factor=2.0)
