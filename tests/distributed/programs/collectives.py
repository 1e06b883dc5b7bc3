"""Each rank checks every collective against NumPy on values it knows every rank holds."""

import os

import numpy as np

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor.utils.data.distributed import DistributedSampler

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"
# torchrun's variables, for scripts ported from PyTorch
assert (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])) == (rank, world)
assert int(os.environ["LOCAL_RANK"]) == rank and int(os.environ["LOCAL_WORLD_SIZE"]) == world


def values(r, dtype=np.float64):
    """What rank r contributes: distinct per rank, known to every rank."""
    return (np.arange(6, dtype=dtype).reshape(2, 3) + 1) * (r + 2) - r


everyone = [values(r) for r in range(world)]
expected = {
    dist.ReduceOp.SUM: np.sum(everyone, axis=0),
    dist.ReduceOp.AVG: np.mean(everyone, axis=0),
    dist.ReduceOp.PRODUCT: np.prod(everyone, axis=0),
    dist.ReduceOp.MAX: np.max(everyone, axis=0),
    dist.ReduceOp.MIN: np.min(everyone, axis=0),
}
for op, want in expected.items():
    for dtype in (tt.float32, tt.float64):
        t = tt.tensor(values(rank), dtype=dtype)
        assert dist.all_reduce(t, op=op) is None
        np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, err_msg=f"{op} {dtype}")

ints = tt.tensor(values(rank, np.int64))
dist.all_reduce(ints, op="max")  # an op by name
assert ints.dtype == tt.int64 and (ints.numpy() == expected[dist.ReduceOp.MAX]).all()

# a non-contiguous tensor (a transposed view) is reduced in place through a copy
base = tt.tensor(values(rank))
view = base.T
dist.all_reduce(view)
np.testing.assert_array_equal(base.numpy(), expected[dist.ReduceOp.SUM])

# async_op returns a Work; the result is there after wait()
t = tt.tensor(values(rank))
work = dist.all_reduce(t, async_op=True)
assert work.wait() is True and work.is_completed()
np.testing.assert_array_equal(t.numpy(), expected[dist.ReduceOp.SUM])

# broadcast from every root
for src in range(world):
    t = tt.tensor(values(rank))
    dist.broadcast(t, src=src)
    np.testing.assert_array_equal(t.numpy(), values(src))

# all_gather and all_gather_into_tensor
outputs = [tt.zeros(2, 3, dtype=tt.float64) for _ in range(world)]
dist.all_gather(outputs, tt.tensor(values(rank)))
for r in range(world):
    np.testing.assert_array_equal(outputs[r].numpy(), values(r))
flat = tt.zeros(world * 2, 3, dtype=tt.float64)
dist.all_gather_into_tensor(flat, tt.tensor(values(rank)))
np.testing.assert_array_equal(flat.numpy(), np.concatenate(everyone))

# reduce_scatter: rank r gets the sum over ranks q of q's input_list[r]
inputs = [tt.tensor(values(rank) * (i + 1)) for i in range(world)]
out = tt.zeros(2, 3, dtype=tt.float64)
dist.reduce_scatter(out, inputs)
np.testing.assert_allclose(out.numpy(), sum(values(q) * (rank + 1) for q in range(world)))
out = tt.zeros(3, dtype=tt.float64)
dist.reduce_scatter_tensor(out, tt.tensor(np.arange(3.0 * world) + rank))
np.testing.assert_allclose(out.numpy(), sum(np.arange(3.0 * world) + q for q in range(world))[
    3 * rank : 3 * rank + 3])  # fmt: skip

# objects
gathered = [None] * world
dist.all_gather_object(gathered, {"rank": rank})
assert gathered == [{"rank": r} for r in range(world)]
box = [f"from {rank}"]
dist.broadcast_object_list(box, src=world - 1)
assert box == [f"from {world - 1}"]

# mismatched shapes: an error on every rank, not a deadlock
try:
    dist.all_reduce(tt.ones(3 + rank))
except RuntimeError as e:
    assert "rank 0: all_reduce(shape=(3,)" in str(e) and "rank 1: all_reduce(shape=(4,)" in str(e)
else:
    raise AssertionError("mismatched shapes were not detected")
# mismatched collectives (all_reduce on one rank, broadcast on the other)
try:
    t = tt.ones(3)
    dist.all_reduce(t) if rank == 0 else dist.broadcast(t, src=0)
except RuntimeError as e:
    assert "different arguments" in str(e), e
else:
    raise AssertionError("mismatched collectives were not detected")

# bad arguments are clear errors naming the function and the value
for call, message in (
    (lambda: dist.broadcast(tt.ones(2), src=world), f"src={world} is not a rank"),
    (lambda: dist.all_reduce(tt.ones(2), op="mean"), "op must be one of"),
    (lambda: dist.all_reduce(tt.tensor([1, 2]), op=dist.ReduceOp.AVG), "floating-point"),
    (lambda: dist.all_reduce(np.ones(2)), "tensor must be a Tensor"),
    (lambda: dist.all_gather([tt.ones(2)], tt.ones(2)), "list of world_size=2"),
    (lambda: dist.all_reduce(tt.ones(2), group="other"), "only the default group"),
):
    try:
        call()
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as e:
        assert message in str(e), (message, str(e))
    else:
        raise AssertionError(f"no error for: {message}")

# DistributedSampler takes rank and world size from the group; the ranks split the dataset
sampler = DistributedSampler(range(11), shuffle=True, seed=3)
mine = list(sampler)
shares = [None] * world
dist.all_gather_object(shares, mine)
covered = [i for share in shares for i in share]
assert sorted(set(covered)) == list(range(11)) and len(covered) == 12, shares
assert len(mine) == 6 and sampler.num_replicas == world and sampler.rank == rank

dist.barrier()
dist.destroy_process_group()
assert not dist.is_initialized()
print(f"rank {rank}: ok", flush=True)
