"""Text generation: next-token choice (greedy, temperature, top-k, top-p) and decoding loops.

`next_tokens` picks one token per row from the last position's logits. The loops call a model
through a small protocol, so every architecture shares them:

- decoder-only (GPT): `model(ids, attention_mask=..., cache=...)` returns an output with
  `logits` (B, T, V).
- encoder-decoder (T5, BART): `model.encode(input_ids, attention_mask)` once, then
  `model.decode(decoder_ids, encoder_output, attention_mask, cache)` per step, returning the
  same kind of output.

With `use_cache=True` only the newest token goes through the model at each step: the keys and
values of earlier ones wait in an `nn.KVCache`, which the model fills in place. The tokens are
exactly those of `use_cache=False`, which re-runs the whole sequence each step (tested).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

import tinytensor as tt

from .collators import _rng

# ---- choosing the next token --------------------------------------------------------------------


def check_sampling(
    fn: str, temperature=1.0, top_k=None, top_p=None, max_new_tokens=0, num_beams=1
) -> None:
    """Raises a ValueError/TypeError naming `fn`, the argument and the value for a setting no
    sampler can use: temperature must be a finite number >= 0 (0 is greedy decoding), top_k a
    positive int, top_p in (0, 1], max_new_tokens an int >= 0, num_beams an int >= 1."""

    def is_int(v):
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"{fn}: temperature must be a number, got {temperature!r}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(
            f"{fn}: temperature must be a finite number >= 0 (0: greedy), got {temperature}"
        )
    if top_k is not None and not (is_int(top_k) and top_k > 0):
        raise ValueError(f"{fn}: top_k must be a positive int or None, got {top_k!r}")
    if top_p is not None:
        if isinstance(top_p, bool) or not isinstance(top_p, numbers.Real) or not 0 < top_p <= 1:
            raise ValueError(f"{fn}: top_p must be in (0, 1] or None, got {top_p!r}")
    if not (is_int(max_new_tokens) and max_new_tokens >= 0):
        raise ValueError(f"{fn}: max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if not (is_int(num_beams) and num_beams >= 1):
        raise ValueError(f"{fn}: num_beams must be a positive int, got {num_beams!r}")


def top_k_filter(logits: np.ndarray, k: int) -> np.ndarray:
    """Keeps the k largest logits of each row, sets the others to -inf. Shape (B, V)."""
    if k <= 0:
        raise ValueError(f"top_k must be positive, got {k}")
    k = min(k, logits.shape[-1])
    kth = np.sort(logits, axis=-1)[:, -k][:, None]
    return np.where(logits < kth, -np.inf, logits)


def top_p_filter(logits: np.ndarray, p: float) -> np.ndarray:
    """Nucleus filtering: keeps the smallest set of most likely tokens whose probability
    reaches p (always at least the most likely one), as HF's TopPLogitsWarper. Shape (B, V)."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {p}")
    order = np.argsort(-logits, axis=-1, kind="stable")
    sorted_logits = np.take_along_axis(logits, order, axis=-1)
    probs = _softmax(sorted_logits)
    # a token is dropped when the tokens strictly more likely already reach p
    before = np.cumsum(probs, axis=-1) - probs
    drop_sorted = before >= p
    drop = np.zeros_like(drop_sorted)
    np.put_along_axis(drop, order, drop_sorted, axis=-1)
    return np.where(drop, -np.inf, logits)


def _softmax(x: np.ndarray) -> np.ndarray:
    # NOTE: subtract the row max (rows of -inf except the max stay finite)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def next_tokens(
    logits, do_sample=False, temperature=1.0, top_k=None, top_p=None, generator=None
) -> np.ndarray:
    """One token id per row from the logits of the last position, (B, V) -> (B,) int64.

    Greedy (argmax) unless `do_sample`; when sampling, the logits are divided by `temperature`,
    then filtered by `top_k` and `top_p`, and a token is drawn from the softmax. Temperature 0
    is the limit of that: greedy decoding.
    """
    check_sampling("next_tokens", temperature, top_k, top_p)
    logits = np.asarray(getattr(logits, "_array", logits), dtype=np.float64)
    if hasattr(logits, "get"):  # a CuPy array: sampling happens on the host
        logits = logits.get()
    if logits.ndim != 2:
        raise ValueError(f"next_tokens: logits must be (B, V), got {logits.shape}")
    if not do_sample or temperature == 0:
        return logits.argmax(axis=-1).astype(np.int64)
    logits = logits / temperature
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = _softmax(logits)
    rng = _rng(generator)
    u = rng.random((logits.shape[0], 1))
    # inverse CDF sampling; the clip guards against cumsum ending a hair below 1
    return np.minimum((np.cumsum(probs, axis=-1) < u).sum(axis=-1), logits.shape[-1] - 1).astype(
        np.int64
    )


# ---- loops --------------------------------------------------------------------------------------


