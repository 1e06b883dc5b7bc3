"""Pretraining objectives as data collators: NumPy in, NumPy out (token ids, never tensors).

Each function turns token ids into a model's inputs and labels, as its paper prescribes:

- `causal_lm_targets`: GPT's next-token targets (Radford et al., 2019).
- `mask_tokens`: BERT's masked LM, 15% of the tokens selected, of those 80% -> [MASK],
  10% -> a random token, 10% kept (Devlin et al., 2019); `nsp_pairs`: next-sentence pairs.
- `span_corruption`: T5's objective (Raffel et al., 2020): spans of mean length 3 covering 15%
  of the tokens become sentinels extra_id_0, extra_id_1, ... (ids descending from the vocabulary's
  end, as HF's tokenizer numbers them); the targets list the dropped spans after their sentinels.
- `text_infilling` and `permute_sentences`: BART's noising (Lewis et al., 2020): spans with
  Poisson(3) lengths are each replaced by one <mask> (a 0-length span inserts one), and the
  sentences are shuffled; `bart_denoising_batch` assembles a batch.
- `shift_tokens_right`: decoder inputs from labels (teacher forcing), as HF.

Labels use -100 for "no loss here", as `cross_entropy(ignore_index=-100)` expects.
"""

from __future__ import annotations

import math

import numpy as np

IGNORE_INDEX = -100


def _rng(generator) -> np.random.Generator:
    """A NumPy Generator from None (tinytensor's global one), a seed, or a tt/np Generator."""
    if generator is None:
        from tinytensor.random import default_generator

        return default_generator.rng
    if isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, (int, np.integer)):
        return np.random.default_rng(int(generator))
    if hasattr(generator, "rng"):
        return generator.rng
    raise TypeError(f"expected a seed or a Generator, got {type(generator).__name__}")


def _as_ids(input_ids, op) -> np.ndarray:
    ids = np.asarray(getattr(input_ids, "_array", input_ids))
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{op}: token ids must be integers, got {ids.dtype}")
    return ids.astype(np.int64)


# ---- GPT ----------------------------------------------------------------------------------------


def causal_lm_targets(input_ids, attention_mask=None, ignore_index=IGNORE_INDEX) -> np.ndarray:
    """targets[b, t] = input_ids[b, t + 1]; the last position and padding get `ignore_index`.

    Shape: (B, T) -> (B, T). A target is ignored where the next token is padding and where the
    current one is (predicting from a pad, e.g. the first token of a left-padded row, is noise).
    """
    ids = _as_ids(input_ids, "causal_lm_targets")
    if ids.ndim != 2:
        raise ValueError(f"causal_lm_targets: input_ids must be (B, T), got {ids.shape}")
    targets = np.full_like(ids, ignore_index)
    targets[:, :-1] = ids[:, 1:]
    if attention_mask is not None:
        keep = np.asarray(getattr(attention_mask, "_array", attention_mask)).astype(bool)
        targets[:, :-1][~(keep[:, 1:] & keep[:, :-1])] = ignore_index
    return targets


# ---- BERT ---------------------------------------------------------------------------------------


def mask_tokens(
    input_ids,
    mask_token_id: int,
    vocab_size: int,
    special_token_ids=(),
    mlm_probability: float = 0.15,
    generator=None,
):
    """BERT's masked-LM corruption. Returns (inputs, labels), both (B, T) int64.

    Each non-special token is selected with probability `mlm_probability`; a selected token is
    replaced by [MASK] with probability 0.8, by a uniformly random token with 0.1 and kept with
    0.1. labels hold the original id at selected positions and -100 elsewhere (as HF's
    DataCollatorForLanguageModeling).
    """
    if not 0.0 <= mlm_probability <= 1.0:
        raise ValueError(f"mask_tokens: mlm_probability must be in [0, 1], got {mlm_probability}")
    rng = _rng(generator)
    ids = _as_ids(input_ids, "mask_tokens")
    special = np.isin(ids, np.asarray(list(special_token_ids), dtype=np.int64))
    selected = (rng.random(ids.shape) < mlm_probability) & ~special
    labels = np.where(selected, ids, IGNORE_INDEX)
    roll = rng.random(ids.shape)
    to_mask = selected & (roll < 0.8)
    to_random = selected & (roll >= 0.8) & (roll < 0.9)
    inputs = ids.copy()
    inputs[to_mask] = mask_token_id
    inputs[to_random] = rng.integers(0, vocab_size, size=int(to_random.sum()))
    return inputs, labels


def _truncate_pair(a: list, b: list, max_tokens: int) -> None:
    """Drops tokens from the end of the longer sentence until both fit (as BERT's pretraining)."""
    while len(a) + len(b) > max_tokens:
        (a if len(a) > len(b) else b).pop()


