"""A GPT, its Trainer and a character dataset written the way minGPT-style projects write them:
a NewGELU module, an MLP held in a ModuleDict and called through a lambda, init by self.apply,
configure_optimizers that walks named_modules() and sorts parameters into weight-decay groups by
isinstance against whitelist/blacklist module types, a Trainer over DataLoader(sampler=
RandomSampler(replacement=True, num_samples=huge), pin_memory, num_workers) with callbacks and
gradient clipping, a character Dataset of sliding windows, sampling with top_k.

Every function takes the library as `torch`, so the same code runs on PyTorch and, with only the
import changed, on tinytensor (tests/compat/test_mingpt_style.py compares the two). Written for
these tests, not copied from any project.
"""

import math
import random
import time
from collections import defaultdict
from types import SimpleNamespace


def set_seed(torch, np, seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def default_model_config(**overrides):
    config = SimpleNamespace(
        model_type=None, n_layer=2, n_head=2, n_embd=16, vocab_size=None, block_size=None,
        embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0,
    )  # fmt: skip
    vars(config).update(overrides)
    return config


def build(torch, config):
    nn = torch.nn
    F = torch.nn.functional

    class NewGELU(nn.Module):
        def forward(self, x):
            c = math.sqrt(2.0 / math.pi)
            return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * torch.pow(x, 3.0))))

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd)
            self.attn_dropout = nn.Dropout(config.attn_pdrop)
            self.resid_dropout = nn.Dropout(config.resid_pdrop)
            size = config.block_size
            self.register_buffer("bias", torch.tril(torch.ones(size, size)).view(1, 1, size, size))
            self.n_head, self.n_embd = config.n_head, config.n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd)
            self.mlp = nn.ModuleDict(
                dict(
                    c_fc=nn.Linear(config.n_embd, 4 * config.n_embd),
                    c_proj=nn.Linear(4 * config.n_embd, config.n_embd),
                    act=NewGELU(),
                    dropout=nn.Dropout(config.resid_pdrop),
                )
            )
            m = self.mlp
            self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlpf(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.vocab_size is not None and config.block_size is not None
            self.block_size = config.block_size
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    drop=nn.Dropout(config.embd_pdrop),
                    h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                    ln_f=nn.LayerNorm(config.n_embd),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
            self.n_params = sum(p.numel() for p in self.transformer.parameters())

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            elif isinstance(module, nn.LayerNorm):
                torch.nn.init.zeros_(module.bias)
                torch.nn.init.ones_(module.weight)

        def configure_optimizers(self, train_config):
            """Weight decay for Linear weights only; biases, LayerNorm and Embedding weights not."""
            decay, no_decay = set(), set()
            whitelist_weight_modules = (torch.nn.Linear,)
            blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
            for mn, m in self.named_modules():
                for pn, _p in m.named_parameters():
                    fpn = f"{mn}.{pn}" if mn else pn
                    if pn.endswith("bias"):
                        no_decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, whitelist_weight_modules):
                        decay.add(fpn)
                    elif pn.endswith("weight") and isinstance(m, blacklist_weight_modules):
                        no_decay.add(fpn)
            param_dict = {pn: p for pn, p in self.named_parameters()}
            assert len(decay & no_decay) == 0
            assert len(param_dict.keys() - (decay | no_decay)) == 0
            optim_groups = [
                {
                    "params": [param_dict[pn] for pn in sorted(list(decay))],
                    "weight_decay": train_config.weight_decay,
                },
                {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(
                optim_groups, lr=train_config.learning_rate, betas=train_config.betas
            )

        def forward(self, idx, targets=None):
            device = idx.device
            b, t = idx.size()
            assert t <= self.block_size, f"sequence of length {t}, block size {self.block_size}"
            pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            return logits, loss

        def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
            with torch.no_grad():
                for _ in range(max_new_tokens):
                    idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]
                    logits, _ = self(idx_cond)
                    logits = logits[:, -1, :] / temperature
                    if top_k is not None:
                        v, _ = torch.topk(logits, top_k)
                        logits[logits < v[:, [-1]]] = -float("Inf")
                    probs = F.softmax(logits, dim=-1)
                    if do_sample:
                        idx_next = torch.multinomial(probs, num_samples=1)
                    else:
                        _, idx_next = torch.topk(probs, k=1, dim=-1)
                    idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPT(config)


def default_train_config(**overrides):
    config = SimpleNamespace(
        device="auto", num_workers=0, max_iters=None, batch_size=4, learning_rate=3e-3,
        betas=(0.9, 0.95), weight_decay=0.1, grad_norm_clip=1.0,
    )  # fmt: skip
    vars(config).update(overrides)
    return config


class Trainer:
    def __init__(self, torch, DataLoader, config, model, train_dataset):
        self.torch, self.DataLoader = torch, DataLoader
        self.config, self.model, self.train_dataset = config, model, train_dataset
        self.optimizer = None
        self.callbacks = defaultdict(list)
        if config.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        else:
            self.device = config.device
        self.model = self.model.to(self.device)
        self.iter_num, self.iter_time, self.iter_dt = 0, 0.0, 0.0

    def add_callback(self, onevent, callback):
        self.callbacks[onevent].append(callback)

    def trigger_callbacks(self, onevent):
        for callback in self.callbacks.get(onevent, []):
            callback(self)

    def make_sampler(self):
        return self.torch.utils.data.RandomSampler(
            self.train_dataset, replacement=True, num_samples=int(1e10)
        )

    def run(self):
        torch, model, config = self.torch, self.model, self.config
        self.optimizer = model.configure_optimizers(config)
        train_loader = self.DataLoader(
            self.train_dataset,
            sampler=self.make_sampler(),
            shuffle=False,
            pin_memory=True,
            batch_size=config.batch_size,
            num_workers=config.num_workers,
        )
        model.train()
        self.iter_num = 0
        self.iter_time = time.time()
        data_iter = iter(train_loader)
        while True:
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(train_loader)
                batch = next(data_iter)
            batch = [t.to(self.device) for t in batch]
            x, y = batch
            logits, self.loss = model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_norm_clip)
            self.optimizer.step()
            self.trigger_callbacks("on_batch_end")
            self.iter_num += 1
            tnow = time.time()
            self.iter_dt = tnow - self.iter_time
            self.iter_time = tnow
            if config.max_iters is not None and self.iter_num >= config.max_iters:
                break


