"""LayerNorm vs RMSNorm vs BatchNorm with batch size 1 and in eval mode.

BatchNorm normalizes each feature over the batch: with one sample every feature equals its
batch mean, so the output collapses to the bias; in eval it switches to running statistics, so
the same input gives a different output than in training; and one sample's output depends on
the other samples in its batch. LayerNorm and RMSNorm normalize each sample over its own
features: none of the three happens.

    python -m experiments.norm_batch_size [--out runs/experiments]
"""

from __future__ import annotations

import numpy as np

import tinytensor as tt
from tinytensor import nn

from .common import parse_args, save_text, table

C = 16


def run(norm):
    rng = np.random.default_rng(0)
    data = lambda n: tt.tensor(rng.normal(3.0, 2.0, (n, C)).astype(np.float32))  # noqa: E731
    norm.train()
    for _ in range(5):  # a few training batches update BatchNorm's running statistics
        norm(data(32))
    batch = data(32)
    train_out = norm(batch).numpy()
    try:
        single = norm(batch[:1]).numpy()  # batch size 1, training mode
        single_cells = [f"{np.std(single):.3f}", f"{np.abs(single[0] - train_out[0]).max():.3f}"]
    except ValueError:  # BatchNorm refuses it, as PyTorch: one value per channel has no variance
        single_cells = ["raises ValueError", "-"]
    pair = norm(batch[:2]).numpy()  # batch 2: BatchNorm maps every feature to exactly ±1
    other = batch.numpy().copy()
    other[1:] = rng.normal(-5.0, 0.5, other[1:].shape)  # same sample 0, different batchmates
    moved = norm(tt.tensor(other)).numpy()
    norm.eval()
    eval_out = norm(batch).numpy()
    return single_cells + [
        f"{np.std(np.abs(pair)):.3f}",
        f"{np.abs(train_out - eval_out).max():.3f}",
        f"{np.abs(moved[0] - train_out[0]).max():.3f}",
    ]


def main():
    args = parse_args(__doc__.splitlines()[0])
    rows = [
        ["LayerNorm"] + run(nn.LayerNorm(C)),
        ["RMSNorm"] + run(nn.RMSNorm(C)),
        ["BatchNorm1d"] + run(nn.BatchNorm1d(C)),
    ]
    headers = [
        "norm",
        "std of output, batch 1",
        "max |batch1 - batch32| (sample 0)",
        "std of |output|, batch 2",
        "max |train - eval| (same batch)",
        "max change of sample 0 when batchmates change",
    ]
    text = (
        f"Normalization, {C} features, inputs ~ N(3, 2²), after 5 training batches of 32\n"
        + table(headers, rows)
        + "\nBatchNorm: batch 1 has no batch variance (refused, as in PyTorch); batch 2 maps every "
        "feature to ±1 whatever the input (std of |y| = 0); "
        "train and eval differ (batch vs running statistics), and a sample's output depends on "
        "its batchmates. LayerNorm/RMSNorm: 0 for batch 1 vs 32, train vs eval, batchmates."
    )
    print(text)
    print("wrote", save_text(args.out, "norm_batch_size.txt", text))


if __name__ == "__main__":
    main()
