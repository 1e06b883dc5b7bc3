"""Bad input gives a ValueError/TypeError/IndexError/RuntimeError whose message names the op and
the offending shapes, dtypes or devices, never a deep NumPy traceback or silent garbage."""

from __future__ import annotations

import importlib
import re

import numpy as np
import pytest
import tinytensor.nn.functional as F

import tinytensor as tt
from tinytensor.backend import CPU, CUDA


def raises(kind, *fragments):
    """pytest.raises(kind) whose message must contain every fragment (literally)."""
    return pytest.raises(kind, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


x34 = tt.ones(3, 4)


# ---- shapes ------------------------------------------------------------------------------


def test_matmul_shape_mismatch_names_both_shapes():
    with raises(ValueError, "matmul", "(3, 4)", "(3, 4)"):
        x34 @ x34
    with raises(ValueError, "matmul", "(2, 3, 4)", "(5, 4, 2)", "broadcast"):
        tt.ones(2, 3, 4) @ tt.ones(5, 4, 2)
    with raises(ValueError, "matmul", "()"):
        tt.matmul(tt.tensor(2.0), x34)


def test_broadcasting_mismatch_names_the_op_and_shapes():
    with raises(ValueError, "Add", "(3, 4)", "(2, 4)"):
        x34 + tt.ones(2, 4)
    with raises(ValueError, "Mul", "(3, 4)", "(3,)"):
        x34 * tt.ones(3)
    with raises(ValueError, "Maximum", "(3, 4)", "(5,)"):
        tt.maximum(x34, tt.ones(5))


def test_reshape_to_an_impossible_shape():
    with raises(ValueError, "reshape", "(3, 4)", "(5, 2)"):
        x34.reshape(5, 2)
    with raises(ValueError, "reshape", "(-1, 5)"):
        x34.view(-1, 5)
    with raises(ValueError, "reshape", "(-1, -1)"):
        x34.reshape(-1, -1)
    with raises(ValueError, "reshape", "(0, -1)"):  # -1 next to a 0: nothing to infer from
        x34.reshape(0, -1)
    with raises(ValueError, "reshape", "(12, 1, 2)"):
        x34.view(12, 1, 2)


def test_movement_shape_errors():
    with raises(ValueError, "cat", "(2, 3)", "(2, 4)"):
        tt.cat([tt.ones(2, 3), tt.ones(2, 4)])
    with raises(ValueError, "cat", "(2, 3)", "(3,)"):  # a different number of dims
        tt.cat([tt.ones(2, 3), tt.ones(3)])
    with raises(ValueError, "cat", "non-empty"):
        tt.cat([])
    with raises(ValueError, "stack", "(2, 3)", "(3, 2)"):
        tt.stack([tt.ones(2, 3), tt.ones(3, 2)])
    with raises(ValueError, "split", "[1, 1]", "4"):
        tt.ones(4).split([1, 1])
    with raises(ValueError, "permute", "(2, 3, 4)"):
        tt.ones(2, 3, 4).permute(0, 0, 1)
    with raises(ValueError, "expand", "(3, 4)", "(2, 4)"):
        x34.expand(2, 4)
    with raises(ValueError, "tril", "(4,)"):
        tt.ones(4).tril()


def test_nn_op_shape_errors():
    with raises(ValueError, "linear", "(3, 4)", "(2, 5)"):
        F.linear(x34, tt.ones(2, 5))
    with raises(ValueError, "layer_norm", "(3, 4)", "(5,)"):
        F.layer_norm(x34, (5,))
    with raises(ValueError, "layer_norm", "weight", "(3,)"):
        F.layer_norm(x34, (4,), weight=tt.ones(3))
    with raises(ValueError, "rms_norm", "(3, 4)", "(2,)"):
        F.rms_norm(x34, (2,))
    q = tt.ones(1, 2, 3, 4)
    with raises(ValueError, "scaled_dot_product_attention", "(1, 2, 3, 4)", "(1, 2, 3, 5)"):
        F.scaled_dot_product_attention(q, tt.ones(1, 2, 3, 5), tt.ones(1, 2, 3, 5))
    with raises(ValueError, "scaled_dot_product_attention", "3 heads", "2", "enable_gqa"):
        F.scaled_dot_product_attention(
            tt.ones(1, 3, 2, 4), tt.ones(1, 2, 2, 4), tt.ones(1, 2, 2, 4)
        )
    with raises(ValueError, "scaled_dot_product_attention", "attn_mask", "(5, 5)", "(1, 2, 3, 3)"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=tt.ones(5, 5))


# ---- indices and targets -----------------------------------------------------------------


def test_float_indices_are_refused():
    with raises(IndexError, "getitem", "1.0", "float"):
        x34[1.0]
    with raises(IndexError, "getitem", "float32"):
        x34[tt.tensor([0.0, 1.0])]
    with raises(IndexError, "getitem", "float"):
        x34[[0.5, 1.0]]
    with raises(TypeError, "gather", "integer"):
        x34.gather(1, tt.zeros(3, 1))


def test_out_of_range_index_names_the_tensor_shape():
    with raises(IndexError, "getitem", "(3, 4)"):
        x34[3]
    with raises(IndexError, "getitem", "(3, 4)"):
        x34[tt.tensor([0, 7])]


def test_cross_entropy_float_class_ids_are_refused():
    logits = tt.randn(4, 5)
    with raises(ValueError, "cross_entropy", "probabilities", "(4, 5)", "(4,)", ".long()"):
        F.cross_entropy(logits, tt.tensor([0.0, 1.0, 2.0, 3.0]))


def test_cross_entropy_bad_targets_and_options():
    logits = tt.randn(4, 5)
    with raises(IndexError, "cross_entropy", "target id 5", "5 classes"):
        F.cross_entropy(logits, tt.tensor([0, 5, 1, 2]))
    with raises(IndexError, "cross_entropy", "target id -3"):
        F.cross_entropy(logits, tt.tensor([0, -3, 1, 2]))
    with raises(ValueError, "cross_entropy", "(3,)", "(4, 5)"):
        F.cross_entropy(logits, tt.tensor([0, 1, 2]))
    with raises(TypeError, "cross_entropy", "bool"):
        F.cross_entropy(logits, tt.tensor([True, False, True, True]))
    with raises(ValueError, "cross_entropy", "reduction", "'avg'"):
        F.cross_entropy(logits, tt.tensor([0, 1, 2, 3]), reduction="avg")
    with raises(ValueError, "cross_entropy", "label_smoothing", "1.5"):
        F.cross_entropy(logits, tt.tensor([0, 1, 2, 3]), label_smoothing=1.5)
    with raises(TypeError, "cross_entropy", "int64"):
        F.cross_entropy(tt.tensor([[1, 2]]), tt.tensor([0]))


def test_embedding_ids_out_of_range_or_not_integers():
    weight = tt.randn(5, 3)
    with raises(IndexError, "embedding", "id 5", "5 embeddings"):
        F.embedding(tt.tensor([0, 5]), weight)
    with raises(IndexError, "embedding", "id -1"):
        F.embedding(tt.tensor([-1, 2]), weight)
    with raises(TypeError, "embedding", "float32"):
        F.embedding(tt.tensor([0.0, 1.0]), weight)


# ---- dims --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, call",
    [
        # (unsqueeze and stack count the dims of their result, which has one more)
        ("sum", lambda x: x.sum(dim=2)),
        ("mean", lambda x: x.mean(-3)),
        ("var", lambda x: x.var(5)),
        ("max", lambda x: x.max(dim=2)),
        ("softmax", lambda x: x.softmax(2)),
        ("log_softmax", lambda x: F.log_softmax(x, -3)),
        ("transpose", lambda x: x.transpose(0, 2)),
        ("unsqueeze", lambda x: x.unsqueeze(4).unsqueeze(-5)),
        ("squeeze", lambda x: x.squeeze(3)),
        ("cat", lambda x: tt.cat([x, x], dim=2)),
        ("stack", lambda x: tt.stack([x, x], dim=4)),
        ("split", lambda x: x.split(1, dim=2)),
        ("gather", lambda x: x.gather(2, tt.zeros(3, 4, dtype=tt.int64))),
        ("argmax", lambda x: x.argmax(2)),
    ],
)
def test_bad_dim_names_the_op_and_the_dim(name, call):
    ndim = 3 if name in ("unsqueeze", "stack") else 2
    with raises(IndexError, name, "out of range", f"{ndim} dimensions"):
        call(x34)


