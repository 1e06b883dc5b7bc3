"""BERT: a bidirectional Transformer encoder pretrained with masked LM and next-sentence prediction.

Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding". Post-LN blocks (LayerNorm after each residual sum), word + learned position +
token type embeddings with their own LayerNorm, the exact (erf) GELU, LayerNorm eps 1e-12, an MLM
head (dense + GELU + LayerNorm, then the tied word embeddings plus a bias) and an NSP head over a
tanh pooler of the [CLS] state.

    model = BERT(BERTConfig(vocab_size=99, n_layer=2, n_head=4, d_model=32, d_ff=37))
    out = model(input_ids, token_type_ids, attention_mask, labels, next_sentence_label)
    out.logits, out.nsp_logits, out.loss      # labels from collators.mask_tokens
"""

from __future__ import annotations

from dataclasses import dataclass

from tinytensor.nn import functional as F

import tinytensor as tt
from tinytensor import nn

from .hf import (
    CheckpointError,
    HFCheckpointMixin,
    activation_from_hf,
    activation_to_hf,
    unsupported,
)
from .output import ModelOutput
from .weight_init import normal_init_


@dataclass
class BERTConfig:
    vocab_size: int = 30522  # WordPiece tokens
    max_position_embeddings: int = 512  # longest sequence (learned positions)
    type_vocab_size: int = 2  # token types (segment A / B)
    n_layer: int = 12  # encoder blocks; HF num_hidden_layers
    n_head: int = 12  # attention heads; HF num_attention_heads
    d_model: int = 768  # width; HF hidden_size
    d_ff: int = 3072  # FFN hidden size; HF intermediate_size
    activation: str = "gelu"  # HF hidden_act ("gelu" is the exact erf GELU)
    dropout: float = 0.1  # HF hidden_dropout_prob (also used on the attention probabilities)
    layer_norm_eps: float = 1e-12  # LayerNorm eps (BERT's, not PyTorch's 1e-5)
    pad_token_id: int = 0  # [PAD]
    tie_word_embeddings: bool = True  # MLM decoder = word embeddings (else its own matrix)
    architecture: str = "BertForPreTraining"  # which heads exist: a key of HEADS

    @property
    def heads(self) -> tuple:
        """(pooler, MLM head, NSP head): which of them this architecture has."""
        return HEADS[self.architecture]

    @classmethod
    def from_hf(cls, c: dict) -> BERTConfig:
        # NOTE: HF's is_decoder makes the self-attention causal (BertLMHeadModel)
        unsupported(c, "is_decoder", (False,), "BERT")
        unsupported(c, "add_cross_attention", (False,), "BERT")
        architectures = c.get("architectures") or ["BertForPreTraining"]
        if architectures[0] not in HEADS:
            raise CheckpointError(
                f"from_pretrained: BERT config architectures={architectures} is not supported "
                f"(only {sorted(HEADS)}: their heads are what tinytensor's BERT computes)"
            )
        return cls(
            vocab_size=c["vocab_size"],
            max_position_embeddings=c.get("max_position_embeddings", 512),
            type_vocab_size=c.get("type_vocab_size", 2),
            n_layer=c["num_hidden_layers"],
            n_head=c["num_attention_heads"],
            d_model=c["hidden_size"],
            d_ff=c["intermediate_size"],
            activation=activation_from_hf(c.get("hidden_act", "gelu"), "hidden_act"),
            dropout=c.get("hidden_dropout_prob", 0.1),
            layer_norm_eps=c.get("layer_norm_eps", 1e-12),
            pad_token_id=c.get("pad_token_id", 0) or 0,
            tie_word_embeddings=c.get("tie_word_embeddings", True),
            architecture=architectures[0],
        )

    def to_hf(self) -> dict:
        return {
            "model_type": "bert",
            "architectures": [self.architecture],
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "hidden_size": self.d_model,
            "intermediate_size": self.d_ff,
            "hidden_act": activation_to_hf(self.activation),
            "hidden_dropout_prob": self.dropout,
            "attention_probs_dropout_prob": self.dropout,
            "layer_norm_eps": self.layer_norm_eps,
            "pad_token_id": self.pad_token_id,
            "tie_word_embeddings": self.tie_word_embeddings,
        }


