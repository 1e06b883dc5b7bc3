"""`ModelOutput`: what a model's forward returns: logits, the loss when labels are given, extras."""

from __future__ import annotations

from dataclasses import dataclass

from tinytensor.tensor import Tensor


@dataclass
class ModelOutput:
    """The result of a forward pass. Unpacks as `logits, loss = model(x, targets)` (nanoGPT).

    Attributes:
        logits: (B, T, V) scores of the next/masked/target token.
        loss: mean cross-entropy over the labelled positions (None without labels). BERT adds
            the next-sentence loss when `next_sentence_label` is given.
        past_key_values: the KV cache to pass back when decoding token by token (use_cache).
        nsp_logits: BERT's next-sentence scores (B, 2); pooled: its tanh pooler output (B, D).
        encoder_output: T5/BART's encoder hidden states (B, S, D), reusable across decoding.
        hidden_states: BERT's last encoder hidden states (B, T, D).
    """

    logits: Tensor
    loss: Tensor | None = None
    past_key_values: object = None
    nsp_logits: Tensor | None = None
    pooled: Tensor | None = None
    encoder_output: Tensor | None = None
    hidden_states: Tensor | None = None

    def __iter__(self):
        yield self.logits
        yield self.loss
