"""DDP's other promises, checked on 2 ranks:

- communication overlaps backward: the first bucket's all-reduce starts before backward has
  produced the last gradient;
- find_unused_parameters=True: a branch the loss does not use keeps .grad None, the rest is
  averaged; without it, the next forward raises an error naming the parameter;
- buffers are broadcast from rank 0; a model whose parameters differ across ranks is an error
  at construction, on every rank.
"""

import numpy as np
from tinytensor.nn.parallel import DistributedDataParallel as DDP

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor import nn

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()


class TwoBranches(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.used = nn.Linear(width, width)
        self.unused = nn.Linear(width, width)
        self.register_buffer("scale", tt.full((1,), float(rank + 1)))

    def forward(self, x):
        return self.used(x) * self.scale


# ---- overlap: record when buckets start and when gradients arrive ---------------------------
tt.manual_seed(0)
deep = nn.Sequential(*[nn.Linear(32, 32) for _ in range(6)]).double()
ddp = DDP(deep, bucket_cap_mb=32 * 33 * 8 / 2**20)  # one Linear per bucket
events = []
reducer = ddp._reducer
launch = reducer.backend.iall_reduce
reducer.backend.iall_reduce = lambda array, op: events.append("launch") or launch(array, op)
for p in deep.parameters():  # registered after DDP's hooks: they run after them
    p.register_post_accumulate_grad_hook(lambda p: events.append("grad"))
ddp(tt.randn(4, 32, dtype=tt.float64)).sum().backward()
assert events.count("launch") == 6, events
first_launch, last_grad = events.index("launch"), len(events) - 1 - events[::-1].index("grad")
assert first_launch < last_grad, events  # communication started while backward was running
reducer.backend.iall_reduce = launch

# ---- unused parameters ------------------------------------------------------------------
tt.manual_seed(rank)
model = TwoBranches().double()
ddp = DDP(model, find_unused_parameters=True)
assert model.scale.item() == 1.0  # rank 0's buffer everywhere
x = tt.tensor(np.full((2, 4), rank + 1.0))
ddp(x).sum().backward()
assert model.unused.weight.grad is None and model.unused.bias.grad is None
np.testing.assert_allclose(model.used.bias.grad.numpy(), np.full(4, np.mean([2.0, 2.0])))
np.testing.assert_allclose(model.used.weight.grad.numpy(), np.full((4, 4), np.mean([2.0, 4.0])))

model2 = TwoBranches().double()
strict = DDP(model2)
strict(x).sum().backward()  # `unused` gets no gradient: the reduction cannot finish
try:
    strict(x)
except RuntimeError as e:
    assert "unused.weight" in str(e) and "find_unused_parameters=True" in str(e), e
else:
    raise AssertionError("a stuck reduction was not reported")

# ---- a second backward through one forward's graph: an error, not a silently local gradient
tt.manual_seed(0)
twice = DDP(nn.Linear(4, 4).double())
loss = twice(tt.ones(2, 4, dtype=tt.float64)).sum()
loss.backward(retain_graph=True)
try:
    loss.backward()
except RuntimeError as e:
    assert "arrived after the gradients of this forward were averaged" in str(e), e
else:
    raise AssertionError("a second backward after the reduction was not reported")

# ---- mismatched models ------------------------------------------------------------------
try:
    DDP(nn.Linear(3, 3 + rank))
except RuntimeError as e:
    assert "different arguments" in str(e) and "weight (3, 3)" in str(e), e
else:
    raise AssertionError("different parameter shapes across ranks were not detected")

# ---- clear errors ------------------------------------------------------------------------
for call, message in (
    (lambda: DDP("model"), "module must be an nn.Module"),
    (lambda: DDP(nn.Linear(2, 2), bucket_cap_mb=0), "bucket_cap_mb must be positive"),
):
    try:
        call()
    except (TypeError, ValueError) as e:
        assert message in str(e), (message, e)
    else:
        raise AssertionError(message)
print(f"rank {rank}: ok", flush=True)
