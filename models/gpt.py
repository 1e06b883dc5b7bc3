"""GPT-2: a decoder-only Transformer language model.

Radford et al. 2019, "Language Models are Unsupervised Multitask Learners". Pre-LN blocks
(LayerNorm before attention and before the MLP, a final LayerNorm), learned absolute positions,
the tanh-approximated GELU, causal self-attention, and an LM head tied to the token embedding.

    model = GPT(GPTConfig(vocab_size=99, n_layer=2, n_head=4, n_embd=32))
    logits, loss = model(idx, targets)            # targets = next tokens, -100 = ignore
    out = model.generate(idx, max_new_tokens=20, do_sample=True, top_k=40)
"""

from __future__ import annotations

from dataclasses import dataclass

from tinytensor.nn import functional as F
from tinytensor.nn.variants import check_attention_options, make_attention, tokens_seen

import tinytensor as tt
from tinytensor import nn

from .generation import generate_decoder_only
from .hf import HFCheckpointMixin, activation_from_hf, activation_to_hf
from .output import ModelOutput


@dataclass
class GPTConfig:
    vocab_size: int = 50257  # tokens; HF vocab_size
    block_size: int = 1024  # longest sequence (learned positions); HF n_positions
    n_layer: int = 12  # Transformer blocks
    n_head: int = 12  # attention heads
    n_embd: int = 768  # model width
    n_inner: int | None = None  # MLP hidden size; None means 4·n_embd
    activation: str = "gelu_tanh"  # MLP activation; HF "gelu_new" is the tanh GELU
    dropout: float = 0.1  # embeddings, attention probabilities, MLP and residual branches
    layer_norm_epsilon: float = 1e-5  # LayerNorm eps
    bos_token_id: int | None = 50256  # <|endoftext|> starts documents ...
    eos_token_id: int | None = 50256  # ... and ends them; generation stops at it
    pad_token_id: int | None = None  # GPT-2 has none
    tie_word_embeddings: bool = True  # LM head = wte (else its own lm_head, no bias)
    scale_attn_weights: bool = True  # scores / √d_head (HF can turn it off)
    scale_attn_by_inverse_layer_idx: bool = False  # block i's scores also / (i + 1) (HF)
    # The attention variant and positions (nn.variants; HF's GPT-2 is "mha" with "learned").
    attention: str = "mha"  # mha | gqa | mqa | mla | sliding | linear
    n_kv_heads: int | None = None  # K/V heads of gqa (sliding: default n_head)
    kv_latent_dim: int | None = None  # MLA's cached latent d_c; None means n_embd // 4
    rope_dim: int | None = None  # MLA's decoupled RoPE part d_R; None means d_head // 2
    window: int | None = None  # sliding-window size w (keys per query, itself included)
    position: str = "learned"  # learned (wpe) | rope | alibi

    @classmethod
    def from_hf(cls, c: dict) -> GPTConfig:
        """From a transformers GPT2Config dict (config.json)."""
        pdrop = c.get("resid_pdrop", 0.1)
        return cls(
            vocab_size=c["vocab_size"],
            block_size=c.get("n_positions", 1024),
            n_layer=c["n_layer"],
            n_head=c["n_head"],
            n_embd=c["n_embd"],
            n_inner=c.get("n_inner"),
            activation=activation_from_hf(c.get("activation_function", "gelu_new")),
            dropout=pdrop,
            layer_norm_epsilon=c.get("layer_norm_epsilon", 1e-5),
            bos_token_id=c.get("bos_token_id"),
            eos_token_id=c.get("eos_token_id"),
            pad_token_id=c.get("pad_token_id"),
            tie_word_embeddings=c.get("tie_word_embeddings", True),
            scale_attn_weights=c.get("scale_attn_weights", True),
            scale_attn_by_inverse_layer_idx=c.get("scale_attn_by_inverse_layer_idx", False),
            # NOTE: reorder_and_upcast_attn only changes float16 rounding: float32 is the same
        )

    def to_hf(self) -> dict:
        return {
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "vocab_size": self.vocab_size,
            "n_positions": self.block_size,
            "n_layer": self.n_layer,
            "n_head": self.n_head,
            "n_embd": self.n_embd,
            "n_inner": self.n_inner,
            "activation_function": activation_to_hf(self.activation),
            "resid_pdrop": self.dropout,
            "embd_pdrop": self.dropout,
            "attn_pdrop": self.dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "pad_token_id": self.pad_token_id,
            "tie_word_embeddings": self.tie_word_embeddings,
            "scale_attn_weights": self.scale_attn_weights,
            "scale_attn_by_inverse_layer_idx": self.scale_attn_by_inverse_layer_idx,
        }


