"""KV cache size per token and per context length for every attention variant, formula vs
measured (the arrays' nbytes after a prefill), plus a paged cache vs a contiguous one.

    python -m experiments.kv_cache_size [--out runs/experiments]
"""

from __future__ import annotations

import numpy as np
from tinytensor.models.gpt import GPT, GPTConfig
from tinytensor.nn import variants as V
from tinytensor.nn.paged_kv_cache import PagedKVCache

import tinytensor as tt
from tinytensor import nn

from .common import parse_args, save_text, table

LAYERS, HEADS, WIDTH, KV_HEADS, LATENT, ROPE, WINDOW = 2, 8, 128, 2, 32, 8, 64
D_HEAD, BYTES = WIDTH // HEADS, 4  # float32


def numbers_per_token(kind, t):
    """Cached numbers per layer for a sequence of t tokens (batch 1)."""
    if kind == "mha":
        return 2 * HEADS * D_HEAD * t
    if kind == "gqa":
        return 2 * KV_HEADS * D_HEAD * t
    if kind == "mqa":
        return 2 * D_HEAD * t
    if kind == "mla":
        return (LATENT + ROPE) * t
    if kind == "sliding":
        return 2 * KV_HEADS * D_HEAD * WINDOW  # the ring: w slots whatever t is
    return HEADS * (D_HEAD * D_HEAD + D_HEAD)  # linear: the state (S, z)


FORMULAS = {
    "mha": "2·L·T·H·d_h",
    "gqa": "2·L·T·H_kv·d_h",
    "mqa": "2·L·T·d_h",
    "mla": "L·T·(d_c+d_R)",
    "sliding": "2·L·min(T,w)·H_kv·d_h (ring: w)",
    "linear": "L·H·(d_h²+d_h)",
}


def measured_bytes(kind, t):
    tt.manual_seed(0)
    config = GPTConfig(
        vocab_size=64, block_size=1024, n_layer=LAYERS, n_head=HEADS, n_embd=WIDTH,
        dropout=0.0, attention=kind, n_kv_heads=KV_HEADS if kind in ("gqa", "sliding") else None,
        kv_latent_dim=LATENT, rope_dim=ROPE, window=WINDOW,
        position="rope" if kind in ("mla", "sliding") else "learned",
    )  # fmt: skip
    model = GPT(config).eval()
    cache = nn.KVCache()
    with tt.no_grad():
        model(tt.randint(0, 64, (1, t)), cache=cache)
    return V.cache_nbytes(cache)


def paged_report():
    rng = np.random.default_rng(0)
    max_len, block = 512, 16
    lengths = rng.integers(10, max_len, size=8)
    cache = PagedKVCache(num_blocks=512, block_size=block, n_kv_heads=KV_HEADS, d_head=D_HEAD)
    for i, n in enumerate(lengths):
        cache.add_sequence(i)
        cache.append(i, np.zeros((KV_HEADS, n, D_HEAD)), np.zeros((KV_HEADS, n, D_HEAD)))
    used, reserved = cache.nbytes_used(), cache.contiguous_nbytes(len(lengths), max_len)
    per_position = 2 * KV_HEADS * D_HEAD * 4
    exact = int(lengths.sum()) * per_position
    shared = PagedKVCache(num_blocks=512, block_size=block, n_kv_heads=KV_HEADS, d_head=D_HEAD)
    shared.add_sequence("prompt")
    shared.append("prompt", np.zeros((KV_HEADS, 256, D_HEAD)), np.zeros((KV_HEADS, 256, D_HEAD)))
    for i in range(8):  # 8 samples of one 256-token prompt, 32 new tokens each
        shared.fork("prompt", i)
        shared.append(i, np.zeros((KV_HEADS, 32, D_HEAD)), np.zeros((KV_HEADS, 32, D_HEAD)))
    rows = [
        ["8 seqs, lengths 10..511, contiguous @512", reserved, "1.00"],
        [f"  paged (block {block})", used, f"{used / reserved:.2f}"],
        ["  exact sum of lengths", exact, f"{exact / reserved:.2f}"],
        ["8 samples of a 256-token prompt (+32), contiguous", 8 * 288 * per_position, "1.00"],
        ["  paged, prompt blocks shared", shared.nbytes_used(),
         f"{shared.nbytes_used() / (8 * 288 * per_position):.2f}"],
    ]  # fmt: skip
    return table(["one layer, H_kv=2, d_h=16, float32", "bytes", "ratio"], rows)


def main():
    args = parse_args(__doc__.splitlines()[0])
    lengths = (64, 256, 512)
    rows = []
    for kind in V.ATTENTION_KINDS:
        row = [kind, FORMULAS[kind], numbers_per_token(kind, 1) * BYTES * LAYERS]
        for t in lengths:
            formula = numbers_per_token(kind, t) * BYTES * LAYERS
            measured = measured_bytes(kind, t)
            row += [formula, measured]
        row.append(f"{numbers_per_token(kind, 512) / numbers_per_token('mha', 512):.3f}")
        rows.append(row)
    headers = ["variant", "formula (numbers)", "B/token"]
    for t in lengths:
        headers += [f"T={t} formula", f"T={t} measured"]
    headers.append("vs MHA @512")
    text = (
        f"KV cache bytes, batch 1, L={LAYERS} layers, H={HEADS}, d_h={D_HEAD}, H_kv={KV_HEADS}, "
        f"d_c={LATENT}, d_R={ROPE}, w={WINDOW}, float32\n"
        "(B/token: cost of a 1-token cache; sliding holds w slots, linear a fixed state)\n"
        + table(headers, rows)
        + "\n\nPaged vs contiguous KV cache\n"
        + paged_report()
    )
    print(text)
    print("wrote", save_text(args.out, "kv_cache_size.txt", text))


if __name__ == "__main__":
    main()
