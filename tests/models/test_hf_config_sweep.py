"""Unusual but valid HuggingFace configs: every one loads with our from_pretrained and matches.

Each case builds a tiny random transformers model offline from a config (eager attention, eval,
float32), perturbs its LayerNorm weights (HF initializes them to exactly 1/0, which would hide a
swapped mapping), saves it with save_pretrained and loads it with `models.from_pretrained`:
logits must agree to 1e-4 on every non-padding position, and the loss to rtol 1e-5. Configs we
cannot represent must raise an error that names the config field and its value.
"""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import models

VOCAB = 53

GPT = dict(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=40)
BERT = dict(
    num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=37,
    vocab_size=VOCAB, max_position_embeddings=40,
)  # fmt: skip
T5 = dict(
    num_layers=2, d_model=32, d_kv=8, num_heads=4, d_ff=37, vocab_size=VOCAB,
    relative_attention_num_buckets=8, relative_attention_max_distance=20, decoder_start_token_id=0,
)  # fmt: skip
BART = dict(
    encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37, vocab_size=VOCAB,
    max_position_embeddings=40,
)  # fmt: skip
DEFAULTS = {"gpt2": GPT, "bert": BERT, "t5": T5, "bart": BART}
CONFIGS = {"gpt2": "GPT2Config", "bert": "BertConfig", "t5": "T5Config", "bart": "BartConfig"}
HEADS = {
    "gpt2": "GPT2LMHeadModel",
    "bert": "BertForPreTraining",
    "t5": "T5ForConditionalGeneration",
    "bart": "BartForConditionalGeneration",
}


# ---- inputs -------------------------------------------------------------------------------------


def _gpt_batch(rng, b=3, t=10, padding=True):
    """Row 1 left-padded, row 2 right-padded; labels only on real tokens."""
    ids = rng.integers(0, VOCAB, (b, t))
    mask = np.ones((b, t), dtype=np.int64)
    if padding:
        mask[1, :3] = 0
        mask[2, 7:] = 0
    labels = np.where(mask == 1, ids, -100)
    if padding:
        labels[1, 3] = -100  # HF predicts it from a fully masked (pad) query row
    return dict(input_ids=ids, attention_mask=mask, labels=labels), mask.astype(bool)


def _bert_batch(rng, b=3, t=10, type_vocab_size=2, token_types=True, padding=True, nsp=True):
    ids = rng.integers(0, VOCAB, (b, t))
    mask = np.ones((b, t), dtype=np.int64)
    if padding:
        mask[1, 6:] = 0
    batch = dict(input_ids=ids, attention_mask=mask)
    if token_types:
        batch["token_type_ids"] = rng.integers(0, type_vocab_size, (b, t))
    labels = np.where(rng.random((b, t)) < 0.4, ids, -100)
    labels[mask == 0] = -100
    labels[0, 0] = ids[0, 0]  # at least one labelled position
    batch["labels"] = labels
    if nsp:
        batch["next_sentence_label"] = rng.integers(0, 2, b)
    return batch, mask.astype(bool)


def _seq2seq_batch(rng, pad_id, b=3, s=9, t=6, padding=True, decoder_input_ids=False):
    ids = rng.integers(3, VOCAB, (b, s))
    mask = np.ones((b, s), dtype=np.int64)
    if padding:
        mask[1, 6:] = 0
        ids[1, 6:] = pad_id
    labels = rng.integers(3, VOCAB, (b, t))
    labels[2, 4:] = -100
    batch = dict(input_ids=ids, attention_mask=mask, labels=labels)
    if decoder_input_ids:
        batch["decoder_input_ids"] = rng.integers(3, VOCAB, (b, t))
    return batch, np.ones((b, t), bool)


def _batch(kind, head, config, **options):
    rng = np.random.default_rng(1)
    if kind == "gpt2":
        return _gpt_batch(rng, **options)
    if kind == "bert":
        types = config.type_vocab_size
        nsp = head == "BertForPreTraining"
        return _bert_batch(rng, type_vocab_size=types, nsp=nsp, **options)
    return _seq2seq_batch(rng, config.pad_token_id, **options)


# ---- HF model -> checkpoint -> ours -----------------------------------------------------------


def _hf_model(transformers, torch, kind, overrides, head=None):
    torch.manual_seed(0)
    config = getattr(transformers, CONFIGS[kind])(**{**DEFAULTS[kind], **overrides})
    config._attn_implementation = "eager"
    model = getattr(transformers, head or HEADS[kind])(config).to(torch.float32).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(n in name for n in ("LayerNorm", "layer_norm", "ln_", "layernorm")):
                p.add_(0.1 * torch.randn_like(p))
        if hasattr(model, "final_logits_bias"):
            model.final_logits_bias.normal_()  # zeros by default: make the mapping visible
    return model