class GPT(HFCheckpointMixin, nn.Module):
    """GPT-2 language model: token + position embeddings, n_layer Pre-LN causal blocks, ln_f,
    and logits through the (tied) token embedding."""

    config_class = GPTConfig

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        check_attention_options(config.attention, config.position)
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = None
        if config.position == "learned":
            self.wpe = nn.LearnedPositionalEmbedding(config.block_size, config.n_embd)
        self.alibi = nn.ALiBi(config.n_head) if config.position == "alibi" else None
        self.drop = nn.Dropout(config.dropout)
        # NOTE: nn's layer also drops the MLP's hidden activations (GPT-2 does not); in eval
        # (all the HF comparisons) dropout is off and the two are identical.
        self.blocks = nn.ModuleList(
            [
                nn.EncoderBlock(
                    config.n_embd,
                    config.n_head,
                    d_ff=config.n_inner or 4 * config.n_embd,
                    dropout=config.dropout,
                    activation=config.activation,
                    norm_first=True,
                    eps=config.layer_norm_epsilon,
                    scale=self._attention_scale(config, i),
                )
                for i in range(config.n_layer)
            ]
        )
        if config.attention != "mha" or config.position == "rope":
            self._replace_attention(config)
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.lm_head = None
        if not config.tie_word_embeddings:
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self._init_weights()

    @staticmethod
    def _attention_scale(config, layer):
        """Block `layer`'s score scale: d_head^-1/2 (if scale_attn_weights) · 1/(layer + 1) (if
        scale_attn_by_inverse_layer_idx), as HF's GPT-2."""
        scale = (config.n_embd // config.n_head) ** -0.5 if config.scale_attn_weights else 1.0
        return scale / (layer + 1) if config.scale_attn_by_inverse_layer_idx else scale

    def _replace_attention(self, config):
        """Each block's self-attention becomes the configured variant (one RoPE table shared by
        all layers; MLA brings its own decoupled RoPE)."""
        rotary = None
        if config.position == "rope" and config.attention != "mla":
            rotary = nn.RotaryEmbedding(config.n_embd // config.n_head, config.block_size)
        for block in self.blocks:
            block.self_attn = make_attention(
                config.attention,
                config.n_embd,
                config.n_head,
                n_kv_heads=config.n_kv_heads,
                kv_latent_dim=config.kv_latent_dim,
                rope_dim=config.rope_dim,
                window=config.window,
                rotary=rotary,
                dropout=config.dropout,
                max_positions=config.block_size,
            )

    def _init_weights(self):
        """GPT-2's init: N(0, 0.02), zero biases, residual projections scaled by 1/√(2·n_layer)."""
        with tt.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif "norm" in name or name.startswith("ln_f"):
                    p.fill_(1.0)
                else:
                    std = 0.02
                    if name.endswith(("out_proj.weight", "fc_out.weight")):
                        std /= (2 * self.config.n_layer) ** 0.5
                    p.normal_(0.0, std)

    def forward(
        self, idx, targets=None, attention_mask=None, cache=None, position_ids=None
    ) -> ModelOutput:
        """Logits of the next token at every position.

        Args:
            idx: (B, T) token ids.
            targets: (B, T) next-token ids (-100 = no loss), e.g. `collators.causal_lm_targets`.
            attention_mask: (B, T_total) 1 = token, 0 = padding (T_total counts cached tokens).
                Positions are 0..T-1 even with left padding, as HF's without position_ids
                (pass `position_ids` to shift them).
            cache: an `nn.KVCache`: the new tokens continue the cached ones.
            position_ids: (B, T) position of each token, for learned positions (e.g. HF's
                cumsum(attention_mask) - 1 with left padding, as `generate` passes); None
                means offset..offset+T-1 for every row. Relative encodings (rope, alibi) depend
                only on distances, which a per-row shift such as left padding leaves unchanged,
                so they keep the cache offsets.
        Returns:
            ModelOutput(logits (B, T, vocab), loss).
        """
        b, t = idx.shape
        offset = tokens_seen(cache)
        if offset + t > self.config.block_size:
            raise ValueError(
                f"GPT: {offset + t} positions exceed block_size={self.config.block_size}"
            )
        x = self.wte(idx)  # (B, T, C)
        if self.wpe is not None and position_ids is None:
            x = x + self.wpe(t, offset)
        elif self.wpe is not None:
            x = x + self._learned_positions(position_ids, b, t)
        x = self.drop(x)
        key_mask = None if attention_mask is None else attention_mask.bool()
        attn_bias = None if self.alibi is None else self.alibi(t, offset + t, offset)
        for block in self.blocks:
            x = block(x, key_mask=key_mask, attn_bias=attn_bias, is_causal=True, cache=cache)
        x = self.ln_f(x)
        head = self.wte.weight if self.lm_head is None else self.lm_head.weight
        # (B, T, vocab): the LM head is the token embedding when tied; F.linear is x @ headᵀ in
        # one op (not a transpose and a product)
        logits = F.linear(x, head)
        loss = None
        if targets is not None:
            # (B·T, vocab) scores against (B·T,) targets
            loss = F.cross_entropy(logits.reshape(b * t, -1), targets.reshape(b * t))
        return ModelOutput(logits=logits, loss=loss)

    def _learned_positions(self, position_ids, b, t):
        """wpe rows gathered per token: (B, T) ids -> (B, T, C)."""
        if not isinstance(position_ids, tt.Tensor):
            position_ids = tt.tensor(position_ids, device=self.wpe.weight.device)
        if tuple(position_ids.shape) != (b, t) or position_ids.dtype.kind not in "iu":
            raise ValueError(
                f"GPT: position_ids must be (B, T) = ({b}, {t}) integers, got "
                f"{tuple(position_ids.shape)} {position_ids.dtype}"
            )
        ids = position_ids.numpy()
        if ids.size and (ids.min() < 0 or ids.max() >= self.config.block_size):
            raise ValueError(
                f"GPT: position_ids must lie in [0, block_size={self.config.block_size}), got "
                f"[{ids.min()}, {ids.max()}]"
            )
        return F.embedding(position_ids, self.wpe.weight)

    def generate(self, idx, max_new_tokens, attention_mask=None, **kwargs):
        """Continues idx (B, T) by up to max_new_tokens; kwargs as
        `generation.generate_decoder_only` (do_sample, temperature, top_k, top_p,
        eos_token_id, use_cache). Stops at `eos_token_id` only when one is passed."""
        return generate_decoder_only(self, idx, max_new_tokens, attention_mask, **kwargs)

    # ---- HuggingFace checkpoints (GPT2LMHeadModel) ----------------------------------------

    HF_PREFIX = "transformer."
    HF_UNPREFIXED = ("lm_head.",)  # only untied models have their own lm_head
    # NOTE: GPT-2 uses Conv1D, storing weights (in, out): ours are (out, in), so transpose
    HF_TRANSPOSED = frozenset(
        f"blocks.{{}}.{name}.weight"
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
        + ("self_attn.out_proj", "ffn.fc_in", "ffn.fc_out")
    )
    HF_TIED = frozenset({"lm_head.weight"})  # = wte.weight when tied
    HF_TIED_SOURCES = {"lm_head.weight": "wte.weight"}
    HF_IGNORED = (r"h\.\d+\.attn\.(masked_)?bias",)  # old files store the causal mask
    HF_NAMES = {
        "wte.weight": "wte.weight",
        "wpe.weight": "wpe.weight",
        "blocks.{}.norm1.weight": "h.{}.ln_1.weight",
        "blocks.{}.norm1.bias": "h.{}.ln_1.bias",
        "blocks.{}.self_attn.q_proj.weight": ("h.{}.attn.c_attn.weight", 0, 3),
        "blocks.{}.self_attn.k_proj.weight": ("h.{}.attn.c_attn.weight", 1, 3),
        "blocks.{}.self_attn.v_proj.weight": ("h.{}.attn.c_attn.weight", 2, 3),
        "blocks.{}.self_attn.q_proj.bias": ("h.{}.attn.c_attn.bias", 0, 3),
        "blocks.{}.self_attn.k_proj.bias": ("h.{}.attn.c_attn.bias", 1, 3),
        "blocks.{}.self_attn.v_proj.bias": ("h.{}.attn.c_attn.bias", 2, 3),
        "blocks.{}.self_attn.out_proj.weight": "h.{}.attn.c_proj.weight",
        "blocks.{}.self_attn.out_proj.bias": "h.{}.attn.c_proj.bias",
        "blocks.{}.norm2.weight": "h.{}.ln_2.weight",
        "blocks.{}.norm2.bias": "h.{}.ln_2.bias",
        "blocks.{}.ffn.fc_in.weight": "h.{}.mlp.c_fc.weight",
        "blocks.{}.ffn.fc_in.bias": "h.{}.mlp.c_fc.bias",
        "blocks.{}.ffn.fc_out.weight": "h.{}.mlp.c_proj.weight",
        "blocks.{}.ffn.fc_out.bias": "h.{}.mlp.c_proj.bias",
        "ln_f.weight": "ln_f.weight",
        "ln_f.bias": "ln_f.bias",
        "lm_head.weight": "lm_head.weight",
    }
