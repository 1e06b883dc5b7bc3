"""GPT, BERT, T5 and BART against HuggingFace transformers on the same (tiny, random) weights.

Each HF model is built offline from a config, saved with save_pretrained and loaded with our
from_pretrained; logits (float32) must agree to 1e-4 on every non-padding position and the
gradients of the loss on every parameter to rtol 1e-3. HF masks with the float32 minimum where
we use -inf, so fully padded query rows differ: they are never compared.
"""

import numpy as np
import pytest
from tinytensor.models import hf as hf_io

import tinytensor as tt
from tinytensor import models

B, T_SRC, T_TGT, VOCAB = 3, 12, 7, 99


def _hf_model(transformers, torch, name):
    """(HF model in eval mode, float32) for a tiny config, seeded."""
    torch.manual_seed(0)
    eager = dict(attn_implementation="eager")
    if name == "gpt":
        cfg = transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=64,
            bos_token_id=98, eos_token_id=98, **eager,
        )  # fmt: skip
        model = transformers.GPT2LMHeadModel(cfg)
    elif name == "bert":
        cfg = transformers.BertConfig(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=37,
            vocab_size=VOCAB, max_position_embeddings=64, **eager,
        )  # fmt: skip
        model = transformers.BertForPreTraining(cfg)
    elif name.startswith("t5"):
        extra = dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)
        cfg = transformers.T5Config(
            num_layers=2, num_decoder_layers=2, d_model=32, d_kv=8, num_heads=4, d_ff=37,
            vocab_size=VOCAB, relative_attention_num_buckets=8,
            relative_attention_max_distance=20, decoder_start_token_id=0,
            **(extra if name == "t5-gated" else {}), **eager,
        )  # fmt: skip
        model = transformers.T5ForConditionalGeneration(cfg)
    else:
        cfg = transformers.BartConfig(
            encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=37, decoder_ffn_dim=37,
            vocab_size=VOCAB, max_position_embeddings=64, scale_embedding=True, **eager,
        )  # fmt: skip
        model = transformers.BartForConditionalGeneration(cfg)
        with torch.no_grad():
            model.final_logits_bias.normal_()  # zeros by default: make the mapping visible
    return model.to(torch.float32).eval()


def _batch(name):
    """Numpy inputs with padding, and the mask of positions whose logits are compared."""
    rng = np.random.default_rng(1)
    if name == "gpt":
        ids = rng.integers(0, VOCAB, (B, T_SRC))
        mask = np.ones((B, T_SRC), dtype=np.int64)
        mask[1, :3] = 0  # a left-padded row
        mask[2, 9:] = 0  # a right-padded row
        labels = np.where(mask == 1, ids, -100)
        labels[1, 3] = -100  # HF would predict it from a fully masked (pad) query row
        return dict(input_ids=ids, attention_mask=mask, labels=labels), mask.astype(bool)
    if name == "bert":
        ids = rng.integers(0, VOCAB, (B, T_SRC))
        mask = np.ones((B, T_SRC), dtype=np.int64)
        mask[1, 8:] = 0
        types = (np.arange(T_SRC) >= 5).astype(np.int64)[None].repeat(B, 0)
        labels = np.where(rng.random((B, T_SRC)) < 0.3, ids, -100)
        labels[mask == 0] = -100
        batch = dict(
            input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels,
            next_sentence_label=np.array([0, 1, 0]),
        )  # fmt: skip
        return batch, mask.astype(bool)
    ids = rng.integers(3, VOCAB, (B, T_SRC))
    mask = np.ones((B, T_SRC), dtype=np.int64)
    mask[1, 8:] = 0  # encoder padding, seen by the decoder through cross-attention
    ids[1, 8:] = 0 if name.startswith("t5") else 1
    labels = rng.integers(3, VOCAB, (B, T_TGT))
    labels[2, 5:] = -100
    return dict(input_ids=ids, attention_mask=mask, labels=labels), np.ones((B, T_TGT), bool)


def _ours_call(model, name, batch):
    t = {k: tt.tensor(v) for k, v in batch.items()}
    if name == "gpt":
        targets = tt.tensor(models.collators.causal_lm_targets(batch["labels"]))
        return model(t["input_ids"], targets, attention_mask=t["attention_mask"])
    return model(**t)


def _hf_call(model, torch, batch):
    return model(**{k: torch.tensor(v) for k, v in batch.items()})


def _hf_logits(name, out):
    return (out.prediction_logits if name == "bert" else out.logits).detach().numpy()


NAMES = ["gpt", "bert", "t5", "t5-gated", "bart"]


