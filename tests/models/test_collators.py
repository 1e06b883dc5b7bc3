"""The pretraining objectives, tested on the statistics of what they produce."""

import numpy as np
import pytest
from tinytensor.models import collators as C


def test_causal_lm_targets_shift_and_padding():
    ids = np.array([[5, 6, 7, 8], [9, 10, 0, 0], [0, 0, 11, 12]])
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1]])
    targets = C.causal_lm_targets(ids, mask)
    expected = [[6, 7, 8, -100], [10, -100, -100, -100], [-100, -100, 12, -100]]
    np.testing.assert_array_equal(targets, expected)


def test_mask_tokens_selection_and_80_10_10_statistics():
    rng = np.random.default_rng(0)
    vocab, mask_id, special = 1000, 3, (0, 1, 2)
    ids = rng.integers(10, vocab, size=(200, 500))
    ids[:, 0] = 1  # a special token ([CLS]) at the start of each row: never selected
    inputs, labels = C.mask_tokens(ids, mask_id, vocab, special, generator=1)
    selected = labels != -100
    assert not selected[:, 0].any()
    assert abs(selected[:, 1:].mean() - 0.15) < 0.005
    np.testing.assert_array_equal(labels[selected], ids[selected])
    np.testing.assert_array_equal(inputs[~selected], ids[~selected])
    became_mask = (inputs == mask_id)[selected].mean()
    kept = (inputs == ids)[selected].mean()
    random_other = 1 - became_mask - kept
    assert abs(became_mask - 0.8) < 0.01
    # a random replacement equals the original with probability 1/vocab: kept ≈ 0.1 + 0.1/1000
    assert abs(kept - 0.1) < 0.01 and abs(random_other - 0.1) < 0.01


def test_nsp_pairs_layout_and_label_balance():
    docs = [
        [list(range(1000 + 100 * d + 10 * s, 1004 + 100 * d + 10 * s)) for s in range(6)]
        for d in range(40)
    ]
    batch = C.nsp_pairs(docs, max_length=12, cls_token_id=101, sep_token_id=102, generator=0)
    ids, types, labels = batch["input_ids"], batch["token_type_ids"], batch["next_sentence_label"]
    assert ids.shape == (40 * 5, 12) and (ids[:, 0] == 101).all()
    assert abs(labels.mean() - 0.5) < 0.1
    for row, tt_row, label in zip(ids, types, labels):
        seps = np.flatnonzero(row == 102)
        a, b = row[1 : seps[0]], row[seps[0] + 1 : seps[1]]
        assert (tt_row[: seps[0] + 1] == 0).all() and (tt_row[seps[0] + 1 : seps[1] + 1] == 1).all()
        same_doc_next = b[0] // 100 == a[0] // 100 and b[0] % 100 == a[0] % 100 + 10
        assert same_doc_next == (label == 0)


def test_t5_span_corruption_sentinels_and_span_lengths():
    vocab, eos, length = 32100, 1, 100
    ids = np.arange(2, 2 + length)[None].repeat(300, axis=0)
    inputs, labels = C.span_corruption(ids, vocab, eos, generator=0)
    span_lengths = []
    for src, tgt in zip(inputs, labels):
        assert src[-1] == eos and tgt[-1] == eos
        src_sent, tgt_sent = src[src >= vocab - 100], tgt[tgt >= vocab - 100]
        # extra_id_0 = vocab - 1, extra_id_1 = vocab - 2, ... in order, same in inputs and labels
        np.testing.assert_array_equal(src_sent, vocab - 1 - np.arange(len(src_sent)))
        np.testing.assert_array_equal(tgt_sent, src_sent)
        # inputs and labels together hold every original token exactly once, in order
        kept = src[(src < vocab - 100) & (src != eos)]
        dropped = tgt[(tgt < vocab - 100) & (tgt != eos)]
        np.testing.assert_array_equal(np.sort(np.concatenate([kept, dropped])), ids[0])
        assert len(dropped) == 15  # round(0.15 * 100)
        pieces = np.split(tgt[:-1], np.flatnonzero(tgt[:-1] >= vocab - 100))[1:]
        span_lengths += [len(p) - 1 for p in pieces]
    assert min(span_lengths) >= 1
    assert abs(np.mean(span_lengths) - 3.0) < 1e-9  # 15 noise tokens in round(15/3) = 5 spans
    assert np.std(span_lengths) > 0.5  # the lengths vary