def test_dim_must_be_an_integer():
    with raises(TypeError, "sum", "float"):
        x34.sum(dim=1.0)


# ---- dtypes and other arguments ----------------------------------------------------------


def test_requires_grad_on_an_integer_tensor():
    with raises(TypeError, "floating-point", "int64"):
        tt.tensor([1, 2], requires_grad=True)
    with raises(TypeError, "floating-point", "int32"):
        tt.zeros(2, dtype=tt.int32, requires_grad=True)


def test_dtype_errors_name_the_op_and_dtype():
    with raises(TypeError, "where", "condition", "float32"):
        tt.where(tt.ones(3), x34, 0.0)
    with raises(TypeError, "masked_fill", "mask", "int64"):
        x34.masked_fill(tt.tensor([1, 0, 1, 0]), 0.0)
    with raises(TypeError, "mean", "int64"):
        tt.arange(4).mean()
    with raises(TypeError, "layer_norm", "int64"):
        F.layer_norm(tt.arange(4), 4)
    with raises(TypeError, "scaled_dot_product_attention", "attn_mask", "int64"):
        q = tt.ones(2, 3)
        F.scaled_dot_product_attention(q, q, q, attn_mask=tt.ones(2, 2, dtype=tt.int64))
    with raises(TypeError, "pow", "exponent"):
        x34 ** "2"
    with raises(TypeError, "unknown dtype"):
        tt.zeros(2, dtype="float99")
    with raises(TypeError, "not supported", "complex128"):
        tt.zeros(2, dtype=np.complex128)


