"""Fixtures for the attention-variant tests: float64 by default (exact cache comparisons)."""

import pytest

import tinytensor as tt


@pytest.fixture(autouse=True)
def float64():
    previous = tt.get_default_dtype()
    tt.set_default_dtype(tt.float64)
    yield
    tt.set_default_dtype(previous)
