"""Batched generation with left padding: the same tokens as HF's GPT-2 generate, and a padded
row continues exactly as the same prompt alone (learned positions and RoPE)."""

import numpy as np
import pytest
from tinytensor.models.generation import positions_from_mask
from tinytensor.models.gpt import GPT, GPTConfig

import tinytensor as tt
from tinytensor import models

VOCAB, PAD, EOS = 50, 0, 49
# rows of different lengths, left-padded with PAD (mask 0)
PROMPTS = [[5, 17, 3, 9, 22], [8, 41], [30, 2, 2, 11]]


def _left_padded(prompts):
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), PAD, dtype=np.int64)
    mask = np.zeros((len(prompts), width), dtype=np.int64)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :], mask[i, width - len(p) :] = p, 1
    return ids, mask


def test_positions_from_mask_are_hf_cumsum_minus_one():
    _, mask = _left_padded(PROMPTS)
    expected = np.array([[0, 1, 2, 3, 4], [0, 0, 0, 0, 1], [0, 0, 1, 2, 3]])
    np.testing.assert_array_equal(positions_from_mask(mask), expected)


@pytest.fixture(scope="module")
def gpt2_pair(transformers, tmp_path_factory):
    """(HF GPT2LMHeadModel, ours loaded from its save_pretrained folder), float32, eval."""
    import torch

    torch.manual_seed(0)
    # NOTE: a wide init (0.3, not 0.02) so that greedy choices are decided by clear logit
    # margins, not by float32 rounding differences between the two implementations
    cfg = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=64, initializer_range=0.3,
        bos_token_id=EOS, eos_token_id=EOS, pad_token_id=PAD, attn_implementation="eager",
    )  # fmt: skip
    hf_model = transformers.GPT2LMHeadModel(cfg).to(torch.float32).eval()
    path = tmp_path_factory.mktemp("gpt2_padding")
    hf_model.save_pretrained(path)
    return hf_model, models.from_pretrained(path).eval()


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
def test_left_padded_greedy_generation_matches_hf(gpt2_pair, use_cache):
    import torch

    hf_model, ours = gpt2_pair
    ids, mask = _left_padded(PROMPTS)
    n_new = 8
    with torch.no_grad():
        theirs = hf_model.generate(
            torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
            max_new_tokens=n_new, pad_token_id=PAD,
        ).numpy()  # fmt: skip
    mine = ours.generate(
        ids, n_new, attention_mask=mask, use_cache=use_cache, eos_token_id=EOS, pad_token_id=PAD
    ).numpy()
    np.testing.assert_array_equal(mine, theirs)


def test_padded_forward_logits_match_hf_with_position_ids(gpt2_pair):
    """The prefill itself: logits at real tokens agree with HF given the same position_ids."""
    import torch

    hf_model, ours = gpt2_pair
    ids, mask = _left_padded(PROMPTS)
    pos = positions_from_mask(mask)
    with torch.no_grad():
        theirs = hf_model(
            torch.tensor(ids), attention_mask=torch.tensor(mask), position_ids=torch.tensor(pos)
        ).logits.numpy()
    mine = ours(tt.tensor(ids), attention_mask=tt.tensor(mask), position_ids=tt.tensor(pos))
    real = mask.astype(bool)
    np.testing.assert_allclose(mine.logits.numpy()[real], theirs[real], atol=1e-4)


def test_forward_without_position_ids_is_unchanged_arange(gpt2_pair):
    """forward(idx) keeps positions 0..T-1 (HF's forward without position_ids)."""
    _, ours = gpt2_pair
    ids, mask = _left_padded(PROMPTS)
    b, t = ids.shape
    arange = np.broadcast_to(np.arange(t), (b, t)).copy()
    plain = ours(tt.tensor(ids), attention_mask=tt.tensor(mask)).logits.numpy()
    explicit = ours(
        tt.tensor(ids), attention_mask=tt.tensor(mask), position_ids=tt.tensor(arange)
    ).logits.numpy()
    np.testing.assert_array_equal(plain, explicit)


def test_bad_position_ids_are_refused(gpt2_pair):
    _, ours = gpt2_pair
    with pytest.raises(ValueError, match=r"position_ids must be \(B, T\)"):
        ours(tt.tensor([[1, 2, 3]]), position_ids=tt.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="block_size"):
        ours(tt.tensor([[1, 2]]), position_ids=tt.tensor([[0, 64]]))


@pytest.mark.parametrize(
    ("attention", "position"),
    [("mha", "learned"), ("mha", "rope"), ("gqa", "rope"), ("mla", "rope")],
)
def test_left_padded_row_generates_as_the_prompt_alone(attention, position):
    """Each row of a left-padded batch continues exactly as its prompt run alone (B = 1)."""
    tt.manual_seed(0)
    config = GPTConfig(
        vocab_size=VOCAB, block_size=32, n_layer=2, n_head=4, n_embd=32, dropout=0.0,
        attention=attention, position=position, n_kv_heads=2 if attention == "gqa" else None,
    )  # fmt: skip
    model = GPT(config).eval()
    with tt.no_grad():
        for p in model.parameters():  # wide weights: clear greedy margins (see above)
            if p.ndim == 2:
                p.mul_(10.0)
    ids, mask = _left_padded(PROMPTS)
    batched = model.generate(ids, 6, attention_mask=mask).numpy()
    width = ids.shape[1]
    for i, prompt in enumerate(PROMPTS):
        alone = model.generate(np.array([prompt]), 6).numpy()[0]
        np.testing.assert_array_equal(batched[i, width - len(prompt) :], alone, err_msg=str(i))