def nsp_pairs(
    documents,
    max_length: int,
    cls_token_id: int,
    sep_token_id: int,
    pad_token_id: int = 0,
    generator=None,
) -> dict:
    """Next-sentence-prediction examples: `[CLS] A [SEP] B [SEP]`, one per consecutive pair.

    Args:
        documents: a list of documents, each a list of sentences (lists of token ids). Needs at
            least two documents, so that a random B comes from another one.
        max_length: total length including the three special tokens; rows are padded to it.
    Returns:
        dict of (N, max_length) int64 arrays `input_ids`, `token_type_ids` (0 for A, 1 for B),
        `attention_mask`, and `next_sentence_label` (N,): 0 when B follows A, 1 when B is a
        random sentence of another document (HF's convention), each with probability 1/2.
    """
    if len(documents) < 2:
        raise ValueError("nsp_pairs: needs at least two documents to draw random sentences from")
    if max_length < 5:
        raise ValueError(f"nsp_pairs: max_length must be at least 5, got {max_length}")
    rng = _rng(generator)
    rows, types, labels = [], [], []
    for d, doc in enumerate(documents):
        for i in range(len(doc) - 1):
            a = list(doc[i])
            if rng.random() < 0.5:
                b, label = list(doc[i + 1]), 0
            else:
                other = rng.choice([j for j in range(len(documents)) if j != d])
                sentences = documents[other]
                b, label = list(sentences[rng.integers(len(sentences))]), 1
            _truncate_pair(a, b, max_length - 3)
            rows.append([cls_token_id, *a, sep_token_id, *b, sep_token_id])
            types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
            labels.append(label)
    n = len(rows)
    input_ids = np.full((n, max_length), pad_token_id, dtype=np.int64)
    token_type_ids = np.zeros((n, max_length), dtype=np.int64)
    attention_mask = np.zeros((n, max_length), dtype=np.int64)
    for r, (row, tt_row) in enumerate(zip(rows, types)):
        input_ids[r, : len(row)] = row
        token_type_ids[r, : len(row)] = tt_row
        attention_mask[r, : len(row)] = 1
    return {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "next_sentence_label": np.asarray(labels, dtype=np.int64),
    }


# ---- T5 -----------------------------------------------------------------------------------------


def random_spans_noise_mask(
    length: int, noise_density=0.15, mean_noise_span_length=3.0, generator=None
) -> np.ndarray:
    """A bool (length,) mask of noise tokens forming spans, as T5's reference code.

    Exactly round(length·density) tokens are noise, in round(noise / mean_span) spans that
    alternate with non-noise spans (the sequence starts with non-noise); span lengths are a
    uniformly random composition of those counts.
    """
    rng = _rng(generator)
    num_noise = int(np.round(length * noise_density))
    num_noise = min(max(num_noise, 1), length - 1)  # at least one noise and one kept token
    num_nonnoise = length - num_noise
    num_spans = int(np.round(num_noise / mean_noise_span_length))
    num_spans = max(min(num_spans, num_noise, num_nonnoise), 1)  # short rows: fewer spans

    def segment(num_items, num_segments):
        # a random composition of num_items into num_segments positive parts
        cuts = np.sort(rng.choice(np.arange(1, num_items), num_segments - 1, replace=False))
        return np.diff(np.concatenate([[0], cuts, [num_items]]))

    noise_lengths = segment(num_noise, num_spans)
    nonnoise_lengths = segment(num_nonnoise, num_spans)
    interleaved = np.stack([nonnoise_lengths, noise_lengths], axis=1).reshape(-1)
    starts = np.cumsum(interleaved)[:-1]
    span_start = np.zeros(length, dtype=np.int64)
    span_start[starts] = 1
    span_num = np.cumsum(span_start)
    return span_num % 2 == 1


def span_corruption(
    input_ids,
    vocab_size: int,
    eos_token_id: int,
    noise_density=0.15,
    mean_noise_span_length=3.0,
    generator=None,
):
    """T5's span corruption on rows of equal length. Returns (inputs, labels), both int64.

    Each noise span in a row is replaced by one sentinel; the k-th span of a row gets
    extra_id_k = vocab_size - 1 - k (HF's T5 numbering: extra_id_0 is the last id). labels are
    the sentinels each followed by the tokens they replaced; both end with `eos_token_id`.
    Shapes: (B, L) -> inputs (B, L - noise + spans + 1), labels (B, noise + spans + 1), where
    noise and spans are the same for every row (they depend on L only).
    """
    rng = _rng(generator)
    ids = _as_ids(input_ids, "span_corruption")
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"span_corruption: input_ids must be (B, L) with L >= 2, got {ids.shape}")
    inputs, labels = [], []
    for row in ids:
        noise = random_spans_noise_mask(len(row), noise_density, mean_noise_span_length, rng)
        inputs.append(_replace_spans_with_sentinels(row, noise, vocab_size, eos_token_id))
        labels.append(_replace_spans_with_sentinels(row, ~noise, vocab_size, eos_token_id))
    return np.stack(inputs), np.stack(labels)


