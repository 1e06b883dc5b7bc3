"""T5: the Text-to-Text Transfer Transformer, an encoder-decoder trained on span corruption.

Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer". Pre-norm blocks with RMSNorm (no mean, no bias), no biases in any projection,
attention WITHOUT the 1/√d scaling (the init absorbs it), a bucketed relative position bias
learned by the first layer and shared by all (bidirectional in the encoder, causal in the
decoder; cross-attention has none), a ReLU FFN (T5 v1.1: gated tanh-GELU), and token embeddings
shared by encoder, decoder and (when tied) the LM head, whose input is then scaled by
d_model^-0.5.

    model = T5(T5Config(vocab_size=99, d_model=32, d_kv=8, d_ff=37, n_layer=2, n_head=4))
    out = model(input_ids, attention_mask, labels=labels)       # labels from span_corruption
    ids = model.generate(input_ids, max_new_tokens=10, num_beams=3)
"""

# ruff: noqa: E501 - the HF name table at the bottom reads best as one pair per line

from __future__ import annotations

from dataclasses import dataclass

from tinytensor.nn import functional as F

import tinytensor as tt
from tinytensor import nn

from .encoder_decoder import EncoderDecoderMixin
from .hf import HFCheckpointMixin, activation_from_hf
from .output import ModelOutput

_GATED = {"relu": "reglu", "gelu": "geglu", "gelu_tanh": "geglu_tanh", "silu": "swiglu"}


@dataclass
class T5Config:
    vocab_size: int = 32128  # tokens, the sentinels extra_id_* at the end
    d_model: int = 512  # width
    d_kv: int = 64  # size of each attention head (need not be d_model / n_head)
    d_ff: int = 2048  # FFN hidden size
    n_layer: int = 6  # encoder blocks; HF num_layers
    n_decoder_layer: int | None = None  # decoder blocks (None: n_layer); HF num_decoder_layers
    n_head: int = 8  # attention heads; HF num_heads
    relative_attention_num_buckets: int = 32  # position-bias buckets
    relative_attention_max_distance: int = 128  # distances beyond share the last bucket
    dropout: float = 0.1  # HF dropout_rate
    layer_norm_epsilon: float = 1e-6  # RMSNorm eps
    feed_forward_proj: str = "relu"  # "relu" (T5) or "gated-gelu" (T5 v1.1), as HF
    tie_word_embeddings: bool = True  # LM head = shared embedding (else its own lm_head)
    scale_decoder_outputs: bool | None = None  # d_model^-0.5 before the head (None: if tied)
    pad_token_id: int = 0  # <pad>, also the decoder start token
    eos_token_id: int = 1  # </s>
    decoder_start_token_id: int = 0  # first decoder input
    # HF's split of feed_forward_proj, which a config.json may override (None: derived)
    dense_act_fn: str | None = None  # HF activation name ("gated-gelu" -> "gelu_new")
    is_gated_act: bool | None = None  # gated FFN (wi_0 activated, times wi_1)

    def __post_init__(self):
        gated, _, act = self.feed_forward_proj.rpartition("-")
        if self.dense_act_fn is None:
            # NOTE: HF maps "gated-gelu" to gelu_new (the tanh approximation), as the original
            self.dense_act_fn = "gelu_new" if self.feed_forward_proj == "gated-gelu" else act
        if self.is_gated_act is None:
            self.is_gated_act = gated == "gated"
        if self.n_decoder_layer is None:
            self.n_decoder_layer = self.n_layer
        if self.scale_decoder_outputs is None:
            self.scale_decoder_outputs = self.tie_word_embeddings

    @property
    def activation(self) -> str:
        """nn.FeedForward's name for dense_act_fn + is_gated_act ("gated-gelu": geglu_tanh)."""
        act = activation_from_hf(self.dense_act_fn, "dense_act_fn")
        return _GATED[act] if self.is_gated_act else act

    @classmethod
    def from_hf(cls, c: dict) -> T5Config:
        tied = c.get("tie_word_embeddings", True)
        return cls(
            vocab_size=c["vocab_size"],
            d_model=c["d_model"],
            d_kv=c["d_kv"],
            d_ff=c["d_ff"],
            n_layer=c["num_layers"],
            n_decoder_layer=c.get("num_decoder_layers"),
            n_head=c["num_heads"],
            relative_attention_num_buckets=c.get("relative_attention_num_buckets", 32),
            relative_attention_max_distance=c.get("relative_attention_max_distance", 128),
            dropout=c.get("dropout_rate", 0.1),
            layer_norm_epsilon=c.get("layer_norm_epsilon", 1e-6),
            feed_forward_proj=c.get("feed_forward_proj", "relu"),
            tie_word_embeddings=tied,
            # transformers 5 writes scale_decoder_outputs; older configs say it through tying
            scale_decoder_outputs=c.get("scale_decoder_outputs", tied),
            pad_token_id=c.get("pad_token_id", 0),
            eos_token_id=c.get("eos_token_id", 1),
            decoder_start_token_id=c.get("decoder_start_token_id", c.get("pad_token_id", 0)),
            dense_act_fn=c.get("dense_act_fn"),
            is_gated_act=c.get("is_gated_act"),
        )

    def to_hf(self) -> dict:
        return {
            "model_type": "t5",
            "architectures": ["T5ForConditionalGeneration"],
            "is_encoder_decoder": True,
            "vocab_size": self.vocab_size,
            "d_model": self.d_model,
            "d_kv": self.d_kv,
            "d_ff": self.d_ff,
            "num_layers": self.n_layer,
            "num_decoder_layers": self.n_decoder_layer,
            "num_heads": self.n_head,
            "relative_attention_num_buckets": self.relative_attention_num_buckets,
            "relative_attention_max_distance": self.relative_attention_max_distance,
            "dropout_rate": self.dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "feed_forward_proj": self.feed_forward_proj,
            "tie_word_embeddings": self.tie_word_embeddings,
            "scale_decoder_outputs": self.scale_decoder_outputs,
            "pad_token_id": self.pad_token_id,
            "eos_token_id": self.eos_token_id,
            "decoder_start_token_id": self.decoder_start_token_id,
            "dense_act_fn": self.dense_act_fn,
            "is_gated_act": self.is_gated_act,
        }