def test_bart_text_infilling_poisson_spans_and_ratio():
    rng = np.random.default_rng(0)
    mask_id, n = -1, 200  # -1 never collides with the tokens 0..n-1
    removed = []
    for _ in range(200):
        out = C.text_infilling(np.arange(n), mask_id, mask_ratio=0.3, generator=rng)
        kept = out[out != mask_id]
        assert (np.diff(kept) > 0).all()  # order preserved
        assert n - len(kept) == 60  # ceil(0.3 * 200) tokens removed
        # the tokens removed at each <mask>: the gap between the kept neighbours
        prev = -1
        for i, tok in enumerate(out):
            if tok == mask_id:
                nxt = next((t for t in out[i + 1 :] if t != mask_id), n)
                masks_here = 1
                j = i + 1
                while j < len(out) and out[j] == mask_id:
                    masks_here += 1
                    j += 1
                if i == 0 or out[i - 1] != mask_id:
                    gap = nxt - prev - 1
                    removed.append((gap, masks_here))
            else:
                prev = tok
    spans = sum(m for _, m in removed)
    total = sum(g for g, _ in removed)
    mean_len = total / spans
    assert 2.6 < mean_len < 3.2  # Poisson(3), the last span of each row cut to fit
    # 0-length spans exist: some <mask>s remove nothing (P(0) = e^-3 ≈ 5%)
    assert any(g < m for g, m in removed)


def test_permute_sentences_keeps_sentences_intact():
    period = 99
    tokens = np.array([1, 2, period, 3, 4, 5, period, 6, period, 7, 8, period])
    seen = set()
    for seed in range(30):
        out = C.permute_sentences(tokens, [period], generator=seed)
        parts = tuple(tuple(p) for p in np.split(out, np.flatnonzero(out == period) + 1) if len(p))
        assert sorted(parts) == sorted(
            [(1, 2, period), (3, 4, 5, period), (6, period), (7, 8, period)]
        )
        seen.add(parts)
    assert len(seen) > 5


def test_shift_tokens_right_as_hf(transformers):
    import torch
    from transformers.models.bart.modeling_bart import shift_tokens_right

    labels = np.array([[5, 6, 7, -100], [8, 9, -100, -100]])
    ours = C.shift_tokens_right(labels, pad_token_id=1, decoder_start_token_id=2)
    theirs = shift_tokens_right(torch.tensor(labels), 1, 2).numpy()
    np.testing.assert_array_equal(ours, theirs)


def test_bart_denoising_batch_shapes():
    seqs = [np.arange(10, 30), np.arange(40, 52)]
    b = C.bart_denoising_batch(seqs, 0, 2, 1, 3, 2, sentence_end_ids=[15], generator=0)
    assert (
        b["labels"][0, 0] == 0 and b["labels"][0, 21] == 2 and (b["labels"][1, 14:] == -100).all()
    )
    np.testing.assert_array_equal(b["decoder_input_ids"][:, 0], [2, 2])
    assert (b["input_ids"] == 3).any()
    assert b["attention_mask"].sum(1).tolist() == [(r != 1).sum() for r in b["input_ids"]]


def test_bad_inputs_raise_clearly():
    with pytest.raises(TypeError, match="integers"):
        C.mask_tokens(np.zeros((2, 3)), 3, 10)
    with pytest.raises(ValueError, match="two documents"):
        C.nsp_pairs([[[1, 2]]], 10, 101, 102)
