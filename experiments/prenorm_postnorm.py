"""Pre-LN vs Post-LN: gradient norm of every layer of a deep stack, at init and after training.

Xiong et al. 2020 ("On Layer Normalization in the Transformer Architecture") show that at
initialization a Post-LN stack's parameter gradients grow toward the last layers (large near the
output, which is why Post-LN needs learning-rate warmup), while a Pre-LN stack's are roughly
uniform across layers. We measure it on a 12-layer causal `EncoderBlock` stack
(d_model 64, 4 heads, dropout 0) trained on a copy task: [x_1..x_L, SEP, x_1..x_L] with random
tokens x_i, next-token cross-entropy on the copied half only (needs attention to solve).
Both variants share the initial weights (same seed), data and optimizer (AdamW, lr 1e-3, linear
warmup then constant); the Pre-LN model has the final LayerNorm it needs before the head.
Grad norm of a layer = sqrt(sum of ||grad||^2 over that layer's parameters), on one fixed batch.

    python -m experiments.prenorm_postnorm [--out runs/experiments] [--steps 300] [--layers 12]
"""

from __future__ import annotations

import os

# NOTE: before NumPy loads OpenBLAS. Our matrices are tiny (64-256 wide); multithreaded BLAS on
# them is slower, and on a busy 2-core machine it was ~30x slower (thread contention).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import tinytensor as tt  # noqa: E402
from tinytensor import nn  # noqa: E402

from .common import parse_args, save_text, table  # noqa: E402

N_LAYERS, D_MODEL, N_HEADS = 12, 64, 4
VOCAB, COPY_LEN = 16, 8  # token 0 is the separator; payload tokens are 1..VOCAB-1
SEQ_LEN = 2 * COPY_LEN + 1
BATCH, LR, WARMUP = 32, 1e-3, 30


class Stack(nn.Module):
    """Token + position embeddings, N causal encoder layers, (final norm if Pre-LN), head."""

    def __init__(self, norm_first: bool, n_layers: int = N_LAYERS):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Embedding(SEQ_LEN, D_MODEL)
        self.layers = nn.ModuleList(
            nn.EncoderBlock(D_MODEL, N_HEADS, dropout=0.0, norm_first=norm_first)
            for _ in range(n_layers)
        )
        # NOTE: Pre-LN's residual stream is never normalized inside the stack, so it needs a
        # final norm; Post-LN's last layer already ends with one.
        self.final_norm = nn.LayerNorm(D_MODEL) if norm_first else nn.Identity()
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(tt.arange(tokens.shape[1]))
        for layer in self.layers:
            x = layer(x, is_causal=True)
        return self.head(self.final_norm(x))


def copy_batch(rng, batch):
    """Inputs (B, T) and targets (B, T): -100 except where the next token is a copied one."""
    payload = rng.integers(1, VOCAB, size=(batch, COPY_LEN))
    seq = np.concatenate([payload, np.zeros((batch, 1), np.int64), payload], axis=1)
    targets = np.full_like(seq, -100)
    targets[:, COPY_LEN:-1] = seq[:, COPY_LEN + 1 :]
    return tt.tensor(seq), tt.tensor(targets)


def loss_and_accuracy(model, tokens, targets):
    logits = model(tokens)
    loss = tt.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    mask = targets.numpy() != -100
    accuracy = float((logits.numpy().argmax(-1) == targets.numpy())[mask].mean())
    return loss, accuracy


def layer_grad_norms(model, tokens, targets):
    """Per-layer gradient norms (N,) of the loss on one batch; leaves the model's grads zeroed."""
    model.zero_grad()
    loss, _ = loss_and_accuracy(model, tokens, targets)
    loss.backward()
    norms = []
    for layer in model.layers:
        total = sum(
            float((p.grad.numpy().astype(np.float64) ** 2).sum()) for p in layer.parameters()
        )
        norms.append(np.sqrt(total))
    model.zero_grad()
    return np.array(norms)


