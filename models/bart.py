"""BART: a denoising sequence-to-sequence Transformer (BERT-like encoder, GPT-like decoder).

Lewis et al. 2020, "BART: Denoising Sequence-to-Sequence Pre-training for Natural Language
Generation, Translation, and Comprehension". Post-LN encoder and decoder blocks, learned
positions stored with HF's offset of 2 (rows 0 and 1 are never used), a LayerNorm on the
embeddings (layernorm_embedding), optional √d_model embedding scaling (scale_embedding), and an
LM head tied to the shared embedding plus final_logits_bias. Pretrained on text infilling and
sentence permutation (collators.bart_denoising_batch).

    model = BART(BARTConfig(vocab_size=99, d_model=32, n_layer=2, n_head=4, d_ff=37))
    out = model(input_ids, attention_mask, labels=labels)
    ids = model.generate(input_ids, max_new_tokens=10, num_beams=3)
"""

from __future__ import annotations

from dataclasses import dataclass

from tinytensor.nn import functional as F

import tinytensor as tt
from tinytensor import nn

from .encoder_decoder import EncoderDecoderMixin
from .hf import HFCheckpointMixin, activation_from_hf, activation_to_hf
from .output import ModelOutput
from .weight_init import normal_init_

POSITION_OFFSET = 2  # NOTE: HF's BartLearnedPositionalEmbedding looks up position + 2


@dataclass
class BARTConfig:
    vocab_size: int = 50265  # tokens
    max_position_embeddings: int = 1024  # longest sequence (the table has 2 more rows)
    d_model: int = 768  # width
    n_layer: int = 6  # encoder blocks; HF encoder_layers
    n_decoder_layer: int | None = None  # decoder blocks (None: n_layer); HF decoder_layers
    n_head: int = 12  # attention heads (HF encoder/decoder_attention_heads)
    d_ff: int = 3072  # FFN hidden size; HF encoder/decoder_ffn_dim
    activation: str = "gelu"  # HF activation_function (exact GELU)
    dropout: float = 0.1  # residual branches, FFN and attention probabilities
    scale_embedding: bool = False  # multiply token embeddings by √d_model
    layer_norm_eps: float = 1e-5  # LayerNorm eps
    pad_token_id: int = 1  # <pad>
    bos_token_id: int = 0  # <s>
    eos_token_id: int = 2  # </s>
    decoder_start_token_id: int = 2  # first decoder input (</s>, as BART)
    n_decoder_head: int | None = None  # decoder heads (None: n_head); HF decoder_attention_heads
    d_decoder_ff: int | None = None  # decoder FFN size (None: d_ff); HF decoder_ffn_dim
    tie_word_embeddings: bool = True  # LM head = shared embedding (else its own lm_head)

    def __post_init__(self):
        if self.n_decoder_layer is None:
            self.n_decoder_layer = self.n_layer
        if self.n_decoder_head is None:
            self.n_decoder_head = self.n_head
        if self.d_decoder_ff is None:
            self.d_decoder_ff = self.d_ff

    @classmethod
    def from_hf(cls, c: dict) -> BARTConfig:
        return cls(
            vocab_size=c["vocab_size"],
            max_position_embeddings=c.get("max_position_embeddings", 1024),
            d_model=c["d_model"],
            n_layer=c["encoder_layers"],
            n_decoder_layer=c.get("decoder_layers"),
            n_head=c["encoder_attention_heads"],
            d_ff=c["encoder_ffn_dim"],
            activation=activation_from_hf(c.get("activation_function", "gelu")),
            dropout=c.get("dropout", 0.1),
            scale_embedding=c.get("scale_embedding", False),
            pad_token_id=c.get("pad_token_id", 1),
            bos_token_id=c.get("bos_token_id", 0),
            eos_token_id=c.get("eos_token_id", 2),
            decoder_start_token_id=c.get("decoder_start_token_id", 2),
            n_decoder_head=c.get("decoder_attention_heads"),
            d_decoder_ff=c.get("decoder_ffn_dim"),
            tie_word_embeddings=c.get("tie_word_embeddings", True),
        )

    def to_hf(self) -> dict:
        return {
            "model_type": "bart",
            "architectures": ["BartForConditionalGeneration"],
            "is_encoder_decoder": True,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "d_model": self.d_model,
            "encoder_layers": self.n_layer,
            "decoder_layers": self.n_decoder_layer,
            "encoder_attention_heads": self.n_head,
            "decoder_attention_heads": self.n_decoder_head,
            "encoder_ffn_dim": self.d_ff,
            "decoder_ffn_dim": self.d_decoder_ff,
            "activation_function": activation_to_hf(self.activation),
            "dropout": self.dropout,
            "attention_dropout": self.dropout,
            "activation_dropout": self.dropout,
            "scale_embedding": self.scale_embedding,
            "pad_token_id": self.pad_token_id,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "decoder_start_token_id": self.decoder_start_token_id,
            "forced_eos_token_id": self.eos_token_id,
            "tie_word_embeddings": self.tie_word_embeddings,
        }


