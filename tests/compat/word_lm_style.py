"""A word-level language model program written the way the classic word_language_model example
scripts write one: an RNNModel that picks nn.LSTM/GRU/RNN by name with getattr(nn, rnn_type), a
TransformerModel that subclasses nn.Transformer (replacing its decoder with a Linear, masking with
log(tril(ones))), a corpus turned into one int64 tensor, batchify with narrow/view/t/contiguous,
get_batch, repackage_hidden, a training loop of clip_grad_norm_ and a hand-written SGD step
`p.data.add_(p.grad, alpha=-lr)`, and an evaluation weighting each chunk's loss by its length.

Every function takes the library as `torch`, so the same code runs on PyTorch and, with only the
import changed, on tinytensor (tests/compat/test_word_lm_style.py compares the two). Written for
these tests, not copied from any project.
"""

import math

TEXT = """the cat sat on the mat
the dog sat on the log
a cat and a dog met on the mat
the log and the mat sat still
"""


def corpus_ids(torch, text=TEXT):
    """Every word (lines end in <eos>) as an index, concatenated into one int64 tensor."""
    word2idx, idx2word, idss = {}, [], []
    for line in text.splitlines():
        words = line.split() + ["<eos>"]
        ids = []
        for word in words:
            if word not in word2idx:
                idx2word.append(word)
                word2idx[word] = len(idx2word) - 1
            ids.append(word2idx[word])
        idss.append(torch.tensor(ids).type(torch.int64))
    return torch.cat(idss), idx2word


def build(torch, model_type, ntoken, ninp=8, nhid=12, nlayers=2, nhead=2, dropout=0.0):
    nn = torch.nn
    F = torch.nn.functional

    class RNNModel(nn.Module):
        def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
            super(RNNModel, self).__init__()  # noqa: UP008 - written as such scripts are
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            if rnn_type in ["LSTM", "GRU"]:
                self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
            else:
                nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
                self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            if tie_weights:
                self.decoder.weight = self.encoder.weight
            self.init_weights()
            self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):  # noqa: A002
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            if self.rnn_type == "LSTM":
                return (
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid),
                )
            return weight.new_zeros(self.nlayers, bsz, self.nhid)

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=64):
            super(PositionalEncoding, self).__init__()  # noqa: UP008
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(
                torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model)
            )
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[: x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super(TransformerModel, self).__init__(  # noqa: UP008
                d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers,
                num_decoder_layers=1, dropout=dropout,
            )  # fmt: skip
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return torch.log(torch.tril(torch.ones(sz, sz)))

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                device = src.device
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src)).to(device)
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    if model_type == "Transformer":
        return TransformerModel(ntoken, ninp, nhead, nhid, nlayers, dropout)
    return RNNModel(model_type, ntoken, ninp, nhid, nlayers, dropout)


def batchify(data, bsz, device="cpu"):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(torch, h):
    """Cuts the graph between chunks: detached copies of the hidden state(s)."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(torch, v) for v in h)


def train_epoch(torch, model, train_data, ntokens, bptt=5, lr=1.0, clip=0.25, batch_size=3):
    """One epoch of truncated BPTT with a hand-written SGD step; the loss of each chunk."""
    criterion = torch.nn.NLLLoss()
    model.train()
    is_transformer = getattr(model, "model_type", None) == "Transformer"
    if not is_transformer:
        hidden = model.init_hidden(batch_size)
    losses = []
    for i in range(0, train_data.size(0) - 1, bptt):
        data, targets = get_batch(train_data, i, bptt)
        model.zero_grad()
        if is_transformer:
            output = model(data)
            output = output.view(-1, ntokens)
        else:
            hidden = repackage_hidden(torch, hidden)
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
    return losses


def evaluate(torch, model, data_source, ntokens, bptt=5, eval_batch_size=2):
    criterion = torch.nn.NLLLoss()
    model.eval()
    total_loss = 0.0
    is_transformer = getattr(model, "model_type", None) == "Transformer"
    if not is_transformer:
        hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            if is_transformer:
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(torch, hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)
