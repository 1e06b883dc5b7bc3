"""Tensor hooks and the backward trace, against PyTorch where it has them."""

import numpy as np
import pytest

import tinytensor as tt


def run_hooks(lib):
    seen = []
    x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    w = lib.tensor([0.5, 0.25, 2.0], requires_grad=True)
    h = x * w
    h.register_hook(lambda g: seen.append(("h", g.numpy().copy())) or g * 10)
    x.register_hook(lambda g: seen.append(("x", g.numpy().copy())))
    handle = w.register_hook(lambda g: seen.append(("w-removed", None)))
    handle.remove()
    w.register_post_accumulate_grad_hook(lambda p: seen.append(("w-post", p.grad.numpy().copy())))
    (h * h).sum().backward()
    return seen, x.grad.numpy(), w.grad.numpy()


def test_hooks_match_torch(torch):
    expected, got = run_hooks(torch), run_hooks(tt)
    assert [name for name, _ in got[0]] == [name for name, _ in expected[0]]
    for (_, g), (_, e) in zip(got[0], expected[0], strict=True):
        np.testing.assert_allclose(g, e)
    np.testing.assert_allclose(got[1], expected[1])
    np.testing.assert_allclose(got[2], expected[2])


def test_hook_errors():
    with pytest.raises(RuntimeError, match="doesn't require grad"):
        tt.ones(2).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="only leaf tensors"):
        (tt.ones(2, requires_grad=True) * 2).register_post_accumulate_grad_hook(print)
    with pytest.raises(TypeError, match="hook must be callable"):
        tt.ones(2, requires_grad=True).register_hook(3)


def test_backward_trace_records_each_vjp_in_order():
    x = tt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    z = (y + y).sum()  # y used twice: two gradients arrive at Mul, summed
    with tt.autograd.backward_trace() as trace:
        z.backward()
    names = [type(step.node).__name__ for step in trace.steps]
    assert names == ["Sum", "Add", "Mul"]
    add = trace.steps[1]
    assert [g.tolist() for g in add.input_grads] == [[1.0, 1.0], [1.0, 1.0]]
    mul = trace.steps[2]
    assert mul.grad_output.tolist() == [2.0, 2.0]
    assert mul.input_grads[0].tolist() == [6.0, 6.0] and mul.input_grads[1] is None


def test_leaf_hooks_run_once_on_the_summed_gradient_as_torch(torch):
    """A leaf used twice (tied weights): PyTorch runs its hooks once, after the last edge."""
    results = []
    for lib in (torch, tt):
        calls = []
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        w.register_hook(lambda g, calls=calls: calls.append(("hook", g.tolist())) or g * g)
        w.register_post_accumulate_grad_hook(
            lambda p, calls=calls: calls.append(("post", p.grad.tolist()))
        )
        unused = lib.tensor([1.0, 1.0], requires_grad=True)
        ((w * 2).sum() + (w * w).sum() + (unused * w.detach()).sum() * 0).backward()
        results.append(calls)
    assert results[1] == results[0]
    assert results[1] == [("hook", [4.0, 6.0]), ("post", [16.0, 36.0])]
