"""Small graphs the explorer tests share: a tiny GPT (built twice from one seed, so that one copy
is explored and the other is the independent reference) and hand-made graphs."""

from tinytensor.models import GPT, GPTConfig

import tinytensor as tt


def tiny_gpt(n_layer=2, seed=0):
    """(model, idx, targets, loss) for a small GPT; the same seed gives the same numbers."""
    tt.manual_seed(seed)
    config = GPTConfig(vocab_size=50, block_size=16, n_layer=n_layer, n_head=2, n_embd=16)
    config.dropout = 0.0
    model = GPT(config)
    idx = tt.randint(0, 50, (2, 8))
    targets = tt.randint(0, 50, (2, 8))
    loss = model(idx, targets).loss
    return model, idx, targets, loss


def module_names(model):
    return {id(m): name for name, m in model.named_modules()}
