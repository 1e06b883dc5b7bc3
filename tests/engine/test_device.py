"""Ops on the `device` fixture (cpu, and cuda where CuPy sees a GPU; skipped with a reason here):
forward and backward give the CPU's numbers, tensors and gradients stay on their device, and
moving between devices is explicit (`.to`, `.cpu`)."""

from __future__ import annotations

import numpy as np
import pytest
import tinytensor.nn.functional as F

import tinytensor as tt


def test_cuda_is_available_answers_without_raising():
    available = tt.cuda.is_available()
    assert isinstance(available, bool)
    assert tt.cuda.device_count() == (1 if available else 0)
    tt.cuda.synchronize()  # a no-op without a GPU


def test_without_a_gpu_moving_to_cuda_is_a_clear_error():
    if tt.cuda.is_available():
        pytest.skip("a CUDA GPU is available here, so moving to it succeeds")
    for make in (
        lambda: tt.ones(2).to("cuda"),
        lambda: tt.ones(2).cuda(),
        lambda: tt.zeros(2, device="cuda"),
        lambda: tt.randn(2, device="cuda"),
        lambda: tt.tensor([1.0], device="cuda"),
    ):
        with pytest.raises(RuntimeError, match="'cuda': no CUDA GPU is available"):
            make()


def test_device_objects_compare_like_torch():
    assert tt.device("cuda") == "cuda:0" and tt.device("cuda") == "cuda"
    assert tt.device("cpu") == "cpu" and tt.device("cpu") != "cuda"
    assert str(tt.device("cuda")) == "cuda:0" and repr(tt.device("cpu")) == "device(type='cpu')"
    with pytest.raises(ValueError, match="single GPU"):
        tt.device("cuda:1")


@pytest.mark.parametrize(
    "make",
    [
        lambda d: tt.zeros(2, 3, device=d),
        lambda d: tt.ones(2, device=d, dtype=tt.float64),
        lambda d: tt.full((2,), 3.0, device=d),
        lambda d: tt.arange(4, device=d),
        lambda d: tt.linspace(0, 1, 3, device=d),
        lambda d: tt.eye(3, device=d),
        lambda d: tt.randn(2, 2, device=d),
        lambda d: tt.rand(3, device=d),
        lambda d: tt.randint(0, 4, (3,), device=d),
        lambda d: tt.tensor([[1.0, 2.0]], device=d),
        lambda d: tt.zeros_like(tt.ones(2, device=d)),
    ],
)
def test_creation_on_the_device(device, make):
    t = make(device)
    assert t.device == device


def test_to_and_cpu_round_trip_and_same_device_is_a_no_op(device):
    x = tt.randn(3, 4)
    y = x.to(device)
    assert y.device == device
    assert y.to(device) is y
    back = y.cpu()
    assert back.device == "cpu"
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    np.testing.assert_array_equal(y.numpy(), x.numpy())  # .numpy() copies to the host
    z = x.to(device, tt.float64)
    assert z.device == device and z.dtype == tt.float64


def test_gradients_flow_back_across_devices(device):
    x = tt.tensor([1.0, 2.0, 3.0], dtype=tt.float64, requires_grad=True)
    y = (x.to(device) ** 2).sum()
    y.backward()
    assert x.grad.device == "cpu"
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_seeded_random_numbers_are_the_same_on_every_device(device):
    tt.manual_seed(11)
    a = tt.randn(5, device=device).numpy()
    tt.manual_seed(11)
    b = tt.randn(5).numpy()
    np.testing.assert_array_equal(a, b)


def _model(x, w, b, g, q, k, v, target, ids, table):
    """A small computation touching every op family."""
    h = F.gelu(F.linear(x, w, b), approximate="tanh")
    h = F.layer_norm(h, (h.shape[-1],), g) + F.rms_norm(h, (h.shape[-1],))
    h = h + F.embedding(ids, table)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    a = a.transpose(1, 2).reshape(2, 3, -1)[:, :, : h.shape[-1]]
    h = (h + a).softmax(-1) * h.amax(-1, keepdim=True) + h.var(-1, keepdim=True)
    h = tt.cat([h, h[:, :1] * 2], dim=1).tril()
    loss = F.cross_entropy(h.reshape(-1, h.shape[-1]), target, label_smoothing=0.1)
    return loss + h.masked_fill(h > 0.5, 0.0).sum() * 0.01 + tt.where(h > 0, h, -h).mean()


def _model_inputs():
    rng = np.random.default_rng(0)
    floats = dict(
        x=(2, 3, 4), w=(5, 4), b=(5,), g=(5,), q=(2, 2, 3, 4), k=(2, 2, 3, 4), v=(2, 2, 3, 4)
    )
    out = {name: rng.standard_normal(shape) for name, shape in floats.items()}
    out["table"] = rng.standard_normal((6, 5))
    out["target"] = rng.integers(0, 5, size=(8,))
    out["ids"] = np.array([[0, 5, 5], [1, 2, 0]])
    return out


def _run(device):
    arrays = _model_inputs()
    tensors = {}
    for name, a in arrays.items():
        t = tt.tensor(a, device=device)
        tensors[name] = t.requires_grad_() if a.dtype.kind == "f" else t
    loss = _model(**tensors)
    loss.backward()
    grads = {n: t.grad for n, t in tensors.items() if t.requires_grad}
    return loss, grads


def test_a_graph_of_every_op_family_runs_on_the_device(device):
    loss, grads = _run(device)
    assert loss.device == device and loss.dtype == tt.float64
    expected_loss, expected_grads = _run("cpu")
    np.testing.assert_allclose(loss.numpy(), expected_loss.numpy(), rtol=1e-10)
    for name, g in grads.items():
        assert g.device == device, name
        np.testing.assert_allclose(
            g.numpy(), expected_grads[name].numpy(), rtol=1e-8, atol=1e-12, err_msg=name
        )
        assert np.abs(g.numpy()).sum() > 0, f"{name} got an all-zero gradient"
