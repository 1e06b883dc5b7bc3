"""The default GPT training step of examples/train_gpt.py in tinytensor and in PyTorch, timed in
the same run: tokens per second of forward + backward + clip + AdamW on the same model and data.

    python benchmarks/train_gpt_torch.py                 # ~1 minute: timing table
    python benchmarks/train_gpt_torch.py --train 180     # also train the PyTorch twin for 180 s
                                                         # and report its validation loss

The PyTorch twin is the same GPT-2 architecture (Pre-LN, separate q/k/v projections, causal
scaled-dot-product attention, tanh GELU, tied LM head, N(0, 0.02) init with scaled residual
projections), the same AdamW (decay on matrices only), warmup + cosine schedule and batches.
Both use the same thread settings: whatever the environment gives (set OPENBLAS_NUM_THREADS and
OMP_NUM_THREADS to compare single-threaded).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import torch  # noqa: E402
import train_gpt  # noqa: E402
from torch import nn  # noqa: E402
from training.data import (  # noqa: E402
    CharTokenizer,
    RandomWindows,
    fixed_windows,
    load_text,
    split_train_val,
)
from training.optimization import make_adamw, warmup_cosine, warmup_cosine_factor  # noqa: E402

import tinytensor as tt  # noqa: E402


class TorchBlock(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))
        self.fc_in, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, cache=None):
        """cache (generation, benchmarks/gpt_generate.py): None, or a list that holds this
        layer's keys and values of the tokens so far ([] at first); the new ones are added."""
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (
            f(h).view(b, t, self.n_head, d // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            for f in (self.q, self.k, self.v)
        )
        if cache is not None:
            if cache:
                if t != 1:
                    raise ValueError("TorchBlock: after the prompt, one new token per step")
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            cache[:] = [k, v]
        # causal within a sequence; a cached step's one new token sees every key
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc_out(nn.functional.gelu(self.fc_in(self.norm2(x)), approximate="tanh"))


class TorchGPT(nn.Module):
    def __init__(self, vocab, block_size, n_layer, n_head, d):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block_size, d)
        self.blocks = nn.ModuleList(TorchBlock(d, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "norm" in name or name.startswith("ln_f"):
                nn.init.ones_(p)
            else:
                std = (
                    0.02 / math.sqrt(2 * n_layer)
                    if name.endswith(("out.weight", "fc_out.weight"))
                    else 0.02
                )
                nn.init.normal_(p, 0.0, std)

    def logits(self, idx, caches=None):
        """(B, T, vocab) logits of idx (B, T); `caches`: one list per block (see TorchBlock),
        for generation with a KV cache, where idx holds only the tokens not yet cached."""
        t = idx.shape[1]
        start = caches[0][0].shape[2] if caches and caches[0] else 0
        x = self.wte(idx) + self.wpe.weight[start : start + t]
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        return self.ln_f(x) @ self.wte.weight.T

    def forward(self, idx, targets):
        logits = self.logits(idx)
        return nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        )


def torch_optimizer(model, args):
    params = [p for p in model.parameters()]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": args.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: warmup_cosine_factor(s, args.warmup_steps, args.steps, 0.1)
    )
    return opt, sched


def time_steps(step, n_warmup, n_steps):
    for _ in range(n_warmup):
        step()
    start = time.perf_counter()
    for _ in range(n_steps):
        step()
    return (time.perf_counter() - start) / n_steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps-timed", type=int, default=10, help="steps timed per library")
    parser.add_argument("--train", type=float, default=0.0,
                        help="also train the PyTorch twin for this many seconds")  # fmt: skip
    bench_args = parser.parse_args()
    args = train_gpt.build_parser().parse_args([])  # the example's defaults
    text = load_text(None)
    tok = CharTokenizer.from_text(text)
    train_ids, val_ids = split_train_val(tok.encode(text), args.val_fraction)
    batches = RandomWindows(train_ids, args.block_size, args.batch_size, seed=0)
    x, y = batches.next_batch()
    tokens = args.batch_size * args.block_size
    print(f"torch threads {torch.get_num_threads()}, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}; batch {args.batch_size}x"
          f"{args.block_size}, {args.n_layer} layers, width {args.n_embd}")  # fmt: skip

    tt.manual_seed(0)
    ours = train_gpt.build_model(args, tok.vocab_size)
    opt = make_adamw(ours, args.lr, args.weight_decay)
    sched = warmup_cosine(opt, args.warmup_steps, args.steps)
    xt, yt = tt.tensor(x), tt.tensor(y)

    def our_step():
        loss = ours(xt, yt).loss
        opt.zero_grad()
        loss.backward()
        tt.optim.clip_grad_norm_(ours.parameters(), args.grad_clip)
        opt.step()
        sched.step()

    torch.manual_seed(0)
    twin = TorchGPT(tok.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd)
    topt, tsched = torch_optimizer(twin, args)
    xp, yp = torch.from_numpy(x), torch.from_numpy(y)

    def torch_step():
        loss = twin(xp, yp)
        topt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(twin.parameters(), args.grad_clip)
        topt.step()
        tsched.step()

    t_ours = time_steps(our_step, 2, bench_args.steps_timed)
    t_torch = time_steps(torch_step, 2, bench_args.steps_timed)
    print(f"{'library':<12}{'ms/step':>10}{'tokens/s':>12}")
    print(f"{'tinytensor':<12}{t_ours * 1e3:>10.0f}{tokens / t_ours:>12,.0f}")
    print(f"{'pytorch':<12}{t_torch * 1e3:>10.0f}{tokens / t_torch:>12,.0f}")
    print(f"tinytensor / pytorch time per step: {t_ours / t_torch:.2f}x")

    if bench_args.train > 0:
        torch.manual_seed(0)
        twin = TorchGPT(tok.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd)
        topt, tsched = torch_optimizer(twin, args)
        batches = RandomWindows(train_ids, args.block_size, args.batch_size, seed=0)
        vx, vy = fixed_windows(val_ids, args.block_size, 64)
        start, step = time.perf_counter(), 0
        while time.perf_counter() - start < bench_args.train and step < args.steps:
            bx, by = batches.next_batch()
            xp, yp = torch.from_numpy(bx), torch.from_numpy(by)
            torch_step()
            step += 1
        with torch.no_grad():
            val = twin(torch.from_numpy(vx), torch.from_numpy(vy)).item()
        print(f"pytorch twin: {step} steps in {time.perf_counter() - start:.0f} s, "
              f"validation loss {val:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
