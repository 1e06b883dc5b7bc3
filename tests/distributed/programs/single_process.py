"""One process, no mpiexec: the API before init, a world of one, and init's errors."""

import numpy as np
from tinytensor.nn.parallel import DistributedDataParallel as DDP

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor import nn

assert dist.is_available() and not dist.is_initialized()
for call, message in (
    (dist.get_rank, "get_rank: the default process group is not initialized"),
    (lambda: dist.all_reduce(tt.ones(2)), "all_reduce: the default process group"),
    (lambda: DDP(nn.Linear(2, 2)), "DistributedDataParallel: the default process group"),
    (lambda: dist.init_process_group("tcp"), "backend must be 'mpi', 'gloo'"),
):
    try:
        call()
    except (RuntimeError, ValueError) as e:
        assert message in str(e), (message, e)
    else:
        raise AssertionError(message)

try:
    dist.init_process_group("mpi", world_size=2)
except ValueError as e:
    assert "world_size=2 but the launcher started this process with world_size 1" in str(e), e
else:
    raise AssertionError("a wrong world_size was accepted")

dist.init_process_group("gloo")  # PyTorch's CPU backend name runs on MPI
assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "mpi")
try:
    dist.init_process_group("mpi")
except RuntimeError as e:
    assert "already initialized" in str(e)
else:
    raise AssertionError("a second init was accepted")
t = tt.tensor([1.0, 2.0])
dist.all_reduce(t, op=dist.ReduceOp.AVG)
assert t.tolist() == [1.0, 2.0]

# DDP over one process is the plain model
tt.manual_seed(0)
model = nn.Linear(3, 2).double()
ddp = DDP(model)
x = tt.tensor(np.arange(6.0).reshape(2, 3))
ddp(x).sum().backward()
np.testing.assert_allclose(model.bias.grad.numpy(), [2.0, 2.0])
np.testing.assert_allclose(model.weight.grad.numpy(), np.tile(x.numpy().sum(0), (2, 1)))
dist.destroy_process_group()
print("rank 0: ok", flush=True)
