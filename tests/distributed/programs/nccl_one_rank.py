"""On one GPU: init_process_group("nccl"), the collectives on CUDA tensors, DDP, ZeRO."""

import numpy as np
from tinytensor.nn.parallel import DistributedDataParallel as DDP

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor import nn
from tinytensor.distributed.optim import ZeroRedundancyOptimizer

dist.init_process_group("nccl")
assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "nccl")
t = tt.tensor([1.0, 2.0, 3.0], device="cuda")
for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
    dist.all_reduce(t, op=op)
    np.testing.assert_allclose(t.cpu().numpy(), [1.0, 2.0, 3.0])
dist.broadcast(t, src=0)
out = [tt.zeros(3, device="cuda")]
dist.all_gather(out, t)
np.testing.assert_allclose(out[0].cpu().numpy(), [1.0, 2.0, 3.0])
rs = tt.zeros(3, device="cuda")
dist.reduce_scatter(rs, [t])
np.testing.assert_allclose(rs.cpu().numpy(), [1.0, 2.0, 3.0])
try:
    dist.all_reduce(tt.ones(2))
except RuntimeError as e:
    assert "the nccl backend communicates CUDA tensors" in str(e)
else:
    raise AssertionError("a CPU tensor was accepted by nccl")

tt.manual_seed(0)
model = nn.Linear(4, 2).to("cuda")
reference = nn.Linear(4, 2)
reference.load_state_dict(model.state_dict())
ddp = DDP(model)
opt = ZeroRedundancyOptimizer(ddp.parameters(), tt.optim.AdamW, lr=1e-2)
ref_opt = tt.optim.AdamW(reference.parameters(), lr=1e-2)
x = tt.randn(3, 4)
for _ in range(3):
    opt.zero_grad()
    ref_opt.zero_grad()
    ddp(x.to("cuda")).sum().backward()
    reference(x).sum().backward()
    opt.step()
    ref_opt.step()
for p, q in zip(model.parameters(), reference.parameters()):
    np.testing.assert_allclose(p.cpu().numpy(), q.numpy(), rtol=1e-5, atol=1e-6)
dist.destroy_process_group()
print("rank 0: ok", flush=True)
