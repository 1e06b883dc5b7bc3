"""split_heads / merge_heads (tinytensor/ops/heads.py) beyond the op cases (gradcheck in
test_gradcheck.py, PyTorch in test_vs_torch.py): bad calls, views, and nn.Attention's graph."""

from __future__ import annotations

import numpy as np
import pytest
import tinytensor.nn as nn

import tinytensor as tt
from tinytensor.ops import merge_heads, split_heads


@pytest.mark.parametrize(
    "call, kind, words",
    [
        (lambda: split_heads(tt.ones(2, 3, 7), 2), ValueError, ["split_heads", "(2, 3, 7)", "2"]),
        (lambda: split_heads(tt.ones(3, 8), 2), ValueError, ["split_heads", "(3, 8)"]),
        (lambda: split_heads(tt.ones(1, 2, 4), 0), ValueError, ["split_heads", "n_heads", "0"]),
        (lambda: split_heads(tt.ones(1, 2, 4), 2.0), TypeError, ["split_heads", "n_heads", "2.0"]),
        (lambda: split_heads(np.ones((1, 2, 4)), 2), TypeError, ["split_heads", "ndarray"]),
        (lambda: merge_heads(tt.ones(2, 3, 4)), ValueError, ["merge_heads", "(2, 3, 4)"]),
    ],
)
def test_bad_calls_name_the_function_and_the_value(call, kind, words):
    with pytest.raises(kind) as info:
        call()
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_split_heads_is_a_view_sharing_the_input_version_counter():
    x = tt.arange(24.0).reshape(1, 4, 6)
    heads = split_heads(x, 3)
    assert heads.shape == (1, 3, 4, 2)
    assert np.shares_memory(heads.numpy(), x.numpy())
    x.add_(1.0)  # the view sees the write, as torch's view + transpose would
    np.testing.assert_array_equal(
        heads.numpy(), (np.arange(24.0) + 1).reshape(1, 4, 3, 2).transpose(0, 2, 1, 3)
    )
    assert heads._version == x._version == 1


def test_merge_heads_undoes_split_heads_exactly():
    x = tt.randn(2, 5, 12)
    np.testing.assert_array_equal(merge_heads(split_heads(x, 4)).numpy(), x.numpy())


def test_attention_builds_one_node_per_head_split_and_merge():
    attn = nn.Attention(8, 2)
    x = tt.randn(1, 3, 8, requires_grad=True)
    out = attn(x)
    names, stack, seen = [], [out.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name)
        stack.extend(node.parents)
    assert names.count("SplitHeads") == 3 and names.count("MergeHeads") == 1, names
    assert "Permute" not in names, names  # the heads cost no separate transposes
