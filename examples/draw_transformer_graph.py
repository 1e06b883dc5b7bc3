"""Draw the computation graph of a Transformer: one block, a whole GPT, and a small MLP with its
gradients.

    python examples/draw_transformer_graph.py                   # writes runs/graphs/*.svg
    python examples/draw_transformer_graph.py --n-layer 40 --format png
    python examples/draw_transformer_graph.py --expand blocks.3.self_attn

Every op becomes a node (with its arguments: "Softmax dim=3", "causal") and every tensor a box
coloured by its role (parameter, input, constant, intermediate); the ops that ran inside an
nn.Module's forward are boxed together under the module's name ("blocks.0" > "blocks.0.self_attn"
> "q_proj"), so the picture follows the model's code. The block is GPT-2's Pre-LN layer
(x + Attn(LN(x)), then + FFN(LN(x))). The whole GPT goes from token ids to the loss: its
identical blocks are drawn once, marked "×n_layer", so 2 and 40 layers give pictures of the same
size; `gpt_overview` draws each module as one box (name, class, shapes, parameter count).
The MLP graph is examples/draw_mlp_graph.py's: after one backward pass each tensor shows its
gradient. Without graphviz's `dot` program only the .dot sources are written.
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


def tiny_gpt(n_layer: int, dropout: float = 0.0) -> GPT:
    """A GPT small enough to draw: width 16, 2 heads, a 12-token vocabulary, context 8."""
    config = GPTConfig(vocab_size=12, block_size=8, n_layer=n_layer, n_head=2, n_embd=16,
                       dropout=dropout, bos_token_id=None, eos_token_id=None)  # fmt: skip
    return GPT(config)


def block_graph(seed: int):
    """The graph of one Pre-LN Transformer block on a (1, 4, 16) input."""
    tt.manual_seed(seed)
    block = tiny_gpt(1).blocks[0]
    x = tt.randn(1, 4, 16)  # an input: drawn in the input colour, the weights in theirs
    y = block(x, is_causal=True)
    return draw_graph(y, params=block, name="one GPT-2 block: x + attn(ln(x)), then + ffn(ln(x))")


def gpt_loss(seed: int, n_layer: int):
    """A tiny GPT and its next-token loss on 4 random tokens (dropout on, so it is drawn)."""
    tt.manual_seed(seed)
    model = tiny_gpt(n_layer, dropout=0.1)
    rng = np.random.default_rng(seed)
    idx = tt.tensor(rng.integers(0, 12, size=(1, 4)))
    targets = tt.tensor(rng.integers(0, 12, size=(1, 4)))
    return model, model(idx, targets).loss


def gpt_graph(seed: int, n_layer: int, expand=None, max_nodes: int = 200):
    """The graph of a whole tiny GPT, from token ids to the next-token loss."""
    model, loss = gpt_loss(seed, n_layer)
    title = f"tiny GPT ({n_layer} block{'s' * (n_layer > 1)}): token ids -> loss"
    return draw_graph(loss, params=model, name=title, expand=expand, max_nodes=max_nodes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description="Draw computation graphs of a Transformer block, a tiny GPT and an MLP.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--out-dir", default="runs/graphs", help="where the files go")
    parser.add_argument("--format", choices=("svg", "png", "pdf"), default="svg")
    parser.add_argument("--n-layer", type=int, default=2, help="blocks in the whole-GPT graph")
    parser.add_argument(
        "--expand", nargs="*", default=None, help="modules to draw op by op, e.g. blocks.3"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.n_layer < 1:
        parser.error("--n-layer must be at least 1")

    import draw_mlp_graph

    def out(stem):
        return os.path.join(args.out_dir, f"{stem}.{args.format}")

    written = []
    written += save_graph(block_graph(args.seed), out("transformer_block"))
    try:
        gpt = gpt_graph(args.seed, args.n_layer, args.expand)
    except ValueError as e:  # an --expand name that is no module
        parser.error(str(e))
    written += save_graph(gpt, out("gpt"))
    overview = gpt_graph(args.seed, args.n_layer, args.expand, max_nodes=40)
    written += save_graph(overview, out("gpt_overview"))
    draw_mlp_graph.main(["--out", out("mlp")])
    print("wrote:")
    for path in written:
        print(f"  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