@pytest.fixture(scope="module")
def pairs(transformers, tmp_path_factory):
    """name -> (HF model, our model loaded from HF's save_pretrained folder)."""
    import torch

    out = {}
    for name in NAMES:
        hf_model = _hf_model(transformers, torch, name)
        path = tmp_path_factory.mktemp(name)
        hf_model.save_pretrained(path)
        out[name] = (hf_model, models.from_pretrained(path), path)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_logits_and_loss_match_hf(pairs, name):
    import torch

    hf_model, ours, _ = pairs[name]
    batch, compare = _batch(name)
    with torch.no_grad():
        theirs = _hf_call(hf_model, torch, batch)
    with tt.no_grad():
        mine = _ours_call(ours, name, batch)
    diff = np.abs(_hf_logits(name, theirs) - mine.logits.numpy())[compare].max()
    print(f"{name}: max |logit difference| = {diff:.2e}")
    assert diff < 1e-4
    np.testing.assert_allclose(mine.loss.item(), theirs.loss.item(), rtol=1e-5)
    if name == "bert":
        np.testing.assert_allclose(
            mine.nsp_logits.numpy(), theirs.seq_relationship_logits.numpy(), atol=1e-5
        )


@pytest.mark.parametrize("name", NAMES)
def test_parameter_gradients_match_hf(pairs, name):
    import torch

    hf_model, ours, _ = pairs[name]
    batch, _ = _batch(name)
    hf_model.zero_grad()
    _hf_call(hf_model, torch, batch).loss.backward()
    ours.zero_grad()
    _ours_call(ours, name, batch).loss.backward()
    # our gradients laid out as HF's tensors (transposed, fused) through the same name map
    params = list(ours.named_parameters())
    saved = [p._array for _, p in params]
    try:
        for _, p in params:
            p._array = p.grad._array
        mine = {
            k: v
            for k, v in hf_io.state_to_hf(ours).items()
            if k != "final_logits_bias"  # a buffer, not trained
        }
    finally:
        for (_, p), data in zip(params, saved):
            p._array = data
    theirs = dict(hf_model.named_parameters())
    assert mine, "no gradients compared"
    for key, grad in mine.items():
        ref = theirs[key].grad.numpy()
        scale = np.abs(ref).max()
        np.testing.assert_allclose(grad, ref, rtol=1e-3, atol=1e-5 * scale + 1e-8, err_msg=key)


@pytest.mark.parametrize("name", NAMES)
def test_save_pretrained_loads_in_transformers(pairs, name, tmp_path, transformers):
    import torch

    hf_model, ours, _ = pairs[name]
    ours.save_pretrained(tmp_path)
    reloaded = type(hf_model).from_pretrained(tmp_path, attn_implementation="eager").eval()
    batch, compare = _batch(name)
    with torch.no_grad():
        a = _hf_logits(name, _hf_call(hf_model, torch, batch))
        b = _hf_logits(name, _hf_call(reloaded, torch, batch))
    np.testing.assert_allclose(a[compare], b[compare], atol=1e-6)
    again = models.from_pretrained(tmp_path)  # and back into tinytensor
    assert type(again) is type(ours)


