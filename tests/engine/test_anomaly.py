"""detect_anomaly: a NaN made in backward is an error naming the op and the user's forward line,
as torch's; off, nothing is checked or kept."""

from __future__ import annotations

import math

import pytest

import tinytensor as tt


def _nan_in_backward(lib):
    x = lib.tensor([1.0, 0.0, 2.0], requires_grad=True)
    return (x.sqrt() * 0).sum()  # sqrt'(0) = inf, times 0: a NaN in Sqrt's backward


def test_the_error_names_the_op_and_the_forward_line(torch):
    with pytest.warns(UserWarning, match="anomaly detection is on"):
        with tt.autograd.detect_anomaly():
            loss = _nan_in_backward(tt)
            with pytest.raises(RuntimeError) as ours:
                loss.backward()
    message = str(ours.value)
    assert message.startswith("Function 'Sqrt' returned nan values in its 0th output.")
    assert "test_anomaly.py" in message and "x.sqrt() * 0" in message  # the user's line
    assert "tinytensor/ops" not in message  # the library's frames are left out
    with torch.autograd.detect_anomaly(), pytest.raises(RuntimeError, match="returned nan"):
        _nan_in_backward(torch).backward()


def test_off_nothing_is_checked_or_kept():
    x = tt.tensor([1.0, 0.0, 2.0], requires_grad=True)
    y = x.sqrt()
    assert "forward_stack" not in vars(y._ctx)
    (y * 0).sum().backward()
    assert math.isnan(x.grad.tolist()[1])  # as torch: the NaN goes on without a word


def test_set_detect_anomaly_and_the_decorator_restore_the_mode():
    assert not tt.autograd.is_anomaly_enabled()
    with tt.autograd.set_detect_anomaly(True):
        assert tt.autograd.is_anomaly_enabled() and tt.autograd.is_anomaly_check_nan_enabled()
        with tt.autograd.set_detect_anomaly(True, check_nan=False):
            _nan_in_backward(tt).backward()  # stacks kept, NaN not checked
    assert not tt.autograd.is_anomaly_enabled()

    @tt.autograd.detect_anomaly()
    def step():
        assert tt.autograd.is_anomaly_enabled()
        _nan_in_backward(tt).backward()

    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="'Sqrt'"):
        step()
    assert not tt.autograd.is_anomaly_enabled()
