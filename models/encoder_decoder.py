"""`EncoderDecoderMixin`: the teacher-forced forward and generate that T5 and BART share.

A model that mixes it in defines
    encode(input_ids, attention_mask=None) -> (B, S, d_model)
    decode(decoder_input_ids, encoder_output, attention_mask=None, cache=None,
           decoder_attention_mask=None) -> ModelOutput(logits (B, T, vocab))
and a config with pad_token_id and decoder_start_token_id.
"""

from __future__ import annotations

from tinytensor.nn import functional as F

import tinytensor as tt

from .collators import shift_tokens_right
from .generation import generate_encoder_decoder
from .output import ModelOutput


class EncoderDecoderMixin:
    """forward (teacher forcing, loss over `labels`) and generate, on top of encode/decode."""

    def forward(
        self,
        input_ids,
        attention_mask=None,
        decoder_input_ids=None,
        labels=None,
        decoder_attention_mask=None,
    ) -> ModelOutput:
        """Teacher-forced logits (B, T, vocab); with `labels` (B, T; -100 = ignore) the decoder
        inputs default to shift_tokens_right(labels) and the loss is their cross-entropy."""
        if decoder_input_ids is None:
            if labels is None:
                raise ValueError(f"{type(self).__name__}: pass decoder_input_ids or labels")
            decoder_input_ids = tt.tensor(
                shift_tokens_right(
                    labels.numpy(), self.config.pad_token_id, self.config.decoder_start_token_id
                ),
                device=labels.device,
            )
        encoder_output = self.encode(input_ids, attention_mask)
        out = self.decode(
            decoder_input_ids, encoder_output, attention_mask,
            decoder_attention_mask=decoder_attention_mask,
        )  # fmt: skip
        out.encoder_output = encoder_output
        if labels is not None:
            b, t = labels.shape
            # (B·T, vocab) scores against (B·T,) labels
            out.loss = F.cross_entropy(out.logits.reshape(b * t, -1), labels.reshape(b * t))
        return out

    def generate(self, input_ids, max_new_tokens, attention_mask=None, **kwargs):
        """Encodes once and decodes with a KV cache; kwargs as
        `generation.generate_encoder_decoder` (num_beams, do_sample, top_k, top_p, ...)."""
        return generate_encoder_decoder(self, input_ids, max_new_tokens, attention_mask, **kwargs)
