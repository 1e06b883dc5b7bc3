"""DDP on N ranks with per-rank batch B == one process with batch N·B, after several AdamW steps.

    mpiexec -n 2 python ddp_equivalence.py MODEL BUCKET_CAP_MB MICRO_STEPS

MODEL is "mlp" or "gpt" (GPT's embedding is tied to its LM head: one weight, two gradient
contributions). With MICRO_STEPS = k > 1 each rank accumulates k micro-batches, the first k-1
under no_sync(), with loss / k; the reference takes the whole N·k·B batch at once.
Rank 0 trains the reference after the DDP run and compares the parameters (float64, 1e-10).
"""

import sys

import numpy as np
from tinytensor.models.gpt import GPT, GPTConfig
from tinytensor.nn.parallel import DistributedDataParallel as DDP

import tinytensor as tt
import tinytensor.distributed as dist
from tinytensor import nn

MODEL, CAP_MB, MICRO = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
STEPS, B, VOCAB, T = 4, 3, 13, 8

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()


def make_model(seed):
    tt.manual_seed(seed)
    if MODEL == "gpt":
        config = GPTConfig(vocab_size=VOCAB, block_size=T, n_layer=2, n_head=2, n_embd=16,
                           dropout=0.0)  # fmt: skip
        return GPT(config).double()
    return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 16), nn.GELU(),
                         nn.Linear(16, 3)).double()  # fmt: skip


def batch(step, micro, rows):
    """The global batch of (step, micro-step): every rank can make it; rows picks a part."""
    rng = np.random.default_rng([step, micro])
    if MODEL == "gpt":
        x = rng.integers(0, VOCAB, size=(world * B, T))
        return tt.tensor(x[rows]), tt.tensor(np.roll(x, -1, axis=1)[rows])
    x, y = rng.normal(size=(world * B, 5)), rng.normal(size=(world * B, 3))
    return tt.tensor(x[rows]), tt.tensor(y[rows])


def loss_of(model, x, y):
    if MODEL == "gpt":
        return model(x, y).loss
    return ((model(x) - y) ** 2).mean()


def train(model, rows, ddp=None):
    opt = tt.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    for step in range(STEPS):
        opt.zero_grad()
        for micro in range(MICRO):
            x, y = batch(step, micro, rows)
            if ddp is not None and micro < MICRO - 1:
                with ddp.no_sync():
                    (loss_of(ddp, x, y) / MICRO).backward()
            else:
                (loss_of(ddp or model, x, y) / MICRO).backward()
        opt.step()


# Each rank starts from different weights: DDP must make them rank 0's.
model = make_model(seed=100 + rank)
ddp = DDP(model, bucket_cap_mb=CAP_MB)
keys = list(ddp.state_dict())
assert keys == ["module." + k for k in model.state_dict()], keys[:3]
assert ddp.module is model
train(model, slice(rank * B, (rank + 1) * B), ddp)

if rank == 0:
    reference = make_model(seed=100)
    train(reference, slice(0, world * B))
    worst = max(
        float(np.abs(p.numpy() - q.numpy()).max())
        for p, q in zip(model.parameters(), reference.parameters())
    )
    moved = max(
        float(np.abs(p.numpy() - q.numpy()).max())
        for p, q in zip(reference.parameters(), make_model(seed=100).parameters())
    )
    print(f"max |DDP - one process| = {worst:.3g} (training moved the weights by {moved:.3g})")
    assert moved > 1e-3, "the weights did not change: the comparison would prove nothing"
    assert worst < 1e-10, worst
# every replica ends equal
checksum = tt.tensor(
    [float(np.sum([p.numpy().sum() for p in model.parameters()]))], dtype=tt.float64
)
sums = [tt.zeros(1, dtype=tt.float64) for _ in range(world)]
dist.all_gather(sums, checksum)
assert len({s.item() for s in sums}) == 1, [s.item() for s in sums]
print(f"rank {rank}: ok ({len(ddp._reducer.buckets)} buckets)", flush=True)