def _ids_array(x, name) -> np.ndarray:
    a = np.asarray(x.numpy() if isinstance(x, tt.Tensor) else x)
    if a.ndim == 1:
        a = a[None]
    if a.ndim != 2 or a.dtype.kind not in "iu":
        raise ValueError(f"generate: {name} must be (B, T) integer ids, got {a.shape} {a.dtype}")
    return a.astype(np.int64)


def _check_eos(eos_token_id):
    if eos_token_id is None:
        return None
    ids = [eos_token_id] if np.isscalar(eos_token_id) else list(eos_token_id)
    return np.asarray(ids, dtype=np.int64)


def positions_from_mask(mask: np.ndarray) -> np.ndarray:
    """Position of every token of left-padded rows, as HF's generate: the count of real tokens
    before it, cumsum(mask) - 1, and 0 at padding (whose outputs nobody reads). (B, T) ints."""
    return np.maximum(np.cumsum(mask, axis=1) - 1, 0) * (mask != 0)


@tt.no_grad()
def generate_decoder_only(
    model,
    input_ids,
    max_new_tokens: int,
    attention_mask=None,
    do_sample=False,
    temperature=1.0,
    top_k=None,
    top_p=None,
    eos_token_id=None,
    pad_token_id=None,
    use_cache=True,
    generator=None,
):
    """Continues each row of `input_ids` by up to `max_new_tokens` tokens. Returns (B, T + n).

    A row stops after it emits `eos_token_id` (an int or a list); it is then filled with
    `pad_token_id` (default: the eos id) until every row has stopped or n tokens are made.
    Left-padded prompts need their `attention_mask` (1 = token, 0 = padding); the model then
    gets `position_ids` = cumsum(mask) - 1 too (`positions_from_mask`), so that a padded row
    continues as it would alone (HF's generate does the same).
    """
    check_sampling("generate", temperature, top_k, top_p, max_new_tokens)
    ids = _ids_array(input_ids, "input_ids")
    mask = None if attention_mask is None else _ids_array(attention_mask, "attention_mask")
    eos = _check_eos(eos_token_id)
    pad = int(pad_token_id if pad_token_id is not None else (eos[0] if eos is not None else 0))
    device = next(model.parameters()).device
    done = np.zeros(len(ids), dtype=bool)
    cache = tt.nn.KVCache() if use_cache else None
    fresh = ids
    for _ in range(max_new_tokens):
        step_ids = fresh if use_cache else ids
        kwargs = {}
        if mask is not None:
            kwargs["attention_mask"] = tt.tensor(mask, device=device)
            positions = positions_from_mask(mask)[:, -step_ids.shape[1] :]
            kwargs["position_ids"] = tt.tensor(positions, device=device)
        out = model(tt.tensor(step_ids, device=device), cache=cache, **kwargs)
        token = next_tokens(out.logits[:, -1, :], do_sample, temperature, top_k, top_p, generator)
        token = np.where(done, pad, token)
        ids = np.concatenate([ids, token[:, None]], axis=1)
        fresh = token[:, None]
        if mask is not None:
            mask = np.concatenate([mask, np.ones((len(ids), 1), dtype=np.int64)], axis=1)
        if eos is not None:
            done |= np.isin(token, eos)
            if done.all():
                break
    return tt.tensor(ids)


@tt.no_grad()
def generate_encoder_decoder(
    model,
    input_ids,
    max_new_tokens: int,
    attention_mask=None,
    decoder_start_token_id=None,
    do_sample=False,
    temperature=1.0,
    top_k=None,
    top_p=None,
    num_beams=1,
    length_penalty=1.0,
    eos_token_id=None,
    pad_token_id=None,
    use_cache=True,
    generator=None,
):
    """Encodes `input_ids` once, then decodes up to `max_new_tokens` tokens per row.

    Returns the decoder ids (B, 1 + n), starting with `decoder_start_token_id` (default: the
    model config's). `num_beams > 1` runs beam search (deterministic; `do_sample` must be False).
    """
    check_sampling("generate", temperature, top_k, top_p, max_new_tokens, num_beams)
    ids = _ids_array(input_ids, "input_ids")
    mask = None if attention_mask is None else _ids_array(attention_mask, "attention_mask")
    config = model.config
    start = (
        config.decoder_start_token_id if decoder_start_token_id is None else decoder_start_token_id
    )
    eos = _check_eos(config.eos_token_id if eos_token_id is None else eos_token_id)
    pad = int(config.pad_token_id if pad_token_id is None else pad_token_id)
    device = next(model.parameters()).device
    src = tt.tensor(ids, device=device)
    src_mask = None if mask is None else tt.tensor(mask, device=device)
    encoder_output = model.encode(src, src_mask)
    if num_beams > 1:
        if do_sample:
            raise ValueError("generate: beam search is deterministic; use do_sample=False")
        return _beam_search(
            model, encoder_output, src_mask, len(ids), start, eos, pad, max_new_tokens,
            num_beams, length_penalty, use_cache, device,
        )  # fmt: skip
    out_ids = np.full((len(ids), 1), start, dtype=np.int64)
    done = np.zeros(len(ids), dtype=bool)
    cache = tt.nn.KVCache() if use_cache else None
    for step in range(max_new_tokens):
        step_ids = out_ids[:, -1:] if (use_cache and step > 0) else out_ids
        out = model.decode(tt.tensor(step_ids, device=device), encoder_output, src_mask, cache)
        token = next_tokens(out.logits[:, -1, :], do_sample, temperature, top_k, top_p, generator)
        token = np.where(done, pad, token)
        out_ids = np.concatenate([out_ids, token[:, None]], axis=1)
        if eos is not None:
            done |= np.isin(token, eos)
            if done.all():
                break
    return tt.tensor(out_ids)