def test_old_style_checkpoints_without_prefix_or_with_tied_copies(pairs, tmp_path):
    """Older GPT-2 files: no "transformer." prefix, an explicit lm_head copy, attention masks."""
    from safetensors.numpy import save_file

    _, ours, path = pairs["gpt"]
    weights = hf_io.load_weights(path)
    old = {k.removeprefix("transformer."): v for k, v in weights.items()}
    old["lm_head.weight"] = weights["transformer.wte.weight"]
    old["h.0.attn.bias"] = np.tril(np.ones((1, 1, 64, 64), np.float32))
    save_file(old, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text((path / "config.json").read_text())
    loaded = models.from_pretrained(tmp_path)
    ids = tt.tensor(np.arange(10)[None])
    with tt.no_grad():
        np.testing.assert_array_equal(loaded(ids).logits.numpy(), ours(ids).logits.numpy())


def test_missing_or_corrupt_checkpoints_name_the_path(tmp_path, pairs):
    with pytest.raises(OSError, match="no checkpoint folder"):
        models.from_pretrained(tmp_path / "nope")
    (tmp_path / "config.json").write_text('{"model_type": "gpt2"')
    with pytest.raises(OSError, match="not valid JSON"):
        models.from_pretrained(tmp_path)
    _, _, path = pairs["gpt"]
    (tmp_path / "config.json").write_text((path / "config.json").read_text())
    with pytest.raises(OSError, match=str(tmp_path).replace("\\", "\\\\") + ".*model.safetensors"):
        models.from_pretrained(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00garbage")
    with pytest.raises(OSError, match="cannot read"):
        models.from_pretrained(tmp_path)
    (tmp_path / "config.json").write_text('{"model_type": "llama"}')
    with pytest.raises(OSError, match="llama"):
        models.from_pretrained(tmp_path)
    with pytest.raises(OSError, match="gpt2"):
        models.BERT.from_pretrained(path)


def _tiny_ours(name):
    tt.manual_seed(0)
    if name == "gpt":
        config = models.GPTConfig(vocab_size=VOCAB, block_size=32, n_layer=2, n_head=2, n_embd=16)
        return models.GPT(config)
    if name == "bert":
        return models.BERT(models.BERTConfig(vocab_size=VOCAB, max_position_embeddings=32,
                                             n_layer=2, n_head=2, d_model=16, d_ff=32))  # fmt: skip
    if name == "t5":
        config = models.T5Config(vocab_size=VOCAB, d_model=16, d_kv=8, d_ff=32, n_layer=2,
                                 n_head=2, relative_attention_num_buckets=8)  # fmt: skip
        return models.T5(config)
    return models.BART(models.BARTConfig(vocab_size=VOCAB, max_position_embeddings=32,
                                         d_model=16, n_layer=2, n_head=2, d_ff=32))  # fmt: skip


@pytest.mark.parametrize("name", ["gpt", "bert", "t5", "bart"])
def test_loss_decreases_with_adamw(name):
    model = _tiny_ours(name).train()
    batch, _ = _batch("t5" if name == "t5" else name)
    optimizer = tt.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    losses = []
    for _ in range(8):
        optimizer.zero_grad()
        loss = _ours_call(model, name, batch).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1, losses


@pytest.mark.parametrize("name", ["gpt", "t5", "bart"])
@pytest.mark.parametrize("sample", [False, True])
def test_cached_generation_equals_uncached(name, sample):
    model = _tiny_ours(name).eval()
    batch, _ = _batch("t5" if name == "t5" else name)
    ids, mask = tt.tensor(batch["input_ids"][:, :6]), tt.tensor(batch["attention_mask"][:, :6])
    kwargs = dict(do_sample=sample, temperature=1.5, top_k=20, top_p=0.9) if sample else {}
    if name != "gpt":
        kwargs["eos_token_id"] = 98  # rarely drawn: the rows run to the length limit
    runs = [
        model.generate(
            ids,
            8,
            attention_mask=mask,
            use_cache=use_cache,
            generator=np.random.default_rng(3),
            **kwargs,
        ).numpy()  # fmt: skip
        for use_cache in (True, False)
    ]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert runs[0].shape[1] == (6 + 8 if name == "gpt" else 1 + 8)


def test_gpt_greedy_generation_matches_hf(pairs):
    import torch

    hf_model, ours, _ = pairs["gpt"]
    prompt = np.random.default_rng(0).integers(0, VOCAB, (2, 5))
    theirs = hf_model.generate(
        torch.tensor(prompt), max_new_tokens=6, do_sample=False, pad_token_id=0,
        eos_token_id=None,
    ).numpy()  # fmt: skip
    np.testing.assert_array_equal(ours.generate(tt.tensor(prompt), 6).numpy(), theirs)


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_encoder_decoder_greedy_and_beam_search_match_hf(pairs, name):
    import torch

    hf_model, ours, _ = pairs[name]
    batch, _ = _batch(name)
    ids, mask = batch["input_ids"][:2], batch["attention_mask"][:2]
    for beams in (1, 3):
        theirs = hf_model.generate(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), max_new_tokens=6,
            num_beams=beams, do_sample=False, early_stopping=False, length_penalty=1.0,
            forced_eos_token_id=None, forced_bos_token_id=None, no_repeat_ngram_size=0,
            min_length=0,
        ).numpy()  # fmt: skip
        mine = ours.generate(tt.tensor(ids), 6, attention_mask=tt.tensor(mask), num_beams=beams)
        np.testing.assert_array_equal(mine.numpy()[:, : theirs.shape[1]], theirs)


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_cached_beam_search_equals_uncached(name):
    model = _tiny_ours(name).eval()
    batch, _ = _batch(name)
    ids, mask = tt.tensor(batch["input_ids"][:2]), tt.tensor(batch["attention_mask"][:2])
    runs = [
        model.generate(ids, 6, attention_mask=mask, num_beams=3, use_cache=c).numpy()
        for c in (True, False)
    ]
    np.testing.assert_array_equal(runs[0], runs[1])
