"""A tiny character language model built from engine ops, standing in for GPT in the tests of
the training infrastructure: embeddings -> dropout -> linear, trained on next-character loss.
Its dropout draws from tinytensor's global generator, so resume tests also check that state."""

import tinytensor as tt
from tinytensor import nn


class TinyCharLM(nn.Module):
    def __init__(self, vocab_size: int, dim: int = 16, p_drop: float = 0.1):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.drop = nn.Dropout(p_drop)
        self.head = nn.Linear(dim, vocab_size)

    def forward(self, ids, targets):
        logits = self.head(self.drop(self.embed(ids)))  # (B, T, V)
        return tt.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def lm_loss(model, batch):
    x, y = batch
    return model(tt.tensor(x), tt.tensor(y))
