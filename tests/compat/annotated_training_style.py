"""The training side of an encoder-decoder written the way the Annotated-Transformer-style
notebooks write it: label smoothing through KLDivLoss(reduction='sum') on a target distribution
built in place (fill_, scatter_, index_fill_ over nonzero() of the padding), the Noam rate under
LambdaLR, copy-task batches (randint, requires_grad_(False).clone().detach()), a Batch of masks
(subsequent_mask through .type(torch.uint8), type_as, .data.sum()), a loss compute that returns
`sloss.data * norm, sloss`, run_epoch with %-formatted progress lines, do-nothing optimizer and
scheduler classes for evaluation, and greedy decoding. The model is a deliberately small
encoder-decoder of single attention layers with the same encode/decode/generator interface (the
full stacked model is tested in tests/nn/test_annotated_style_program.py).

Every function takes the library as `torch`, so the same code runs on PyTorch and, with only the
import changed, on tinytensor (tests/compat/test_annotated_training_style.py compares the two).
Written for these tests, not copied from any project.
"""

import math
import time


def subsequent_mask(torch, size):
    """(1, size, size), True where position j may be seen from position i (j <= i)."""
    attn_shape = (1, size, size)
    mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
    return mask == 0


def build(torch, vocab, d_model=16, max_len=32):
    nn = torch.nn
    F = torch.nn.functional

    def attention(query, key, value, mask=None):
        d_k = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = scores.softmax(dim=-1)
        return torch.matmul(p_attn, value), p_attn

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len):
            super().__init__()
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0))

        def forward(self, x):
            return x + self.pe[:, : x.size(1)].requires_grad_(False)

    class Generator(nn.Module):
        def __init__(self, d_model, vocab):
            super().__init__()
            self.proj = nn.Linear(d_model, vocab)

        def forward(self, x):
            return F.log_softmax(self.proj(x), dim=-1)

    class SmallEncoderDecoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.d_model = d_model
            self.src_embed = nn.Embedding(vocab, d_model)
            self.tgt_embed = nn.Embedding(vocab, d_model)
            self.position = PositionalEncoding(d_model, max_len)
            self.encoder = nn.Linear(d_model, d_model)
            self.self_attn = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(3)])
            self.src_attn = nn.Linear(d_model, d_model)
            self.feed_forward = nn.Sequential(
                nn.Linear(d_model, 2 * d_model), nn.ReLU(), nn.Linear(2 * d_model, d_model)
            )
            self.generator = Generator(d_model, vocab)

        def encode(self, src, src_mask):
            x = self.position(self.src_embed(src) * math.sqrt(self.d_model))
            return x + self.encoder(x).relu()

        def decode(self, memory, src_mask, tgt, tgt_mask):
            y = self.position(self.tgt_embed(tgt) * math.sqrt(self.d_model))
            q, k, v = [lin(y) for lin in self.self_attn]
            y = y + attention(q, k, v, tgt_mask)[0]
            y = y + attention(self.src_attn(y), memory, memory, src_mask)[0]
            return y + self.feed_forward(y)

        def forward(self, src, tgt, src_mask, tgt_mask):
            return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)

    model = SmallEncoderDecoder()
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def make_label_smoothing(torch):
    nn = torch.nn

    class LabelSmoothing(nn.Module):
        """KL divergence to a smoothed one-hot target: confidence on the label, the rest spread
        over the other non-padding classes, rows of padding targets zero."""

        def __init__(self, size, padding_idx, smoothing=0.0):
            super().__init__()
            self.criterion = nn.KLDivLoss(reduction="sum")
            self.padding_idx = padding_idx
            self.confidence = 1.0 - smoothing
            self.smoothing = smoothing
            self.size = size
            self.true_dist = None

        def forward(self, x, target):
            assert x.size(1) == self.size
            true_dist = x.data.clone()
            true_dist.fill_(self.smoothing / (self.size - 2))
            true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
            true_dist[:, self.padding_idx] = 0
            mask = torch.nonzero(target.data == self.padding_idx)
            if mask.dim() > 0:
                true_dist.index_fill_(0, mask.squeeze(), 0.0)
            self.true_dist = true_dist
            return self.criterion(x, true_dist.clone().detach())

    return LabelSmoothing


def rate(step, model_size, factor, warmup):
    """The Noam schedule: linear warmup, then decay with the inverse square root of the step."""
    if step == 0:
        step = 1
    return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))