def make_char_dataset(torch, Dataset):
    class CharDataset(Dataset):
        """Every window of block_size + 1 characters: x is its head, y its tail."""

        def __init__(self, data, block_size):
            chars = sorted(list(set(data)))
            self.stoi = {ch: i for i, ch in enumerate(chars)}
            self.itos = {i: ch for i, ch in enumerate(chars)}
            self.vocab_size, self.block_size, self.data = len(chars), block_size, data

        def get_vocab_size(self):
            return self.vocab_size

        def get_block_size(self):
            return self.block_size

        def __len__(self):
            return len(self.data) - self.block_size

        def __getitem__(self, idx):
            chunk = self.data[idx : idx + self.block_size + 1]
            dix = [self.stoi[s] for s in chunk]
            x = torch.tensor(dix[:-1], dtype=torch.long)
            y = torch.tensor(dix[1:], dtype=torch.long)
            return x, y

    return CharDataset


def complete(torch, model, dataset, context, steps, device="cpu", **sampling):
    """The batch-end callback's sample: encode a prompt, generate, decode."""
    model.eval()
    with torch.no_grad():
        x = torch.tensor([dataset.stoi[s] for s in context], dtype=torch.long)[None, ...].to(device)
        y = model.generate(x, steps, **sampling)[0]
        completion = "".join([dataset.itos[int(i)] for i in y])
    model.train()
    return completion
