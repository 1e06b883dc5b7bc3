"""DistributedDataParallel on 2 ranks against one process on the combined batch."""

import pytest

from .jobs import expect_ok


@pytest.mark.parametrize(
    "model, bucket_cap_mb, micro_steps",
    [
        ("gpt", 25, 1),  # one bucket; GPT's tied embedding gets two gradient contributions
        ("gpt", 0.001, 1),  # a bucket per parameter or two: launched in order during backward
        ("mlp", 0.0005, 1),
        ("gpt", 0.01, 3),  # no_sync() accumulation of 3 micro-batches == the larger batch
    ],
)
def test_ddp_two_ranks_equal_one_process_on_the_combined_batch(
    mpirun, model, bucket_cap_mb, micro_steps
):
    done = mpirun("ddp_equivalence.py", model, bucket_cap_mb, micro_steps)
    expect_ok(done)
    assert "max |DDP - one process|" in done.stdout


def test_ddp_overlap_unused_parameters_buffers_and_mismatched_models(mpirun):
    expect_ok(mpirun("ddp_behaviour.py"))