def reorder_cache(past, index: np.ndarray):
    """Selects batch rows `index` of every tensor in a (nested) KV cache (beam search)."""
    if past is None:
        return None
    if hasattr(past, "reorder"):  # nn.KVCache: reordered in place
        past.reorder(index)
        return past
    if isinstance(past, tt.Tensor):
        return past[tt.tensor(index, device=past.device)]
    if isinstance(past, (list, tuple)):
        return type(past)(reorder_cache(p, index) for p in past)
    if isinstance(past, dict):
        return {k: reorder_cache(v, index) for k, v in past.items()}
    raise TypeError(f"reorder_cache: cannot reorder a {type(past).__name__}")


def _beam_search(
    model, encoder_output, src_mask, batch, start, eos, pad, max_new_tokens, num_beams,
    length_penalty, use_cache, device,
):  # fmt: skip
    """Beam search as HF's: scores are sums of log-probs; a finished hypothesis is ranked by
    score / length**length_penalty; a row stops when its best finished hypothesis cannot be
    beaten (or after max_new_tokens). Returns the best hypothesis per row, padded."""
    expand = np.repeat(np.arange(batch), num_beams)  # (B·beams,) encoder row of each beam
    enc = reorder_cache(encoder_output, expand)
    enc_mask = None if src_mask is None else src_mask[tt.tensor(expand, device=device)]
    seqs = np.full((batch * num_beams, 1), start, dtype=np.int64)
    scores = np.zeros((batch, num_beams))
    scores[:, 1:] = -np.inf  # at the start all beams are equal: keep one
    finished = [[] for _ in range(batch)]  # (normalized score, ids) per row
    row_done = np.zeros(batch, dtype=bool)
    cache = tt.nn.KVCache() if use_cache else None
    for step in range(max_new_tokens):
        step_ids = seqs[:, -1:] if (use_cache and step > 0) else seqs
        out = model.decode(tt.tensor(step_ids, device=device), enc, enc_mask, cache)
        logits = out.logits[:, -1, :].numpy().astype(np.float64)
        logp = logits - logits.max(-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
        vocab = logp.shape[-1]
        # (B·beams, 1) + (B·beams, V) -> (B, beams·V): one ranking per row over all beams
        total = (scores.reshape(-1, 1) + logp).reshape(batch, num_beams * vocab)
        top = np.argsort(-total, axis=-1, kind="stable")[:, : 2 * num_beams]
        new_beam = np.zeros((batch, num_beams), dtype=np.int64)
        new_token = np.full((batch, num_beams), pad, dtype=np.int64)
        new_scores = np.full((batch, num_beams), -np.inf)
        for b in range(batch):
            if row_done[b]:
                new_beam[b] = np.arange(num_beams)
                continue
            k = 0
            for flat in top[b]:
                beam, token = divmod(int(flat), vocab)
                score = total[b, flat]
                if eos is not None and token in eos:
                    length = seqs.shape[1]  # generated tokens, counting eos (as HF)
                    hyp = np.append(seqs[b * num_beams + beam], token)
                    finished[b].append((score / length**length_penalty, hyp))
                    continue
                new_beam[b, k], new_token[b, k], new_scores[b, k] = beam, token, score
                k += 1
                if k == num_beams:
                    break
            finished[b] = sorted(finished[b], key=lambda h: -h[0])[:num_beams]
            if len(finished[b]) == num_beams:
                best_possible = new_scores[b].max() / seqs.shape[1] ** length_penalty
                row_done[b] = finished[b][-1][0] >= best_possible
        index = (np.arange(batch)[:, None] * num_beams + new_beam).reshape(-1)  # (B·beams,)
        seqs = np.concatenate([seqs[index], new_token.reshape(-1, 1)], axis=1)  # (B·beams, L+1)
        scores = new_scores
        cache = reorder_cache(cache, index)
        if row_done.all():
            break
    results = []
    for b in range(batch):
        candidates = list(finished[b])
        if not row_done[b]:  # open beams compete too when the length limit ends the search
            for j in range(num_beams):
                if np.isfinite(scores[b, j]):
                    length = seqs.shape[1] - 1
                    candidates.append(
                        (scores[b, j] / length**length_penalty, seqs[b * num_beams + j])
                    )
        results.append(max(candidates, key=lambda h: h[0])[1])
    width = max(len(r) for r in results)
    out_ids = np.full((batch, width), pad, dtype=np.int64)
    for b, r in enumerate(results):
        out_ids[b, : len(r)] = r
    return tt.tensor(out_ids)