def run(norm_first: bool, steps: int, n_layers: int = N_LAYERS, seed: int = 0):
    """-> dict(init, trained: per-layer grad norms; loss_init, loss, acc_init, acc on a probe)."""
    tt.manual_seed(seed)  # same initial weights for both variants
    model = Stack(norm_first, n_layers)
    probe = copy_batch(np.random.default_rng(1234), 64)  # fixed measurement batch
    with tt.no_grad():
        loss0, acc0 = loss_and_accuracy(model, *probe)
    init = layer_grad_norms(model, *probe)
    opt = tt.optim.AdamW(model.parameters(), lr=LR)
    sched = tt.optim.lr_scheduler.get_constant_schedule_with_warmup(opt, min(WARMUP, steps))
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        loss, _ = loss_and_accuracy(model, *copy_batch(rng, BATCH))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    trained = layer_grad_norms(model, *probe)
    with tt.no_grad():
        loss1, acc1 = loss_and_accuracy(model, *probe)
    return dict(
        init=init,
        trained=trained,
        loss_init=loss0.item(),
        loss=loss1.item(),
        acc_init=acc0,
        acc=acc1,
    )


def plot(pre, post, steps, path):
    # NOTE: separate y-axes: trained gradients are ~1000x smaller (the loss is near 0), and a
    # shared axis would flatten the init panel's layer-to-layer trend.
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    layers = np.arange(1, len(pre["init"]) + 1)
    for ax, key, title in zip(
        axes, ("init", "trained"), ("at initialization", f"after {steps} steps")
    ):
        ax.plot(layers, pre[key], "o-", label="Pre-LN: LayerNorm before each sublayer")
        ax.plot(layers, post[key], "s-", label="Post-LN: LayerNorm after each residual add")
        ax.set_yscale("log")
        ax.set_xticks(layers)
        ax.set_xlabel("layer (1 = next to the input)")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylabel("L2 norm of the layer's parameter gradients (log scale)")
    axes[0].legend()
    fig.suptitle(
        f"{len(layers)}-layer Transformer, d_model={D_MODEL}, {N_HEADS} heads, copy task, AdamW"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summarize(pre, post, steps):
    """The printed table and a few ratios that say what the curves do."""
    rows = [
        [
            i + 1,
            f"{pre['init'][i]:.3g}",
            f"{post['init'][i]:.3g}",
            f"{pre['trained'][i]:.3g}",
            f"{post['trained'][i]:.3g}",
        ]  # fmt: skip
        for i in range(len(pre["init"]))
    ]
    headers = ["layer", "Pre-LN init", "Post-LN init", "Pre-LN trained", "Post-LN trained"]

    def last_over_first(v):
        return v[-1] / v[0]

    def spread(v):
        return v.max() / v.min()

    lines = [
        f"Per-layer gradient norms, {len(pre['init'])} layers, d_model={D_MODEL}, {N_HEADS} heads,"
        f" copy task (L={COPY_LEN}, vocab {VOCAB}), {steps} AdamW steps, batch {BATCH}",
        table(headers, rows),
        "",
        table(
            [
                "variant",
                "last/first init",
                "max/min init",
                "last/first trained",
                "loss init",
                "loss trained",
                "copy acc init",
                "copy acc trained",
            ],  # fmt: skip
            [
                [
                    name,
                    f"{last_over_first(r['init']):.2f}",
                    f"{spread(r['init']):.2f}",
                    f"{last_over_first(r['trained']):.2f}",
                    f"{r['loss_init']:.3f}",
                    f"{r['loss']:.3f}",
                    f"{r['acc_init']:.3f}",
                    f"{r['acc']:.3f}",
                ]  # fmt: skip
                for name, r in (("Pre-LN", pre), ("Post-LN", post))
            ],
        ),
        f"(chance copy accuracy = {1 / (VOCAB - 1):.3f}; loss at chance = {np.log(VOCAB):.3f})",
        f"At init, Post-LN/Pre-LN grad norm: {post['init'][0] / pre['init'][0]:.2f}x at layer 1,"
        f" {post['init'][-1] / pre['init'][-1]:.2f}x at the last layer. Xiong et al. predict"
        " Post-LN growing toward the output and Pre-LN flat (and smaller, ~1/sqrt(L)).",
    ]
    return "\n".join(lines)


def main():
    args = parse_args(
        __doc__.splitlines()[0],
        steps=(int, 300, "training steps per variant"),
        layers=(int, N_LAYERS, "encoder layers in the stack"),
    )
    pre, post = run(True, args.steps, args.layers), run(False, args.steps, args.layers)
    text = summarize(pre, post, args.steps)
    png = os.path.join(args.out, "prenorm_postnorm.png")
    plot(pre, post, args.steps, png)
    print(text)
    print("wrote", save_text(args.out, "prenorm_postnorm.txt", text), "and", png)
    return dict(pre=pre, post=post, text=text, png=png)


if __name__ == "__main__":
    main()