def _replace_spans_with_sentinels(row, mask, vocab_size, eos_token_id):
    """Keeps row[~mask]; each run of masked tokens becomes one sentinel, numbered by run."""
    starts = mask & ~np.concatenate([[False], mask[:-1]])
    sentinel = vocab_size - np.cumsum(starts)  # first run -> vocab_size - 1
    out = np.where(starts, sentinel, row)[~mask | starts]
    return np.concatenate([out, [eos_token_id]]).astype(np.int64)


# ---- BART ---------------------------------------------------------------------------------------


def text_infilling(
    tokens, mask_token_id: int, mask_ratio=0.3, poisson_lambda=3.0, generator=None
) -> np.ndarray:
    """BART's text infilling on one sequence (without BOS/EOS): spans -> one <mask> each.

    Span lengths are drawn from Poisson(λ) until they cover ceil(ratio·len) tokens (the last is
    cut to fit); the spans are placed at random without overlapping. A 0-length span inserts a
    <mask> without removing anything.
    """
    rng = _rng(generator)
    tokens = _as_ids(tokens, "text_infilling").reshape(-1)
    n = len(tokens)
    budget = math.ceil(n * mask_ratio)
    lengths = []
    while sum(lengths) < budget:
        lengths.append(int(rng.poisson(poisson_lambda)))
    if lengths:
        lengths[-1] -= sum(lengths) - budget
    k = len(lengths)
    # NOTE: a uniform placement of k non-overlapping spans: choose k of the n - covered + k
    # "gap or span" slots; span i then starts after the kept tokens before its slot.
    slots = np.sort(rng.choice(n - budget + k, k, replace=False)) if k else np.zeros(0, int)
    out, cursor, covered = [], 0, 0
    for i, (slot, length) in enumerate(zip(slots, lengths)):
        start = int(slot) - i + covered
        out.extend(tokens[cursor:start])
        out.append(mask_token_id)
        cursor = start + length
        covered += length
    out.extend(tokens[cursor:])
    return np.asarray(out, dtype=np.int64)


def permute_sentences(tokens, sentence_end_ids, generator=None) -> np.ndarray:
    """Splits after each token in `sentence_end_ids` (e.g. the id of ".") and shuffles the parts."""
    rng = _rng(generator)
    tokens = _as_ids(tokens, "permute_sentences").reshape(-1)
    ends = np.flatnonzero(np.isin(tokens, np.asarray(list(sentence_end_ids), dtype=np.int64)))
    bounds = np.concatenate([[0], ends + 1, [len(tokens)]])
    sentences = [tokens[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    order = rng.permutation(len(sentences))
    return np.concatenate([sentences[i] for i in order]) if sentences else tokens.copy()


def shift_tokens_right(labels, pad_token_id: int, decoder_start_token_id: int) -> np.ndarray:
    """Decoder inputs for teacher forcing: [start, y0, y1, ...], with -100 replaced by pad."""
    ids = _as_ids(labels, "shift_tokens_right")
    shifted = np.empty_like(ids)
    shifted[..., 1:] = ids[..., :-1]
    shifted[..., 0] = decoder_start_token_id
    shifted[shifted == IGNORE_INDEX] = pad_token_id
    return shifted


def bart_denoising_batch(
    sequences,
    bos_token_id: int,
    eos_token_id: int,
    pad_token_id: int,
    mask_token_id: int,
    decoder_start_token_id: int,
    sentence_end_ids=(),
    mask_ratio=0.3,
    poisson_lambda=3.0,
    generator=None,
) -> dict:
    """A BART pretraining batch from token sequences (without specials).

    The encoder sees `<s> noised </s>` (sentences permuted if `sentence_end_ids` is given, then
    text infilling); the labels are `<s> original </s>` padded with -100, and the decoder inputs
    `shift_tokens_right(labels)`. Returns int64 arrays input_ids, attention_mask, labels,
    decoder_input_ids, decoder_attention_mask.
    """
    rng = _rng(generator)
    sources, targets = [], []
    for seq in sequences:
        seq = _as_ids(seq, "bart_denoising_batch").reshape(-1)
        noised = permute_sentences(seq, sentence_end_ids, rng) if sentence_end_ids else seq
        noised = text_infilling(noised, mask_token_id, mask_ratio, poisson_lambda, rng)
        sources.append(np.concatenate([[bos_token_id], noised, [eos_token_id]]))
        targets.append(np.concatenate([[bos_token_id], seq, [eos_token_id]]))

    def pad(rows, value):
        out = np.full((len(rows), max(len(r) for r in rows)), value, dtype=np.int64)
        mask = np.zeros_like(out)
        for i, r in enumerate(rows):
            out[i, : len(r)], mask[i, : len(r)] = r, 1
        return out, mask

    input_ids, attention_mask = pad(sources, pad_token_id)
    labels, decoder_attention_mask = pad(targets, IGNORE_INDEX)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels,
        "decoder_input_ids": shift_tokens_right(labels, pad_token_id, decoder_start_token_id),
        "decoder_attention_mask": decoder_attention_mask,
    }
