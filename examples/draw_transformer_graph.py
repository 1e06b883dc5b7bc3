"""Draw the computation graph of a Transformer: one block, a whole tiny GPT, and a small MLP with
its gradients.

    python examples/draw_transformer_graph.py                 # writes runs/graphs/*.svg
    python examples/draw_transformer_graph.py --format png --out-dir graphs

Every op becomes a node and every tensor a box; the ops that ran inside an nn.Module's forward are
boxed together under the module's name ("blocks.0" > "blocks.0.self_attn" > "q_proj"), so the
picture follows the model's code. The block is GPT-2's Pre-LN layer
(x + Attn(LN(x)), then + FFN(LN(x))); the GPT graph goes from token ids to the loss. The MLP
graph is examples/draw_mlp_graph.py's: after one backward pass each tensor shows its gradient.
Without graphviz's `dot` program only the .dot sources are written.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # draw_mlp_graph next to us

from tinytensor.models.gpt import GPT, GPTConfig  # noqa: E402

import tinytensor as tt  # noqa: E402
from tinytensor.viz import draw_graph, save_graph  # noqa: E402


def tiny_gpt(n_layer: int) -> GPT:
    """A GPT small enough to draw: width 16, 2 heads, a 12-token vocabulary, context 8."""
    config = GPTConfig(vocab_size=12, block_size=8, n_layer=n_layer, n_head=2, n_embd=16,
                       dropout=0.0, bos_token_id=None, eos_token_id=None)  # fmt: skip
    return GPT(config)


def block_graph(seed: int):
    """The graph of one Pre-LN Transformer block on a (1, 4, 16) input."""
    tt.manual_seed(seed)
    block = tiny_gpt(1).blocks[0]
    x = tt.randn(1, 4, 16, requires_grad=True)
    y = block(x, is_causal=True)
    return draw_graph(y, params=block, name="one GPT-2 block: x + attn(ln(x)), then + ffn(ln(x))")


def gpt_graph(seed: int, n_layer: int):
    """The graph of a whole tiny GPT, from token ids to the next-token loss."""
    tt.manual_seed(seed)
    model = tiny_gpt(n_layer)
    rng = np.random.default_rng(seed)
    idx = tt.tensor(rng.integers(0, 12, size=(1, 4)))
    targets = tt.tensor(rng.integers(0, 12, size=(1, 4)))
    out = model(idx, targets)
    title = f"tiny GPT ({n_layer} block{'s' * (n_layer > 1)}): token ids -> loss"
    return draw_graph(out.loss, params=model, max_nodes=400, name=title)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Draw computation graphs of a Transformer block, a tiny GPT and an MLP.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--out-dir", default="runs/graphs", help="where the files go")
    parser.add_argument("--format", choices=("svg", "png", "pdf"), default="svg")
    parser.add_argument("--n-layer", type=int, default=1, help="blocks in the whole-GPT graph")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.n_layer < 1:
        parser.error("--n-layer must be at least 1")

    import draw_mlp_graph

    written = []
    written += save_graph(
        block_graph(args.seed), os.path.join(args.out_dir, f"transformer_block.{args.format}")
    )
    written += save_graph(gpt_graph(args.seed, args.n_layer),
                          os.path.join(args.out_dir, f"gpt.{args.format}"))  # fmt: skip
    draw_mlp_graph.main(["--out", os.path.join(args.out_dir, f"mlp.{args.format}")])
    print("wrote:")
    for path in written:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