def _ours(model, kind, batch):
    t = {k: tt.tensor(v) for k, v in batch.items()}
    with tt.no_grad():
        if kind == "gpt2":
            targets = tt.tensor(models.collators.causal_lm_targets(batch["labels"]))
            return model(t["input_ids"], targets, attention_mask=t["attention_mask"])
        return model(**t)


def _compare(transformers, torch, tmp_path, kind, overrides, head=None, save_dtype=None,
             shard=False, atol=1e-4, **batch_options):  # fmt: skip
    """Max |logit difference| between HF and ours (asserted below atol), loss checked too."""
    hf_model = _hf_model(transformers, torch, kind, overrides, head)
    batch, compare = _batch(kind, head or HEADS[kind], hf_model.config, **batch_options)
    with torch.no_grad():
        theirs = hf_model(**{k: torch.tensor(v) for k, v in batch.items()})
    saved = hf_model if save_dtype is None else hf_model.to(getattr(torch, save_dtype))
    saved.save_pretrained(tmp_path, **(dict(max_shard_size="20KB") if shard else {}))
    mine = _ours(models.from_pretrained(tmp_path), kind, batch)
    hf_logits = getattr(theirs, "prediction_logits", None)
    hf_logits = (theirs.logits if hf_logits is None else hf_logits).numpy()
    assert mine.logits.dtype == tt.float32
    diff = np.abs(hf_logits - mine.logits.numpy())[compare].max()
    print(f"{kind} {overrides} {batch_options}: max |logit difference| = {diff:.2e}")
    assert diff < atol
    if theirs.loss is not None and not np.isnan(theirs.loss.item()):
        np.testing.assert_allclose(mine.loss.item(), theirs.loss.item(), rtol=max(1e-5, atol))
    if hasattr(theirs, "seq_relationship_logits"):
        nsp = theirs.seq_relationship_logits.numpy()
        np.testing.assert_allclose(mine.nsp_logits.numpy(), nsp, atol=atol)
    return diff


CASES = [
    # GPT-2
    ("gpt2", dict(n_embd=36, n_head=3), {}),
    ("gpt2", dict(n_embd=20, n_head=5, n_inner=23), {}),
    ("gpt2", dict(activation_function="gelu"), {}),
    ("gpt2", dict(activation_function="relu", layer_norm_epsilon=1e-3), {}),
    ("gpt2", dict(activation_function="gelu_pytorch_tanh", n_positions=200), {}),
    ("gpt2", dict(scale_attn_by_inverse_layer_idx=True), {}),
    ("gpt2", dict(reorder_and_upcast_attn=True), {}),
    ("gpt2", dict(scale_attn_weights=False), {}),
    ("gpt2", dict(tie_word_embeddings=False), {}),
    ("gpt2", {}, dict(b=1, padding=False)),
    ("gpt2", {}, dict(t=1, padding=False)),
    ("gpt2", dict(n_layer=1), dict(b=1, t=1, padding=False)),
    # BERT
    ("bert", dict(hidden_act="relu", type_vocab_size=1), {}),
    ("bert", dict(hidden_act="gelu_new", type_vocab_size=3), {}),
    ("bert", dict(hidden_size=36, num_attention_heads=3, intermediate_size=41), {}),
    ("bert", dict(layer_norm_eps=1e-5, max_position_embeddings=100), {}),
    ("bert", {}, dict(token_types=False)),
    ("bert", dict(tie_word_embeddings=False), {}),
    # T5
    ("t5", dict(d_kv=5, num_heads=3), {}),
    ("t5", dict(num_layers=3, num_decoder_layers=1), {}),
    (
        "t5",
        dict(
            num_decoder_layers=3,
            relative_attention_num_buckets=5,
            relative_attention_max_distance=7,
        ),
        {},
    ),  # fmt: skip
    ("t5", dict(relative_attention_num_buckets=32, relative_attention_max_distance=128), {}),
    ("t5", dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False), {}),
    ("t5", dict(feed_forward_proj="gated-silu"), dict(decoder_input_ids=True)),
    ("t5", dict(feed_forward_proj="gelu", layer_norm_epsilon=1e-3), {}),
    ("t5", dict(feed_forward_proj="gated-gelu", dense_act_fn="relu"), {}),
    ("t5", dict(tie_word_embeddings=False), dict(padding=False)),
    # BART
    ("bart", dict(encoder_layers=3, decoder_layers=1, scale_embedding=True), {}),
    ("bart", dict(decoder_attention_heads=2, decoder_ffn_dim=29), {}),
    ("bart", dict(encoder_attention_heads=8, encoder_ffn_dim=23), {}),
    ("bart", dict(activation_function="relu", max_position_embeddings=23), {}),
    ("bart", dict(activation_function="gelu_new"), dict(decoder_input_ids=True)),
    ("bart", dict(tie_word_embeddings=False), {}),
    ("bart", dict(pad_token_id=0, decoder_start_token_id=0), dict(padding=False)),
]


