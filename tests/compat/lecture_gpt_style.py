"""A GPT written the way "build a GPT from scratch" lecture scripts write one: a character-level
text tensor, batches sliced out of it at tensor-valued offsets, Head modules with a registered
`tril` buffer, heads concatenated from a ModuleList, nn.Sequential feed-forward and block stack,
an estimate_loss that fills torch.zeros(eval_iters) item by item, and generation by multinomial.

Every function takes the library as `torch`, so the same code runs on PyTorch and, with only the
import changed, on tinytensor (tests/compat/test_lecture_gpt_style.py compares the two). Written
for these tests, not copied from any project.
"""

from types import SimpleNamespace

TEXT = (
    "to be, or not to be, that is the question: whether 'tis nobler in the mind to suffer "
    "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles. "
)


def tokenizer(text=TEXT):
    chars = sorted(list(set(text)))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}

    def encode(s):
        return [stoi[c] for c in s]

    def decode(ids):
        return "".join([itos[i] for i in ids])

    return len(chars), encode, decode


def hyperparameters(**overrides):
    hp = SimpleNamespace(
        batch_size=4, block_size=8, eval_iters=3, n_embd=16, n_head=2, n_layer=2, dropout=0.0,
        learning_rate=3e-3,
    )  # fmt: skip
    vars(hp).update(overrides)
    return hp


def splits(torch, text=TEXT):
    _, encode, _ = tokenizer(text)
    data = torch.tensor(encode(text), dtype=torch.long)
    n = int(0.9 * len(data))
    return {"train": data[:n], "val": data[n:]}


def get_batch(torch, data, hp, device="cpu"):
    ix = torch.randint(len(data) - hp.block_size, (hp.batch_size,))
    return batch_at(torch, data, ix, hp, device)


def batch_at(torch, data, ix, hp, device="cpu"):
    """Slices data at the (tensor-valued) offsets in ix: x and the next characters y."""
    x = torch.stack([data[i : i + hp.block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + hp.block_size + 1] for i in ix])
    x, y = x.to(device), y.to(device)
    return x, y


def build(torch, vocab_size, hp):
    nn = torch.nn
    F = torch.nn.functional

    class Head(nn.Module):
        def __init__(self, head_size):
            super().__init__()
            self.key = nn.Linear(hp.n_embd, head_size, bias=False)
            self.query = nn.Linear(hp.n_embd, head_size, bias=False)
            self.value = nn.Linear(hp.n_embd, head_size, bias=False)
            self.register_buffer("tril", torch.tril(torch.ones(hp.block_size, hp.block_size)))
            self.dropout = nn.Dropout(hp.dropout)

        def forward(self, x):
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            wei = F.softmax(wei, dim=-1)
            wei = self.dropout(wei)
            return wei @ self.value(x)

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_heads, head_size):
            super().__init__()
            self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
            self.proj = nn.Linear(head_size * num_heads, hp.n_embd)
            self.dropout = nn.Dropout(hp.dropout)

        def forward(self, x):
            out = torch.cat([h(x) for h in self.heads], dim=-1)
            return self.dropout(self.proj(out))

    class FeedForward(nn.Module):
        def __init__(self, n_embd):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(n_embd, 4 * n_embd),
                nn.ReLU(),
                nn.Linear(4 * n_embd, n_embd),
                nn.Dropout(hp.dropout),
            )

        def forward(self, x):
            return self.net(x)

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.sa = MultiHeadAttention(n_head, n_embd // n_head)
            self.ffwd = FeedForward(n_embd)
            self.ln1 = nn.LayerNorm(n_embd)
            self.ln2 = nn.LayerNorm(n_embd)

        def forward(self, x):
            x = x + self.sa(self.ln1(x))
            return x + self.ffwd(self.ln2(x))

    class GPTLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding_table = nn.Embedding(vocab_size, hp.n_embd)
            self.position_embedding_table = nn.Embedding(hp.block_size, hp.n_embd)
            self.blocks = nn.Sequential(*[Block(hp.n_embd, hp.n_head) for _ in range(hp.n_layer)])
            self.ln_f = nn.LayerNorm(hp.n_embd)
            self.lm_head = nn.Linear(hp.n_embd, vocab_size)
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)
            pos_emb = self.position_embedding_table(torch.arange(T, device=idx.device))
            x = self.blocks(tok_emb + pos_emb)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                loss = None
            else:
                B, T, C = logits.shape
                logits = logits.view(B * T, C)
                targets = targets.view(B * T)
                loss = F.cross_entropy(logits, targets)
            return logits, loss

        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -hp.block_size :]
                logits, loss = self(idx_cond)
                logits = logits[:, -1, :]
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.multinomial(probs, num_samples=1)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    return GPTLanguageModel()


def estimate_loss(torch, model, batches_by_split, hp):
    """The mean loss of eval_iters batches per split, in eval mode and without a graph."""

    @torch.no_grad()
    def run():
        out = {}
        model.eval()
        for split, batches in batches_by_split.items():
            losses = torch.zeros(hp.eval_iters)
            for k in range(hp.eval_iters):
                X, Y = batches[k]
                logits, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    return run()


def train(torch, model, batches, hp, eval_batches=None, eval_interval=5):
    """AdamW over the given batches; the loss per step and the lines it prints."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp.learning_rate)
    step_losses, lines = [], []
    for it, (xb, yb) in enumerate(batches):
        if eval_batches is not None and (it % eval_interval == 0 or it == len(batches) - 1):
            losses = estimate_loss(torch, model, eval_batches, hp)
            lines.append(f"step {it}: train loss {losses['train']:.4f}, val {losses['val']:.4f}")
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step_losses.append(loss.item())
    return step_losses, lines


def sample(torch, model, decode, max_new_tokens=20, device="cpu"):
    context = torch.zeros((1, 1), dtype=torch.long, device=device)
    return decode(model.generate(context, max_new_tokens=max_new_tokens)[0].tolist())
