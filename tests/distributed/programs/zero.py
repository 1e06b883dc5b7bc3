"""ZeroRedundancyOptimizer(AdamW) under DDP == plain AdamW under DDP, with sharded state.

Both runs see the same averaged gradients (DDP), so the parameters must agree to float64
rounding after several steps (with a learning-rate schedule changing lr in between); each rank
must hold the state of only its shard, about 1/world_size of the plain optimizer's; and the
consolidated state dict must equal the plain optimizer's.
"""

import numpy as np
from tinytensor.nn.parallel import DistributedDataParallel as DDP

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor import nn
from tinytensor.distributed.optim import ZeroRedundancyOptimizer

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()


def make():
    tt.manual_seed(0)
    layers = [nn.Linear(8, 8) for _ in range(5)] + [nn.LayerNorm(8), nn.Linear(8, 2)]
    return nn.Sequential(*layers).double()


def groups(model):
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    return [{"params": matrices, "weight_decay": 0.1}, {"params": vectors, "weight_decay": 0.0}]


def train(make_optimizer):
    model = make()
    ddp = DDP(model)
    opt = make_optimizer(groups(model))
    schedule = tt.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (step + 1))
    for step in range(5):
        rng = np.random.default_rng([step, rank])
        x, y = tt.tensor(rng.normal(size=(4, 8))), tt.tensor(rng.normal(size=(4, 2)))
        opt.zero_grad()
        ((ddp(x) - y) ** 2).mean().backward()
        opt.step()
        schedule.step()
    return model, opt


plain_model, plain = train(lambda g: tt.optim.AdamW(g, lr=1e-2))
zero_model, zero = train(lambda g: ZeroRedundancyOptimizer(g, tt.optim.AdamW, lr=1e-2))
worst = max(
    float(np.abs(p.numpy() - q.numpy()).max())
    for p, q in zip(plain_model.parameters(), zero_model.parameters())
)
assert worst < 1e-10, worst


def state_bytes(state):
    return sum(
        v.numpy().nbytes for s in state.values() for v in s.values() if getattr(v, "ndim", 0)
    )


mine, total = state_bytes(zero.state), state_bytes(plain.state)
shares = [None] * world
dist.all_gather_object(shares, mine)
assert sum(shares) == total, (shares, total)
largest = max(2 * p.numpy().nbytes for p in zero_model.parameters())  # exp_avg + exp_avg_sq
assert mine <= total / world + largest, (mine, total, largest)

zero.consolidate_state_dict(to=0)
if rank == 0:
    full, reference = zero.state_dict(), plain.state_dict()
    assert sorted(full["state"]) == sorted(reference["state"])
    for index, buffers in reference["state"].items():
        for name, value in buffers.items():
            ours = full["state"][index][name]
            if isinstance(value, tt.Tensor):
                np.testing.assert_allclose(ours.numpy(), value.numpy(), rtol=1e-12, atol=1e-14)
            else:
                assert ours == value, (name, ours, value)
    assert [g["lr"] for g in full["param_groups"]] == [g["lr"] for g in reference["param_groups"]]
# a fresh ZeRO loads the plain optimizer's state dict and continues identically
fresh_model = make()
fresh = ZeroRedundancyOptimizer(groups(fresh_model), tt.optim.AdamW, lr=1e-2)
fresh.load_state_dict(plain.state_dict())
assert state_bytes(fresh.state) == mine
print(f"rank {rank}: ok (max |ZeRO - AdamW| = {worst:.2g}; state bytes {mine} of {total})")
