"""Explore a small GPT's loss in the browser: fold and unfold its modules, click any tensor for
its values and gradient, and step through backward one VJP at a time.

    python examples/explore_gpt.py                       # writes runs/explore/gpt.html
    python examples/explore_gpt.py --n-layer 48 --out runs/explore/gpt48.html
    python -m tinytensor.explore examples/explore_gpt.py  # the same page, through the CLI

The page is one self-contained HTML file: open it in any browser, offline. The model reads a
short line of text character by character and predicts the next one; `tt.explore(loss,
params=model)` records the graph, runs the real backward, and writes the page.
"""

from __future__ import annotations

import argparse
import sys

from tinytensor.models import GPT, GPTConfig

import tinytensor as tt

TEXT = "to be, or not to be, that is the question"


def build(n_layer: int = 2, n_embd: int = 32, seed: int = 0):
    """(model, loss): a character-level GPT's next-character loss on TEXT."""
    tt.manual_seed(seed)
    vocab = sorted(set(TEXT))
    ids = tt.tensor([[vocab.index(c) for c in TEXT]])  # (1, T)
    config = GPTConfig(vocab_size=len(vocab), block_size=ids.shape[1], n_layer=n_layer,
                       n_head=4, n_embd=n_embd, dropout=0.0,
                       bos_token_id=None, eos_token_id=None)  # fmt: skip
    model = GPT(config)
    logits, loss = model(ids[:, :-1], ids[:, 1:])
    return model, loss


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-layer", type=int, default=2, help="Transformer blocks (default 2)")
    parser.add_argument("--n-embd", type=int, default=32, help="model width (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/explore/gpt.html", help="the page to write")
    args = parser.parse_args(argv)
    if args.n_layer < 1 or args.n_embd < 4 or args.n_embd % 4:
        parser.error("--n-layer must be >= 1 and --n-embd a multiple of 4 (4 heads)")
    model, loss = build(args.n_layer, args.n_embd, args.seed)
    result = tt.explore(loss, params=model, path=args.out, title=f"GPT, {args.n_layer} layers")
    print(result)
    print(f"open {result.path} in a browser: + / − fold modules, / searches, → steps backward")
    return 0


if __name__ == "__explore__":  # python -m tinytensor.explore examples/explore_gpt.py
    model, loss = build()
elif __name__ == "__main__":
    sys.exit(main())