def _layer_options(config: T5Config) -> dict:
    """What T5's encoder and decoder blocks share, in nn's Transformer-layer terms."""
    return dict(
        d_model=config.d_model,
        n_heads=config.n_head,
        d_ff=config.d_ff,
        dropout=config.dropout,
        activation=config.activation,
        norm_first=True,  # Pre-norm
        norm="rmsnorm",
        eps=config.layer_norm_epsilon,
        bias=False,
        d_head=config.d_kv,
        scale=1.0,  # NOTE: no 1/√d_kv: T5 folds it into the initialization of q
    )


class T5(EncoderDecoderMixin, HFCheckpointMixin, nn.Module):
    """T5 for conditional generation: shared embedding, encoder and decoder stacks, LM head."""

    config_class = T5Config

    def __init__(self, config: T5Config):
        super().__init__()
        self.config = config
        options = _layer_options(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model)
        buckets = config.relative_attention_num_buckets, config.relative_attention_max_distance
        self.encoder_position_bias = nn.T5RelativePositionBias(
            config.n_head, *buckets, bidirectional=True
        )
        self.encoder_blocks = nn.ModuleList(
            [nn.EncoderBlock(**options) for _ in range(config.n_layer)]
        )
        self.encoder_norm = nn.RMSNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.decoder_position_bias = nn.T5RelativePositionBias(
            config.n_head, *buckets, bidirectional=False
        )
        self.decoder_blocks = nn.ModuleList(
            [nn.DecoderBlock(**options) for _ in range(config.n_decoder_layer)]
        )
        self.decoder_norm = nn.RMSNorm(config.d_model, eps=config.layer_norm_epsilon)
        self.drop = nn.Dropout(config.dropout)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.d_model, config.vocab_size, bias=False)
        )
        self._init_weights()

    def _init_weights(self):
        """T5's init (Mesh TensorFlow): N(0, 1) embeddings; q ~ N(0, (d_model·d_kv)^-1/2),
        k, v, FFN inputs ~ N(0, d_model^-1/2), outputs ~ N(0, fan_in^-1/2); norms at 1."""
        c = self.config
        with tt.no_grad():
            for name, p in self.named_parameters():
                if "norm" in name:
                    p.fill_(1.0)
                elif name.endswith("q_proj.weight"):
                    p.normal_(0.0, (c.d_model * c.d_kv) ** -0.5)
                elif name.endswith(("out_proj.weight", "fc_out.weight")):
                    p.normal_(0.0, p.shape[1] ** -0.5)
                elif name.startswith("shared") or name.startswith("lm_head"):
                    p.normal_(0.0, 1.0)
                elif "position_bias" in name:
                    p.normal_(0.0, c.d_model**-0.5)
                else:
                    p.normal_(0.0, c.d_model**-0.5)

    def encode(self, input_ids, attention_mask=None):
        """The encoder's output (B, S, d_model)."""
        s = input_ids.shape[1]
        x = self.drop(self.shared(input_ids))  # (B, S, D)
        bias = self.encoder_position_bias(s, s)  # (1, H, S, S), shared by every block
        key_mask = None if attention_mask is None else attention_mask.bool()
        for block in self.encoder_blocks:
            x = block(x, key_mask=key_mask, attn_bias=bias)
        return self.drop(self.encoder_norm(x))

    def decode(
        self, decoder_input_ids, encoder_output, attention_mask=None, cache=None,
        decoder_attention_mask=None,
    ) -> ModelOutput:  # fmt: skip
        """Next-token logits (B, T, vocab) for the decoder inputs, attending to the encoder
        output (whose padding `attention_mask` marks). With a `cache`, the decoder inputs
        continue the cached ones."""
        t = decoder_input_ids.shape[1]
        offset = cache.seq_len if cache is not None else 0
        x = self.drop(self.shared(decoder_input_ids))  # (B, T, D)
        bias = self.decoder_position_bias(t, offset + t, offset)  # (1, H, T, offset + T)
        memory_mask = None if attention_mask is None else attention_mask.bool()
        self_mask = None if decoder_attention_mask is None else decoder_attention_mask.bool()
        for block in self.decoder_blocks:
            x = block(
                x,
                encoder_output,
                self_key_mask=self_mask,
                self_attn_bias=bias,
                memory_key_mask=memory_mask,
                cache=cache,
            )
        x = self.drop(self.decoder_norm(x))
        if self.config.scale_decoder_outputs:
            x = x * self.config.d_model**-0.5  # keeps the tied head's logits at unit scale
        head = self.shared.weight if self.lm_head is None else self.lm_head.weight
        return ModelOutput(logits=F.linear(x, head))  # x @ headᵀ: (B, T, vocab)

    # ---- HuggingFace checkpoints (T5ForConditionalGeneration) -----------------------------

    HF_TIED = frozenset(
        {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"}
    )
    HF_TIED_SOURCES = dict.fromkeys(HF_TIED, "shared.weight")
    HF_IGNORED = (r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight",)
    _HF_NAMES = {
        "shared.weight": "shared.weight",
        "lm_head.weight": "lm_head.weight",
        "encoder_position_bias.relative_attention_bias.weight": (
            "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        ),
        "decoder_position_bias.relative_attention_bias.weight": (
            "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
        ),
        "encoder_norm.weight": "encoder.final_layer_norm.weight",
        "decoder_norm.weight": "decoder.final_layer_norm.weight",
        # encoder block: layer.0 = self-attention, layer.1 = FFN
        "encoder_blocks.{}.norm1.weight": "encoder.block.{}.layer.0.layer_norm.weight",
        "encoder_blocks.{}.self_attn.q_proj.weight": "encoder.block.{}.layer.0.SelfAttention.q.weight",
        "encoder_blocks.{}.self_attn.k_proj.weight": "encoder.block.{}.layer.0.SelfAttention.k.weight",
        "encoder_blocks.{}.self_attn.v_proj.weight": "encoder.block.{}.layer.0.SelfAttention.v.weight",
        "encoder_blocks.{}.self_attn.out_proj.weight": "encoder.block.{}.layer.0.SelfAttention.o.weight",
        "encoder_blocks.{}.norm2.weight": "encoder.block.{}.layer.1.layer_norm.weight",
        "encoder_blocks.{}.ffn.fc_in.weight": "encoder.block.{}.layer.1.DenseReluDense.wi.weight",
        "encoder_blocks.{}.ffn.fc_out.weight": "encoder.block.{}.layer.1.DenseReluDense.wo.weight",
        # decoder block: layer.0 = self-attention, layer.1 = cross-attention, layer.2 = FFN
        "decoder_blocks.{}.norm1.weight": "decoder.block.{}.layer.0.layer_norm.weight",
        "decoder_blocks.{}.self_attn.q_proj.weight": "decoder.block.{}.layer.0.SelfAttention.q.weight",
        "decoder_blocks.{}.self_attn.k_proj.weight": "decoder.block.{}.layer.0.SelfAttention.k.weight",
        "decoder_blocks.{}.self_attn.v_proj.weight": "decoder.block.{}.layer.0.SelfAttention.v.weight",
        "decoder_blocks.{}.self_attn.out_proj.weight": "decoder.block.{}.layer.0.SelfAttention.o.weight",
        "decoder_blocks.{}.norm2.weight": "decoder.block.{}.layer.1.layer_norm.weight",
        "decoder_blocks.{}.cross_attn.q_proj.weight": "decoder.block.{}.layer.1.EncDecAttention.q.weight",
        "decoder_blocks.{}.cross_attn.k_proj.weight": "decoder.block.{}.layer.1.EncDecAttention.k.weight",
        "decoder_blocks.{}.cross_attn.v_proj.weight": "decoder.block.{}.layer.1.EncDecAttention.v.weight",
        "decoder_blocks.{}.cross_attn.out_proj.weight": "decoder.block.{}.layer.1.EncDecAttention.o.weight",
        "decoder_blocks.{}.norm3.weight": "decoder.block.{}.layer.2.layer_norm.weight",
        "decoder_blocks.{}.ffn.fc_in.weight": "decoder.block.{}.layer.2.DenseReluDense.wi.weight",
        "decoder_blocks.{}.ffn.fc_out.weight": "decoder.block.{}.layer.2.DenseReluDense.wo.weight",
        # the gated FFN (T5 v1.1) only: its activated branch
        "encoder_blocks.{}.ffn.fc_gate.weight": "encoder.block.{}.layer.1.DenseReluDense.wi_0.weight",
        "decoder_blocks.{}.ffn.fc_gate.weight": "decoder.block.{}.layer.2.DenseReluDense.wi_0.weight",
    }

    @property
    def HF_NAMES(self) -> dict:  # noqa: N802 - the attribute every model defines
        """The gated FFN (T5 v1.1) names its linear branch wi_1 (wi_0 is the activated one)."""
        if self.ffn_is_gated:
            return {k: v.replace(".wi.", ".wi_1.") for k, v in self._HF_NAMES.items()}
        return self._HF_NAMES

    @property
    def ffn_is_gated(self) -> bool:
        return self.config.activation in _GATED.values()
