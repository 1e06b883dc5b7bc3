"""ZeroRedundancyOptimizer on 2 ranks: the plain optimizer's result with half the state each."""

from .jobs import expect_ok


def test_zero_equals_adamw_with_sharded_state(mpirun):
    done = mpirun("zero.py")
    expect_ok(done)