def _case_id(case):
    kind, overrides, options = case
    text = ",".join(f"{k}={v}" for k, v in {**overrides, **options}.items())
    return f"{kind}-{text or 'default'}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_unusual_configs_match_hf(case, transformers, torch, tmp_path):
    kind, overrides, options = case
    _compare(transformers, torch, tmp_path, kind, overrides, **options)


@pytest.mark.parametrize("kind", ["gpt2", "bert", "t5", "bart"])
@pytest.mark.parametrize("save_dtype", ["float16", "bfloat16"])
def test_half_precision_checkpoints_load_as_float32(kind, save_dtype, transformers, torch,
                                                    tmp_path):  # fmt: skip
    # NOTE: HF computes with the full float32 weights, we with the rounded ones: loose tolerance
    _compare(transformers, torch, tmp_path, kind, {}, save_dtype=save_dtype, atol=5e-2)


@pytest.mark.parametrize("kind", ["gpt2", "bert", "t5", "bart"])
def test_sharded_checkpoints_load(kind, transformers, torch, tmp_path):
    _compare(transformers, torch, tmp_path, kind, {}, shard=True)
    assert len(list(tmp_path.glob("model-*.safetensors"))) > 1


def test_bert_masked_lm_checkpoint_has_no_pooler_or_nsp(transformers, torch, tmp_path):
    _compare(transformers, torch, tmp_path, "bert", {}, head="BertForMaskedLM")
    model = models.from_pretrained(tmp_path)
    out = model(tt.tensor(np.arange(6)[None]))
    assert out.nsp_logits is None and out.pooled is None


def test_bert_base_model_checkpoint_loads_the_encoder_only(transformers, torch, tmp_path):
    hf_model = _hf_model(transformers, torch, "bert", {}, head="BertModel")
    hf_model.save_pretrained(tmp_path)
    model = models.from_pretrained(tmp_path)
    batch, compare = _bert_batch(np.random.default_rng(2), nsp=False)
    batch.pop("labels")
    with torch.no_grad():
        theirs = hf_model(**{k: torch.tensor(v) for k, v in batch.items()})
    with tt.no_grad():
        out = model(**{k: tt.tensor(v) for k, v in batch.items()})
    hidden = theirs.last_hidden_state.numpy()
    assert out.logits is None and out.nsp_logits is None
    assert np.abs(out.hidden_states.numpy() - hidden)[compare].max() < 1e-4
    np.testing.assert_allclose(out.pooled.numpy(), theirs.pooler_output.numpy(), atol=1e-5)
    with pytest.raises(ValueError, match="BertModel.*labels"):
        model(tt.tensor(batch["input_ids"]), labels=tt.tensor(batch["input_ids"]))


@pytest.mark.parametrize(
    "kind, field, value",
    [
        ("gpt2", "activation_function", "quick_gelu"),
        ("bert", "hidden_act", "tanh"),
        ("bert", "is_decoder", True),
        ("bart", "activation_function", "quick_gelu"),
    ],
)
def test_unsupported_config_fields_raise_naming_the_field(kind, field, value, transformers,
                                                          torch, tmp_path):  # fmt: skip
    _hf_model(transformers, torch, kind, {field: value}).save_pretrained(tmp_path)
    with pytest.raises((OSError, ValueError), match=f"{field}.*{value}"):
        models.from_pretrained(tmp_path)


def test_a_tied_config_with_different_copies_in_the_file_is_an_error(transformers, torch,
                                                                     tmp_path):  # fmt: skip
    """An untied GPT-2 file whose config claims tying: lm_head.weight must not be dropped."""
    import json

    _hf_model(transformers, torch, "gpt2", dict(tie_word_embeddings=False)).save_pretrained(
        tmp_path
    )
    config = json.loads((tmp_path / "config.json").read_text())
    config["tie_word_embeddings"] = True
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(OSError, match="lm_head.weight differs from wte.weight.*tie_word_emb"):
        models.from_pretrained(tmp_path)


def test_untied_bart_config_with_a_file_that_stores_only_the_shared_table(transformers, torch,
                                                                          tmp_path):  # fmt: skip
    """transformers 4 tied BART's encoder/decoder tables to `shared` even when untied."""
    from safetensors.numpy import load_file, save_file

    hf_model = _hf_model(transformers, torch, "bart", dict(tie_word_embeddings=False))
    with torch.no_grad():
        for table in (hf_model.model.encoder.embed_tokens, hf_model.model.decoder.embed_tokens):
            table.weight.copy_(hf_model.model.shared.weight)
    hf_model.save_pretrained(tmp_path)
    weights = load_file(str(tmp_path / "model.safetensors"))
    del weights["model.encoder.embed_tokens.weight"], weights["model.decoder.embed_tokens.weight"]
    save_file(weights, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    batch, _ = _seq2seq_batch(np.random.default_rng(3), hf_model.config.pad_token_id)
    with torch.no_grad():
        theirs = hf_model(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
    mine = _ours(models.from_pretrained(tmp_path), "bart", batch).logits.numpy()
    assert np.abs(mine - theirs).max() < 1e-4