def test_argument_value_errors():
    with raises(ValueError, "gelu", "approximate", "'fast'"):
        F.gelu(x34, approximate="fast")
    with raises(ValueError, "clamp", "min", "max"):
        x34.clamp()
    with raises(ValueError, "dropout", "p", "1.5"):
        F.dropout(x34, p=1.5)
    with raises(ValueError, "split", "split_size", "0"):
        x34.split(0)
    with raises(ValueError, "unknown device", "'tpu'"):
        x34.to("tpu")


# ---- construction ------------------------------------------------------------------------


def test_ragged_nested_lists_are_refused():
    with raises(ValueError, "tensor", "ragged"):
        tt.tensor([[1.0, 2.0], [3.0]])
    with raises(ValueError, "ragged"):
        tt.tensor([[1, 2], [3, 4, 5]])


def test_non_numeric_data_is_refused():
    with raises(TypeError, "tensor", "<U1"):
        tt.tensor([["a", "b"]])
    with raises(TypeError, "tensor", "complex128"):
        tt.tensor(np.array([1 + 2j]))
    with raises(ValueError, "tensor", "non-numbers"):
        tt.tensor({"a": 1})


# ---- backward ----------------------------------------------------------------------------


def test_backward_on_a_non_scalar_without_gradient():
    y = tt.ones(2, 3, requires_grad=True) * 2
    with raises(RuntimeError, "backward", "(2, 3)", "gradient"):
        y.backward()


def test_backward_gradient_of_the_wrong_shape():
    y = tt.ones(2, 3, requires_grad=True) * 2
    with raises(ValueError, "backward", "(3, 2)", "(2, 3)"):
        y.backward(tt.ones(3, 2))


def test_second_backward_through_a_freed_graph():
    y = (tt.ones(3, requires_grad=True).exp() * 2).sum()
    y.backward()
    with raises(RuntimeError, "backward", "freed", "retain_graph=True"):
        y.backward()


def test_backward_on_a_tensor_that_does_not_require_grad():
    with raises(RuntimeError, "backward", "requires_grad"):
        (tt.ones(3) * 2).sum().backward()


def test_item_of_a_multi_element_tensor():
    with raises(ValueError, "item", "(3, 4)"):
        x34.item()


# ---- devices (simulated: a second array type stands for a GPU array) ----------------------


class FakeDeviceArray(np.ndarray):
    """A NumPy array that pretends to live on another device: `Function.apply` compares
    `type(t._array)`, so mixing it with plain arrays must raise the device error."""


@pytest.fixture
def on_fake_gpu(monkeypatch):
    """Makes tensors holding a FakeDeviceArray report device cuda:0; returns a converter."""
    tensor_module = importlib.import_module("tinytensor.tensor")  # tt.tensor is the function
    real = tensor_module.device_of
    monkeypatch.setattr(
        tensor_module,
        "device_of",
        lambda a: CUDA if isinstance(a, FakeDeviceArray) else real(a),
    )

    def to_fake(t):
        return tt.Tensor._wrap(t._array.view(FakeDeviceArray), False, None)

    return to_fake


def test_fake_device_reports_its_device(on_fake_gpu):
    assert on_fake_gpu(x34).device == CUDA and x34.device == CPU


@pytest.mark.parametrize(
    "op, call",
    [
        ("Add", lambda a, b, mask: a + b),
        ("Mul", lambda a, b, mask: b * a),
        ("MatMul", lambda a, b, mask: a @ b.T),
        ("Maximum", lambda a, b, mask: tt.maximum(a, b)),
        ("Cat", lambda a, b, mask: tt.cat([a, b])),
        ("stack", lambda a, b, mask: tt.stack([a, b])),
        ("where", lambda a, b, mask: tt.where(mask, a, a)),
        ("masked_fill", lambda a, b, mask: a.masked_fill(mask, 0.0)),
        ("Linear", lambda a, b, mask: F.linear(a, b)),
        ("LayerNorm", lambda a, b, mask: F.layer_norm(a, (4,), b[0])),
        (
            "scaled_dot_product_attention",
            lambda a, b, mask: F.scaled_dot_product_attention(a, b, b),
        ),
    ],
)
def test_mixing_devices_in_one_op_names_the_op_and_both_devices(on_fake_gpu, op, call):
    a, b = tt.randn(3, 4), on_fake_gpu(tt.randn(3, 4))
    mask = on_fake_gpu(tt.randn(3, 4) > 0)
    with raises(RuntimeError, op, "cpu", "cuda:0", ".to(device)"):
        call(a, b, mask)


def test_mixing_devices_in_losses_and_lookups(on_fake_gpu):
    logits = tt.randn(3, 4)
    target = on_fake_gpu(tt.tensor([0, 1, 2]))
    with raises(RuntimeError, "cross_entropy", "cpu", "cuda:0"):
        F.cross_entropy(logits, target)
    with raises(RuntimeError, "embedding", "cpu", "cuda:0"):
        F.embedding(target, logits)
