"""Character-level models and their training program written the way makemore-style projects write
them: a Bigram table, an MLP over a rolled context, hand-written RNN and GRU cells, a
bag-of-words block, a small Transformer, a word Dataset padded with -1 targets, an endless loader
over RandomSampler(replacement=True, num_samples=huge), a sampling loop with topk/multinomial and
an inference_mode evaluation.

Every function takes the library as `torch`, so the same code runs on PyTorch and, with only the
import changed, on tinytensor (tests/compat/test_makemore_style.py compares the two). Written for
these tests, not copied from any project.
"""

import math
from dataclasses import dataclass


@dataclass
class ModelConfig:
    block_size: int = 8
    vocab_size: int = 12
    n_layer: int = 2
    n_embd: int = 16
    n_embd2: int = 16
    n_head: int = 2


def build(torch, kind, config):
    """One of the six model kinds: bigram, mlp, rnn, gru, bow, transformer."""
    nn = torch.nn
    F = torch.nn.functional

    class NewGELU(nn.Module):
        def forward(self, x):
            inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
            return 0.5 * x * (1.0 + torch.tanh(inner))

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd)
            size = config.block_size
            self.register_buffer("bias", torch.tril(torch.ones(size, size)).view(1, 1, size, size))
            self.n_head, self.n_embd = config.n_head, config.n_embd

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

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
                )
            )
            m = self.mlp
            self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))  # a plain attribute, not a module

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlpf(self.ln_2(x))

    class Transformer(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.block_size = config.block_size
            self.transformer = nn.ModuleDict(
                dict(
                    wte=nn.Embedding(config.vocab_size, config.n_embd),
                    wpe=nn.Embedding(config.block_size, config.n_embd),
                    h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                    ln_f=nn.LayerNorm(config.n_embd),
                )
            )
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
            self.n_params = sum(p.numel() for p in self.transformer.parameters())

        def get_block_size(self):
            return self.block_size

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
            x = self.transformer.wte(idx) + self.transformer.wpe(pos)
            for block in self.transformer.h:
                x = block(x)
            logits = self.lm_head(self.transformer.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            return logits, loss

    class CausalBoW(nn.Module):
        """Averages the preceding context: a uniform causal attention."""

        def __init__(self, config):
            super().__init__()
            size = config.block_size
            self.register_buffer("bias", torch.tril(torch.ones(size, size)).view(1, size, size))

        def forward(self, x):
            B, T, C = x.size()
            att = torch.zeros((B, T, T), device=x.device)
            att = att.masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            return att @ x

    class BoWBlock(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.cbow = CausalBoW(config)
            self.mlp = nn.ModuleDict(
                dict(
                    c_fc=nn.Linear(config.n_embd, config.n_embd2),
                    c_proj=nn.Linear(config.n_embd2, config.n_embd),
                )
            )
            m = self.mlp
            self.mlpf = lambda x: m.c_proj(F.tanh(m.c_fc(x)))

        def forward(self, x):
            x = x + self.cbow(x)
            return x + self.mlpf(x)

    class BoW(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.block_size, self.vocab_size = config.block_size, config.vocab_size
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
            self.context_block = BoWBlock(config)
            self.lm_head = nn.Linear(config.n_embd, self.vocab_size)

        def get_block_size(self):
            return self.block_size

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
            x = self.context_block(self.wte(idx) + self.wpe(pos))
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            return logits, loss

    class RNNCell(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.xh_to_h = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

        def forward(self, xt, hprev):
            return F.tanh(self.xh_to_h(torch.cat([xt, hprev], dim=1)))

    class GRUCell(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.xh_to_z = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
            self.xh_to_r = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
            self.xh_to_hbar = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

        def forward(self, xt, hprev):
            xh = torch.cat([xt, hprev], dim=1)
            r = F.sigmoid(self.xh_to_r(xh))
            xhr = torch.cat([xt, r * hprev], dim=1)
            hbar = F.tanh(self.xh_to_hbar(xhr))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, config, cell_type):
            super().__init__()
            self.block_size, self.vocab_size = config.block_size, config.vocab_size
            self.start = nn.Parameter(torch.zeros(1, config.n_embd2))
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.cell = RNNCell(config) if cell_type == "rnn" else GRUCell(config)
            self.lm_head = nn.Linear(config.n_embd2, self.vocab_size)

        def get_block_size(self):
            return self.block_size

        def forward(self, idx, targets=None):
            b, t = idx.size()
            emb = self.wte(idx)
            hprev = self.start.expand((b, -1))
            hiddens = []
            for i in range(t):
                hprev = self.cell(emb[:, i, :], hprev)
                hiddens.append(hprev)
            logits = self.lm_head(torch.stack(hiddens, 1))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            return logits, loss

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.block_size, self.vocab_size = config.block_size, config.vocab_size
            # +1: a special token meaning "before the start"
            self.wte = nn.Embedding(config.vocab_size + 1, config.n_embd)
            self.mlp = nn.Sequential(
                nn.Linear(self.block_size * config.n_embd, config.n_embd2),
                nn.Tanh(),
                nn.Linear(config.n_embd2, self.vocab_size),
            )

        def get_block_size(self):
            return self.block_size

        def forward(self, idx, targets=None):
            embs = []
            for _ in range(self.block_size):
                embs.append(self.wte(idx))
                idx = torch.roll(idx, 1, 1)  # a new tensor: the next line must not touch the input
                idx[:, 0] = self.vocab_size
            x = torch.cat(embs, -1)
            logits = self.mlp(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            return logits, loss

    class Bigram(nn.Module):
        def __init__(self, config):
            super().__init__()
            n = config.vocab_size
            self.logits = nn.Parameter(torch.zeros((n, n)))

        def get_block_size(self):
            return 1

        def forward(self, idx, targets=None):
            logits = self.logits[idx]
            loss = None
            if targets is not None:
                loss = F.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
                )
            return logits, loss

    kinds = {
        "bigram": lambda: Bigram(config),
        "mlp": lambda: MLP(config),
        "rnn": lambda: RNN(config, "rnn"),
        "gru": lambda: RNN(config, "gru"),
        "bow": lambda: BoW(config),
        "transformer": lambda: Transformer(config),
    }
    return kinds[kind]()


def make_dataset_class(torch, Dataset):
    class WordDataset(Dataset):
        """Words as <START> + letters, targets letters + <STOP>, padded targets are -1."""

        def __init__(self, words, chars, max_word_length):
            self.words, self.chars, self.max_word_length = words, chars, max_word_length
            self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}
            self.itos = {i: s for s, i in self.stoi.items()}

        def __len__(self):
            return len(self.words)

        def contains(self, word):
            return word in self.words

        def get_vocab_size(self):
            return len(self.chars) + 1

        def get_output_length(self):
            return self.max_word_length + 1

        def encode(self, word):
            return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)

        def decode(self, ix):
            return "".join(self.itos[i] for i in ix)

        def __getitem__(self, idx):
            ix = self.encode(self.words[idx])
            x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
            y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
            x[1 : 1 + len(ix)] = ix
            y[: len(ix)] = ix
            y[len(ix) + 1 :] = -1
            return x, y

    return WordDataset


def create_datasets(torch, Dataset, words):
    chars = sorted(set("".join(words)))
    max_word_length = max(len(w) for w in words)
    test_set_size = max(1, int(len(words) * 0.1))
    rp = torch.randperm(len(words)).tolist()
    WordDataset = make_dataset_class(torch, Dataset)
    train = WordDataset([words[i] for i in rp[:-test_set_size]], chars, max_word_length)
    test = WordDataset([words[i] for i in rp[-test_set_size:]], chars, max_word_length)
    return train, test


class InfiniteDataLoader:
    """Draws batches forever: a sampler with replacement over an enormous num_samples."""

    def __init__(self, torch, DataLoader, dataset, **kwargs):
        sampler = torch.utils.data.RandomSampler(dataset, replacement=True, num_samples=int(1e10))
        self.train_loader = DataLoader(dataset, sampler=sampler, **kwargs)
        self.data_iter = iter(self.train_loader)

    def next(self):
        try:
            batch = next(self.data_iter)
        except StopIteration:
            self.data_iter = iter(self.train_loader)
            batch = next(self.data_iter)
        return batch


def generate(torch, model, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
    F = torch.nn.functional
    with torch.no_grad():
        block_size = model.get_block_size()
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
            logits, _ = model(idx_cond)
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


def sample_words(torch, model, dataset, num, top_k=None, do_sample=True):
    X_init = torch.zeros(num, 1, dtype=torch.long).to("cpu")
    steps = dataset.get_output_length() - 1
    X_samp = generate(torch, model, X_init, steps, top_k=top_k, do_sample=do_sample).to("cpu")
    words = []
    for i in range(X_samp.size(0)):
        row = X_samp[i, 1:].tolist()
        crop_index = row.index(0) if 0 in row else len(row)
        words.append(dataset.decode(row[:crop_index]))
    return words


def evaluate(torch, DataLoader, model, dataset, batch_size=4, max_batches=None):
    @torch.inference_mode()
    def run():
        model.eval()
        loader = DataLoader(dataset, shuffle=True, batch_size=batch_size, num_workers=0)
        losses = []
        for i, batch in enumerate(loader):
            batch = [t.to("cpu") for t in batch]
            X, Y = batch
            logits, loss = model(X, Y)
            losses.append(loss.item())
            if max_batches is not None and i >= max_batches:
                break
        mean_loss = torch.tensor(losses).mean().item()
        model.train()
        return mean_loss

    return run()


def train(torch, model, batches, learning_rate=5e-3, weight_decay=0.01):
    """The main loop: AdamW, zero_grad(set_to_none), backward, step; the loss per step."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=learning_rate, weight_decay=weight_decay, betas=(0.9, 0.99), eps=1e-8
    )
    losses = []
    for X, Y in batches:
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