def _block_names(ours: str, theirs: str, layer: dict) -> dict:
    """HF_NAMES entries of one stack: "{ours}.{}.{name}.weight" -> "{theirs}.{}.{hf}.weight",
    and the same for the bias, for each (name, hf) in `layer`."""
    return {
        f"{ours}.{{}}.{name}.{p}": f"{theirs}.{{}}.{hf}.{p}"
        for name, hf in layer.items()
        for p in ("weight", "bias")
    }


class BARTEmbeddings(nn.Module):
    """scale · token embedding (shared) + learned position (offset 2), then layernorm_embedding
    and dropout. The encoder and the decoder each have one, with their own positions."""

    def __init__(self, config: BARTConfig, shared: nn.Embedding):
        super().__init__()
        self.tokens = shared  # the shared table, not a copy
        self.positions = nn.LearnedPositionalEmbedding(
            config.max_position_embeddings + POSITION_OFFSET, config.d_model
        )
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)
        self.scale = config.d_model**0.5 if config.scale_embedding else 1.0

    def forward(self, ids, offset=0):
        x = self.tokens(ids) * self.scale + self.positions(ids.shape[1], offset + POSITION_OFFSET)
        return self.drop(self.norm(x))  # (B, T, D)


class BART(EncoderDecoderMixin, HFCheckpointMixin, nn.Module):
    """BART for conditional generation (HF's BartForConditionalGeneration)."""

    config_class = BARTConfig

    def __init__(self, config: BARTConfig):
        super().__init__()
        self.config = config
        options = dict(
            d_model=config.d_model,
            n_heads=config.n_head,
            d_ff=config.d_ff,
            dropout=config.dropout,
            activation=config.activation,
            norm_first=False,  # Post-LN
            eps=config.layer_norm_eps,
        )
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        # NOTE: transformers 5 unties all three token tables when tie_word_embeddings=False
        untied = not config.tie_word_embeddings
        self.encoder_embeddings = BARTEmbeddings(
            config, nn.Embedding(config.vocab_size, config.d_model) if untied else self.shared
        )
        self.encoder_blocks = nn.ModuleList(
            [nn.EncoderBlock(**options) for _ in range(config.n_layer)]
        )
        self.decoder_embeddings = BARTEmbeddings(
            config, nn.Embedding(config.vocab_size, config.d_model) if untied else self.shared
        )
        options.update(n_heads=config.n_decoder_head, d_ff=config.d_decoder_ff)
        self.decoder_blocks = nn.ModuleList(
            [nn.DecoderBlock(**options) for _ in range(config.n_decoder_layer)]
        )
        self.lm_head = None
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # HF keeps it as a buffer (not trained, zeros unless a checkpoint set it)
        self.register_buffer("final_logits_bias", tt.zeros(1, config.vocab_size))
        self._init_weights()

    def _init_weights(self):
        """BART's init: N(0, 0.02) weights, zero biases, LayerNorms at identity, and a zero
        embedding row for <pad>."""
        normal_init_(self, std=0.02)
        with tt.no_grad():
            self.shared.weight._array[self.config.pad_token_id] = 0

    def encode(self, input_ids, attention_mask=None):
        """The encoder's output (B, S, d_model)."""
        x = self.encoder_embeddings(input_ids)
        key_mask = None if attention_mask is None else attention_mask.bool()
        for block in self.encoder_blocks:
            x = block(x, key_mask=key_mask)
        return x

    def decode(
        self, decoder_input_ids, encoder_output, attention_mask=None, cache=None,
        decoder_attention_mask=None,
    ) -> ModelOutput:  # fmt: skip
        """Next-token logits (B, T, vocab); with a `cache` the inputs continue the cached ones."""
        offset = cache.seq_len if cache is not None else 0
        x = self.decoder_embeddings(decoder_input_ids, offset)
        memory_mask = None if attention_mask is None else attention_mask.bool()
        self_mask = None if decoder_attention_mask is None else decoder_attention_mask.bool()
        for block in self.decoder_blocks:
            x = block(
                x, encoder_output, self_key_mask=self_mask, memory_key_mask=memory_mask,
                cache=cache,
            )  # fmt: skip
        head = self.shared.weight if self.lm_head is None else self.lm_head.weight
        # x @ headᵀ, plus HF's (1, vocab) bias buffer: (B, T, vocab)
        logits = F.linear(x, head) + self.final_logits_bias
        return ModelOutput(logits=logits)

    # ---- HuggingFace checkpoints (BartForConditionalGeneration) ---------------------------

    HF_PREFIX = "model."
    HF_UNPREFIXED = ("final_logits_bias", "lm_head.")
    HF_TIED = frozenset(
        {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"}
    )
    HF_TIED_SOURCES = dict.fromkeys(HF_TIED, "shared.weight")
    # Per block: our submodule -> HF's; every entry has a weight and a bias.
    _HF_ENCODER_LAYER = {
        "self_attn.q_proj": "self_attn.q_proj",
        "self_attn.k_proj": "self_attn.k_proj",
        "self_attn.v_proj": "self_attn.v_proj",
        "self_attn.out_proj": "self_attn.out_proj",
        "norm1": "self_attn_layer_norm",
        "ffn.fc_in": "fc1",
        "ffn.fc_out": "fc2",
        "norm2": "final_layer_norm",
    }
    _HF_DECODER_LAYER = {
        "self_attn.q_proj": "self_attn.q_proj",
        "self_attn.k_proj": "self_attn.k_proj",
        "self_attn.v_proj": "self_attn.v_proj",
        "self_attn.out_proj": "self_attn.out_proj",
        "norm1": "self_attn_layer_norm",
        "cross_attn.q_proj": "encoder_attn.q_proj",
        "cross_attn.k_proj": "encoder_attn.k_proj",
        "cross_attn.v_proj": "encoder_attn.v_proj",
        "cross_attn.out_proj": "encoder_attn.out_proj",
        "norm2": "encoder_attn_layer_norm",
        "ffn.fc_in": "fc1",
        "ffn.fc_out": "fc2",
        "norm3": "final_layer_norm",
    }
    HF_NAMES = {
        "shared.weight": "shared.weight",
        "final_logits_bias": "final_logits_bias",
        "lm_head.weight": "lm_head.weight",  # untied only, as the next two
        "encoder_embeddings.tokens.weight": "encoder.embed_tokens.weight",
        "decoder_embeddings.tokens.weight": "decoder.embed_tokens.weight",
        "encoder_embeddings.positions.weight": "encoder.embed_positions.weight",
        "encoder_embeddings.norm.weight": "encoder.layernorm_embedding.weight",
        "encoder_embeddings.norm.bias": "encoder.layernorm_embedding.bias",
        "decoder_embeddings.positions.weight": "decoder.embed_positions.weight",
        "decoder_embeddings.norm.weight": "decoder.layernorm_embedding.weight",
        "decoder_embeddings.norm.bias": "decoder.layernorm_embedding.bias",
        **_block_names("encoder_blocks", "encoder.layers", _HF_ENCODER_LAYER),
        **_block_names("decoder_blocks", "decoder.layers", _HF_DECODER_LAYER),
    }