def make_batch_class(torch):
    class Batch:
        """Source and shifted target with their masks; ntokens counts non-padding targets."""

        def __init__(self, src, tgt=None, pad=2):
            self.src = src
            self.src_mask = (src != pad).unsqueeze(-2)
            if tgt is not None:
                self.tgt = tgt[:, :-1]
                self.tgt_y = tgt[:, 1:]
                self.tgt_mask = self.make_std_mask(self.tgt, pad)
                self.ntokens = (self.tgt_y != pad).data.sum()

        @staticmethod
        def make_std_mask(tgt, pad):
            tgt_mask = (tgt != pad).unsqueeze(-2)
            return tgt_mask & subsequent_mask(torch, tgt.size(-1)).type_as(tgt_mask.data)

    return Batch


def data_gen(torch, V, batch_size, nbatches, draw=None):
    """Copy-task batches: random symbols, the first one 1. `draw` replaces torch.randint (tests
    feed both libraries the same integers)."""
    Batch = make_batch_class(torch)
    for i in range(nbatches):
        if draw is None:
            data = torch.randint(1, V, size=(batch_size, 10))
        else:
            data = draw(i)
        data[:, 0] = 1
        src = data.requires_grad_(False).clone().detach()
        tgt = data.requires_grad_(False).clone().detach()
        yield Batch(src, tgt, 0)


class SimpleLossCompute:
    def __init__(self, generator, criterion):
        self.generator = generator
        self.criterion = criterion

    def __call__(self, x, y, norm):
        x = self.generator(x)
        sloss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        return sloss.data * norm, sloss


class TrainState:
    def __init__(self):
        self.step = 0
        self.accum_step = 0
        self.samples = 0
        self.tokens = 0


def make_dummies(torch):
    class DummyOptimizer(torch.optim.Optimizer):
        def __init__(self):
            self.param_groups = [{"lr": 0}]

        def step(self):
            pass

        def zero_grad(self, set_to_none=False):
            pass

    class DummyScheduler:
        def step(self):
            pass

    return DummyOptimizer, DummyScheduler


def run_epoch(data_iter, model, loss_compute, optimizer, scheduler, mode="train", accum_iter=1,
              train_state=None, log_every=5):  # fmt: skip
    """One pass over data_iter; returns the loss per token, the state, the per-batch losses
    (per token) and the progress lines."""
    train_state = train_state if train_state is not None else TrainState()
    start = time.time()
    total_tokens = 0
    total_loss = 0
    tokens = 0
    n_accum = 0
    losses, lines = [], []
    for i, batch in enumerate(data_iter):
        out = model.forward(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
        loss, loss_node = loss_compute(out, batch.tgt_y, batch.ntokens)
        if mode == "train" or mode == "train+log":
            loss_node.backward()
            train_state.step += 1
            train_state.samples += batch.src.shape[0]
            train_state.tokens += batch.ntokens
            if i % accum_iter == 0:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                n_accum += 1
                train_state.accum_step += 1
            scheduler.step()
        total_loss += loss
        total_tokens += batch.ntokens
        tokens += batch.ntokens
        losses.append(float(loss / batch.ntokens))
        if i % log_every == 1 and (mode == "train" or mode == "train+log"):
            lr = optimizer.param_groups[0]["lr"]
            elapsed = max(time.time() - start, 1e-6)
            lines.append(
                (
                    "Epoch Step: %6d | Accumulation Step: %3d | Loss: %6.2f "
                    + "| Tokens / Sec: %7.1f | Learning Rate: %6.1e"
                )
                % (i, n_accum, loss / batch.ntokens, tokens / elapsed, lr)
            )
            start = time.time()
            tokens = 0
        del loss
        del loss_node
    return total_loss / total_tokens, train_state, losses, lines


def greedy_decode(torch, model, src, src_mask, max_len, start_symbol):
    memory = model.encode(src, src_mask)
    ys = torch.zeros(1, 1).fill_(start_symbol).type_as(src.data)
    for _ in range(max_len - 1):
        out = model.decode(
            memory, src_mask, ys, subsequent_mask(torch, ys.size(1)).type_as(src.data)
        )
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.data[0]
        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)
    return ys


def make_optimizer_and_schedule(torch, model, d_model, warmup=400, factor=1.0):
    from_lr_scheduler = torch.optim.lr_scheduler.LambdaLR
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    lr_scheduler = from_lr_scheduler(
        optimizer=optimizer, lr_lambda=lambda step: rate(step, d_model, factor, warmup)
    )
    return optimizer, lr_scheduler