# HF architecture -> (pooler, MLM head, NSP head) that its checkpoints hold
HEADS = {
    "BertForPreTraining": (True, True, True),
    "BertForMaskedLM": (False, True, False),
    "BertModel": (True, False, False),
}


class BERTEmbeddings(nn.Module):
    """word + position + token-type embeddings, then LayerNorm and dropout."""

    def __init__(self, config: BERTConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.d_model)
        self.position = nn.LearnedPositionalEmbedding(
            config.max_position_embeddings, config.d_model
        )
        self.token_type = nn.Embedding(config.type_vocab_size, config.d_model)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, input_ids, token_type_ids):
        x = (
            self.word(input_ids)
            + self.position(input_ids.shape[1])
            + self.token_type(token_type_ids)
        )  # (B, T, D)
        return self.drop(self.norm(x))


class MLMHead(nn.Module):
    """Masked-LM scores: dense + activation + LayerNorm, then the word embeddings (tied; else
    its own `decoder` matrix) + bias."""

    def __init__(self, config: BERTConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.act = nn.activation_fn(config.activation)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.word_embeddings = word_embeddings  # shared, not copied: its weight is the decoder
        self.bias = nn.Parameter(tt.zeros(config.vocab_size))
        self.decoder = None
        if not config.tie_word_embeddings:
            self.decoder = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def forward(self, h):
        h = self.norm(self.act(self.dense(h)))  # (B, T, D)
        decoder = self.word_embeddings if self.decoder is None else self.decoder
        return F.linear(h, decoder.weight, self.bias)  # h @ Wᵀ + bias: (B, T, vocab)


class BERT(HFCheckpointMixin, nn.Module):
    """BERT for pretraining: encoder, MLM head and NSP head (HF's BertForPreTraining); with
    config.architecture "BertForMaskedLM" only the MLM head, with "BertModel" only the pooler."""

    config_class = BERTConfig

    def __init__(self, config: BERTConfig):
        super().__init__()
        self.config = config
        self.embeddings = BERTEmbeddings(config)
        self.blocks = nn.ModuleList(
            [
                nn.EncoderBlock(
                    config.d_model,
                    config.n_head,
                    d_ff=config.d_ff,
                    dropout=config.dropout,
                    activation=config.activation,
                    norm_first=False,  # Post-LN
                    eps=config.layer_norm_eps,
                )
                for _ in range(config.n_layer)
            ]
        )
        pooler, mlm, nsp = config.heads
        self.pooler = nn.Linear(config.d_model, config.d_model) if pooler else None
        self.mlm = MLMHead(config, self.embeddings.word) if mlm else None
        self.nsp = nn.Linear(config.d_model, 2) if nsp else None
        self._init_weights()

    def _init_weights(self):
        """BERT's init: N(0, 0.02) weights, zero biases, LayerNorms at identity."""
        normal_init_(self, std=0.02)

    def encode(self, input_ids, token_type_ids=None, attention_mask=None):
        """The encoder's last hidden states (B, T, D)."""
        if token_type_ids is None:
            token_type_ids = tt.zeros(*input_ids.shape, dtype=tt.int64)
        x = self.embeddings(input_ids, token_type_ids)
        key_mask = None if attention_mask is None else attention_mask.bool()
        for block in self.blocks:
            x = block(x, key_mask=key_mask)
        return x

    def forward(
        self,
        input_ids,
        token_type_ids=None,
        attention_mask=None,
        labels=None,
        next_sentence_label=None,
    ) -> ModelOutput:
        """MLM logits, NSP logits and the pooled [CLS] state; the loss sums the MLM loss (with
        `labels`, -100 = unmasked) and the NSP loss (with `next_sentence_label`, 0 = B follows A).

        Shapes: input_ids, token_type_ids, attention_mask (B, T) -> logits (B, T, vocab),
        nsp_logits (B, 2), pooled (B, D), hidden_states (B, T, D). A head the architecture lacks
        gives None (and its labels are an error).
        """
        for given, head, what in ((labels, self.mlm, "labels"), (next_sentence_label, self.nsp,
                                  "next_sentence_label")):  # fmt: skip
            if given is not None and head is None:
                raise ValueError(
                    f"BERT: a {self.config.architecture} has no head for {what} "
                    "(its checkpoint holds none)"
                )
        h = self.encode(input_ids, token_type_ids, attention_mask)
        pooled = None if self.pooler is None else self.pooler(h[:, 0]).tanh()  # (B, D), [CLS]
        logits = None if self.mlm is None else self.mlm(h)
        nsp_logits = None if self.nsp is None else self.nsp(pooled)
        loss = None
        if labels is not None:
            b, t = labels.shape
            # (B·T, vocab) scores against (B·T,) labels
            loss = F.cross_entropy(logits.reshape(b * t, -1), labels.reshape(b * t))
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits, next_sentence_label.reshape(-1))  # (B,)
            loss = nsp_loss if loss is None else loss + nsp_loss
        return ModelOutput(
            logits=logits, loss=loss, nsp_logits=nsp_logits, pooled=pooled, hidden_states=h
        )

    # ---- HuggingFace checkpoints (BertForPreTraining) -------------------------------------

    HF_PREFIX = "bert."
    HF_UNPREFIXED = ("cls.",)  # the heads sit outside the base model
    HF_TIED = frozenset({"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"})
    HF_TIED_SOURCES = {"cls.predictions.decoder.weight": "embeddings.word_embeddings.weight"}
    HF_IGNORED = (r"embeddings\.position_ids",)
    HF_NAMES = {
        "embeddings.word.weight": "embeddings.word_embeddings.weight",
        "embeddings.position.weight": "embeddings.position_embeddings.weight",
        "embeddings.token_type.weight": "embeddings.token_type_embeddings.weight",
        "embeddings.norm.weight": "embeddings.LayerNorm.weight",
        "embeddings.norm.bias": "embeddings.LayerNorm.bias",
        "blocks.{}.self_attn.q_proj.weight": "encoder.layer.{}.attention.self.query.weight",
        "blocks.{}.self_attn.q_proj.bias": "encoder.layer.{}.attention.self.query.bias",
        "blocks.{}.self_attn.k_proj.weight": "encoder.layer.{}.attention.self.key.weight",
        "blocks.{}.self_attn.k_proj.bias": "encoder.layer.{}.attention.self.key.bias",
        "blocks.{}.self_attn.v_proj.weight": "encoder.layer.{}.attention.self.value.weight",
        "blocks.{}.self_attn.v_proj.bias": "encoder.layer.{}.attention.self.value.bias",
        "blocks.{}.self_attn.out_proj.weight": "encoder.layer.{}.attention.output.dense.weight",
        "blocks.{}.self_attn.out_proj.bias": "encoder.layer.{}.attention.output.dense.bias",
        "blocks.{}.norm1.weight": "encoder.layer.{}.attention.output.LayerNorm.weight",
        "blocks.{}.norm1.bias": "encoder.layer.{}.attention.output.LayerNorm.bias",
        "blocks.{}.ffn.fc_in.weight": "encoder.layer.{}.intermediate.dense.weight",
        "blocks.{}.ffn.fc_in.bias": "encoder.layer.{}.intermediate.dense.bias",
        "blocks.{}.ffn.fc_out.weight": "encoder.layer.{}.output.dense.weight",
        "blocks.{}.ffn.fc_out.bias": "encoder.layer.{}.output.dense.bias",
        "blocks.{}.norm2.weight": "encoder.layer.{}.output.LayerNorm.weight",
        "blocks.{}.norm2.bias": "encoder.layer.{}.output.LayerNorm.bias",
        "pooler.weight": "pooler.dense.weight",
        "pooler.bias": "pooler.dense.bias",
        "mlm.dense.weight": "cls.predictions.transform.dense.weight",
        "mlm.dense.bias": "cls.predictions.transform.dense.bias",
        "mlm.norm.weight": "cls.predictions.transform.LayerNorm.weight",
        "mlm.norm.bias": "cls.predictions.transform.LayerNorm.bias",
        "mlm.bias": "cls.predictions.bias",
        "mlm.decoder.weight": "cls.predictions.decoder.weight",  # untied only
        "nsp.weight": "cls.seq_relationship.weight",
        "nsp.bias": "cls.seq_relationship.bias",
    }
