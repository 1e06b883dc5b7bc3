"""One training program written for PyTorch, run twice: as written, and with only its imports
changed to tinytensor (the way users port). Its data pipeline (Dataset, random_split,
DataLoader with a padding collate_fn), losses (KLDivLoss with label smoothing, SmoothL1Loss,
cosine_similarity) and optimizers/schedules (AdamW + OneCycleLR, RMSprop + SequentialLR,
ReduceLROnPlateau) must give the same losses, learning rates and weights, in float64."""

import numpy as np
import pytest

import tinytensor as tt

PROGRAM = '''
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, random_split

torch.set_default_dtype(torch.float64)
VOCAB, PAD, DIM, CLASSES = 12, 0, 8, 5


class Sequences(Dataset):
    """Variable-length token sequences; the class is the sum of the tokens mod CLASSES."""

    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.items = [rng.integers(1, VOCAB, size=rng.integers(2, 7)).tolist() for _ in range(n)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        ids = self.items[i]
        return torch.tensor(ids, dtype=torch.long), sum(ids) % CLASSES


def collate(batch):
    width = max(len(ids) for ids, _ in batch)
    x = torch.full((len(batch), width), PAD, dtype=torch.long)
    for row, (ids, _) in enumerate(batch):
        x[row, : len(ids)] = ids
    return x, torch.tensor([label for _, label in batch])


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.head = nn.Linear(DIM, CLASSES)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x):
        mask = (x != PAD).unsqueeze(-1).to(torch.float64)  # (B, T, 1)
        h = (self.emb(x) * mask).sum(1) / mask.sum(1)  # (B, DIM)
        return self.head(h), self.proj(h), h


def label_smoothed(target, smoothing=0.1):
    dist = torch.full((target.shape[0], CLASSES), smoothing / (CLASSES - 1))
    dist[torch.arange(target.shape[0]), target] = 1.0 - smoothing
    return dist


model = Classifier()
model.load_state_dict({k: torch.tensor(v) for k, v in INIT.items()})
full = Sequences(40, seed=1)
train, valid = random_split(full, [30, 10], generator=torch.Generator().manual_seed(42))
train_loader = DataLoader(train, batch_size=8, collate_fn=collate, drop_last=False)
valid_loader = DataLoader(valid, batch_size=5, collate_fn=collate)

head_params = list(model.head.parameters()) + list(model.emb.parameters())
opt = torch.optim.AdamW(head_params, lr=1e-2, weight_decay=0.01)
opt2 = torch.optim.RMSprop(model.proj.parameters(), lr=1e-3, momentum=0.5)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, epochs=3, steps_per_epoch=4)
sched2 = torch.optim.lr_scheduler.SequentialLR(
    opt2,
    [torch.optim.lr_scheduler.LinearLR(opt2, 0.2, total_iters=4),
     torch.optim.lr_scheduler.ExponentialLR(opt2, 0.9)],
    milestones=[4],
)
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
kl = nn.KLDivLoss(reduction="batchmean")
smooth = nn.SmoothL1Loss(beta=0.5)

log = []
for epoch in range(3):
    model.train()
    for x, y in train_loader:
        logits, projected, h = model(x)
        loss = kl(F.log_softmax(logits, dim=-1), label_smoothed(y))
        loss = loss + 0.1 * smooth(projected, h.detach())
        loss = loss - 0.05 * F.cosine_similarity(projected, h, dim=-1).mean()
        opt.zero_grad()
        opt2.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt2.step()
        sched.step()
        sched2.step()
        log.append(("train", loss.item(), sched.get_last_lr()[0], sched2.get_last_lr()[0]))
    model.eval()
    with torch.no_grad():
        total = sum(F.cross_entropy(model(x)[0], y, reduction="sum").item()
                    for x, y in valid_loader)
    plateau.step(total / len(valid))
    log.append(("valid", total, opt.param_groups[0]["lr"], f"{loss:.6f}"))

WEIGHTS = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
LOG = log
'''


def run(lib_name, init):
    """Executes PROGRAM with `import torch` meaning `lib_name`; returns its log and weights."""
    source = PROGRAM
    if lib_name == "tinytensor":
        source = (
            source.replace(
                "import torch.nn.functional as F", "import tinytensor.nn.functional as F"
            )
            .replace("import torch.nn as nn", "import tinytensor.nn as nn")
            .replace("from torch.utils.data import", "from tinytensor.utils.data import")
            .replace("import torch\n", "import tinytensor as torch\n")
        )
    namespace = {"INIT": init, "__name__": f"ported_{lib_name}"}
    exec(compile(source, f"<program on {lib_name}>", "exec"), namespace)
    return namespace["LOG"], namespace["WEIGHTS"]


@pytest.fixture
def restore_default_dtype():
    previous = tt.get_default_dtype()
    yield
    tt.set_default_dtype(previous)


def test_ported_training_program_matches_torch(torch, restore_default_dtype):
    rng = np.random.default_rng(0)
    init = {
        "emb.weight": rng.normal(size=(12, 8)),
        "head.weight": rng.normal(size=(5, 8)) * 0.3,
        "head.bias": np.zeros(5),
        "proj.weight": rng.normal(size=(8, 8)) * 0.3,
        "proj.bias": rng.normal(size=8) * 0.1,
    }
    tt.manual_seed(0)
    torch.manual_seed(0)
    ours_log, ours_weights = run("tinytensor", init)
    # random_split draws from each library's own generator: give torch the same split
    theirs_log, theirs_weights = run_torch_with_our_split(torch, init)
    assert len(ours_log) == len(theirs_log) == 15
    for step, (a, b) in enumerate(zip(ours_log, theirs_log)):
        assert a[0] == b[0], step
        assert a[1:3] == pytest.approx(b[1:3], rel=1e-9), f"step {step}: {a} vs {b}"
        if a[0] == "valid":
            assert a[3] == b[3], f"f-string of the loss at epoch end: {a[3]} vs {b[3]}"
        else:
            assert a[3] == pytest.approx(b[3], rel=1e-12)
    assert len({entry[2] for entry in ours_log}) > 5, "the lr should move"
    assert list(ours_weights) == list(theirs_weights)
    for k in ours_weights:
        np.testing.assert_allclose(ours_weights[k], theirs_weights[k], rtol=1e-9, err_msg=k)


def run_torch_with_our_split(torch, init):
    """PROGRAM on torch, with random_split replaced by one that returns our split's indices
    (the two libraries' generators differ, so the split itself is not comparable)."""
    import torch.utils.data as torch_data

    ours = tt.utils.data.random_split(range(40), [30, 10], generator=tt.Generator().manual_seed(42))
    original = torch_data.random_split

    def same_split(dataset, lengths, generator=None):
        return [torch_data.Subset(dataset, s.indices) for s in ours]

    torch_data.random_split = same_split
    try:
        return run("torch", init)
    finally:
        torch_data.random_split = original
