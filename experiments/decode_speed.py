"""Decode tokens/s of a tiny GPT with and without a KV cache, per attention variant.

Without a cache every new token re-runs the whole sequence (O(T²) work per sequence for the
projections, O(T³) for attention); with one, only the new token goes through the model.

    python -m experiments.decode_speed [--out runs/experiments] [--new-tokens 48]
"""

from __future__ import annotations

import time

from tinytensor.models.gpt import GPT, GPTConfig

import tinytensor as tt
from tinytensor import nn

from .common import parse_args, save_text, table


def decode(model, prompt, n_new, use_cache):
    ids = prompt
    cache = nn.KVCache() if use_cache else None
    step = ids
    with tt.no_grad():
        for _ in range(n_new):
            logits = model(step, cache=cache).logits
            next_id = logits[:, -1].argmax(-1, keepdim=True)
            ids = tt.cat([ids, next_id], dim=1)
            step = next_id if use_cache else ids
    return ids


def main():
    args = parse_args(__doc__.splitlines()[0], new_tokens=(int, 48, "tokens to generate"))
    rows = []
    for kind in ("mha", "gqa", "mla", "sliding", "linear"):
        tt.manual_seed(0)
        config = GPTConfig(
            vocab_size=256, block_size=256, n_layer=4, n_head=4, n_embd=128, dropout=0.0,
            attention=kind, n_kv_heads=2 if kind in ("gqa", "sliding") else None, window=16,
        )  # fmt: skip
        model = GPT(config).eval()
        prompt = tt.randint(0, 256, (1, 16))
        timings, outputs = {}, {}
        for use_cache in (False, True):
            decode(model, prompt, 2, use_cache)  # warm-up: first-call costs are not decoding
            start = time.perf_counter()
            outputs[use_cache] = decode(model, prompt, args.new_tokens, use_cache).numpy()
            timings[use_cache] = args.new_tokens / (time.perf_counter() - start)
        same = (outputs[False] == outputs[True]).all()
        rows.append(
            [kind, f"{timings[False]:.0f}", f"{timings[True]:.0f}",
             f"{timings[True] / timings[False]:.1f}x", "yes" if same else "NO"]
        )  # fmt: skip
    text = (
        f"Greedy decode, tiny GPT (4 layers, d=128, 4 heads), prompt 16, {args.new_tokens} new "
        "tokens, batch 1, float32, CPU\n"
        + table(["variant", "tok/s no cache", "tok/s cache", "speed-up", "same tokens"], rows)
    )
    print(text)
    print("wrote", save_text(args.out, "decode_speed.txt", text))


if __name__ == "__main__":
    main()
