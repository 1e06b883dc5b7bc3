"""tt.testing.assert_close and make_tensor against torch.testing: the same comparisons pass and
fail, with torch's report (its numbers, its wording)."""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt

PAIRS = {
    "close-enough": (lambda L: L.tensor([1.0, 2.0]), lambda L: L.tensor([1.0, 2.0 + 1e-6])),
    "one-mismatch": (lambda L: L.tensor([1.0, 2.0, 3.0]), lambda L: L.tensor([1.0, 2.5, 3.0])),
    "ints": (lambda L: L.tensor([1, 2]), lambda L: L.tensor([1, 3])),
    "float64": (
        lambda L: L.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=L.float64),
        lambda L: L.tensor([[1.0, 2.0], [3.0, 4.1]], dtype=L.float64),
    ),
    "zeros-expected": (lambda L: L.ones(2), lambda L: L.zeros(2)),
    "nan": (lambda L: L.tensor([float("nan"), 1.0]), lambda L: L.tensor([float("nan"), 1.0])),
    "scalars": (lambda L: 1.0, lambda L: 1.1),
    "list": (lambda L: [1.0, 2.0], lambda L: [1.0, 2.1]),
    "dict": (lambda L: {"a": L.ones(2)}, lambda L: {"a": L.zeros(2)}),
}


def _outcome(lib, name, **kwargs):
    actual, expected = (make(lib) for make in PAIRS[name])
    try:
        lib.testing.assert_close(actual, expected, **kwargs)
    except AssertionError as e:
        return str(e)
    return None


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("equal_nan", [False, True])
def test_assert_close_passes_and_fails_as_torch_with_its_report(torch, name, equal_nan):
    torch.set_default_dtype(torch.float32)
    try:
        theirs = _outcome(torch, name, equal_nan=equal_nan)
    finally:
        torch.set_default_dtype(torch.float64)  # (the fixture's)
    ours = _outcome(tt, name, equal_nan=equal_nan)
    assert ours == theirs


def test_attribute_mismatches_name_the_attribute():
    with pytest.raises(AssertionError, match="attribute 'dtype' do not match"):
        tt.testing.assert_close(tt.ones(2), tt.ones(2, dtype=tt.float64))
    with pytest.raises(AssertionError, match=r"attribute 'shape' do not match: \(2, 3\) != \(3"):
        tt.testing.assert_close(tt.ones(2, 3), tt.ones(3, 2))
    tt.testing.assert_close(tt.ones(2), tt.ones(2, dtype=tt.float64), check_dtype=False)
    with pytest.raises(ValueError, match="both rtol and atol"):
        tt.testing.assert_close(tt.ones(2), tt.ones(2), rtol=1e-3)


def test_make_tensor_ranges_and_flags():
    x = tt.testing.make_tensor(50, 4, dtype=tt.float32, device="cpu", low=-1, high=1)
    assert (
        x.shape == (50, 4) and x.dtype == tt.float32 and -1 <= x.min().item() < 1 > x.max().item()
    )
    i = tt.testing.make_tensor((100,), dtype=tt.int64, device="cpu", exclude_zero=True)
    assert (
        i.dtype == tt.int64 and (i.numpy() != 0).all() and -9 <= int(i.min()) and int(i.max()) < 10
    )
    g = tt.testing.make_tensor(3, dtype=tt.float64, device="cpu", requires_grad=True)
    assert g.requires_grad
    n = tt.testing.make_tensor(4, 5, dtype=tt.float32, device="cpu", noncontiguous=True)
    assert not n.numpy().flags.c_contiguous
    np.testing.assert_array_equal(n.numpy(), n.contiguous().numpy())
