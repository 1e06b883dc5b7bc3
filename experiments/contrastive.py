"""Contrastive learning: InfoNCE (CLIP's symmetric loss) vs a pairwise MSE that collapses.

Synthetic pairs share a latent z ~ N(0, I_8): view a = A·z + noise (24 dims), view b =
B·z + noise (16 dims). Two MLP encoders map them to 16-dim embeddings. InfoNCE must tell each
pair from the other pairs in the batch, so it keeps embeddings apart; MSE(e_a, e_b) only pulls
pairs together, and the cheapest minimizer maps everything to one point: its loss goes to 0
and the embeddings' spread shrinks toward 0 (measured below). NOTE: cosine retrieval is
invariant to scale, so MSE's top-1 stays high while it collapses; the collapse shows in the
metrics the literature uses on L2-normalized embeddings: per-dim std (SimSiam) and Wang &
Isola's alignment/uniformity. A third run adds strong decoupled weight decay (AdamW, 0.5)
to the MSE objective: its embeddings converge to (nearly) one point and direction.

    python -m experiments.contrastive [--out runs/experiments] [--steps 3000]
"""

from __future__ import annotations

import numpy as np
import tinytensor.nn.functional as F

import tinytensor as tt
from tinytensor import nn

from .common import parse_args, save_text, table

LATENT, DIM_A, DIM_B, EMB = 8, 24, 16, 16


def make_data(rng, a_map, b_map, n):
    z = rng.standard_normal((n, LATENT))
    a = z @ a_map + 0.1 * rng.standard_normal((n, DIM_A))
    b = z @ b_map + 0.1 * rng.standard_normal((n, DIM_B))
    return tt.tensor(a.astype(np.float32)), tt.tensor(b.astype(np.float32))


def encoder(d_in):
    return nn.Sequential(nn.Linear(d_in, 64), nn.ReLU(), nn.Linear(64, EMB))


def collapse_metrics(ea, eb):
    """Collapse as the literature measures it, on L2-normalized embeddings u = e/||e||.

    std: mean per-dim std of u across samples (SimSiam, Chen & He 2021): 1/sqrt(EMB) = 0.25 for
        directions spread over the sphere, 0 when all point the same way.
    alignment: E||u_a - u_b||^2 over positive pairs (Wang & Isola 2020), lower = pairs closer.
    uniformity: log E exp(-2||u_i - u_j||^2) over distinct samples (Wang & Isola 2020): 0 when all
        u coincide (collapse), more negative when spread over the sphere.
    """
    ua = ea / (np.linalg.norm(ea, axis=1, keepdims=True) + 1e-12)
    ub = eb / (np.linalg.norm(eb, axis=1, keepdims=True) + 1e-12)
    std = float(ua.std(axis=0).mean())
    alignment = float(((ua - ub) ** 2).sum(axis=1).mean())
    sq_dist = ((ua[:, None] - ua[None]) ** 2).sum(axis=-1)
    uniformity = float(np.log(np.exp(-2 * sq_dist[np.triu_indices(len(ua), 1)]).mean()))
    return std, alignment, uniformity


def evaluate(enc_a, enc_b, a, b):
    """dict: top1 (cosine retrieval), spread, eff_rank (raw embeddings), std, align, uniform."""
    with tt.no_grad():
        ea, eb = enc_a(a).numpy().astype(np.float64), enc_b(b).numpy().astype(np.float64)
    na = ea / (np.linalg.norm(ea, axis=1, keepdims=True) + 1e-12)
    nb = eb / (np.linalg.norm(eb, axis=1, keepdims=True) + 1e-12)
    top1 = float((np.argmax(na @ nb.T, axis=1) == np.arange(len(a))).mean())
    spread = float(ea.std(axis=0).mean())  # across samples, per dim
    s = np.linalg.svd(ea - ea.mean(0), compute_uv=False)
    p = s / s.sum() if s.sum() > 0 else np.ones_like(s) / len(s)
    eff_rank = float(np.exp(-(p * np.log(p + 1e-12)).sum()))  # exp(entropy of spectrum)
    std, align, uniform = collapse_metrics(ea, eb)
    return dict(top1=top1, spread=spread, eff_rank=eff_rank, std=std, align=align, uniform=uniform)


def train(loss_name, steps, seed=0, weight_decay=1e-2):
    """-> (metrics before, metrics after, final training loss)."""
    rng = np.random.default_rng(seed)
    a_map, b_map = rng.standard_normal((LATENT, DIM_A)), rng.standard_normal((LATENT, DIM_B))
    tt.manual_seed(seed)
    enc_a, enc_b = encoder(DIM_A), encoder(DIM_B)
    params = list(enc_a.parameters()) + list(enc_b.parameters())
    opt = tt.optim.AdamW(params, lr=3e-3, weight_decay=weight_decay)
    test_a, test_b = make_data(rng, a_map, b_map, 256)
    before = evaluate(enc_a, enc_b, test_a, test_b)
    for _ in range(steps):
        a, b = make_data(rng, a_map, b_map, 128)
        ea, eb = enc_a(a), enc_b(b)
        if loss_name == "infonce":
            loss = F.info_nce(ea, eb, temperature=0.1)
        else:
            loss = F.mse_loss(ea, eb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return before, evaluate(enc_a, enc_b, test_a, test_b), loss.item()


# (label, loss, AdamW decoupled weight decay). The strong-decay MSE run shows where the
# MSE-only objective goes: with nothing pushing embeddings apart, decay drives them to a point.
RUNS = (("infonce", "infonce", 1e-2), ("mse", "mse", 1e-2), ("mse wd=0.5", "mse", 0.5))


def main():
    args = parse_args(__doc__.splitlines()[0], steps=(int, 3000, "training steps"))
    results = {label: train(loss, args.steps, weight_decay=wd) for label, loss, wd in RUNS}
    retrieval = [
        [
            label,
            f"{final:.3g}",
            f"{b['top1']:.3f}",
            f"{a['top1']:.3f}",
            f"{b['spread']:.3f}",
            f"{a['spread']:.2g}",
            f"{b['eff_rank']:.2f}",
            f"{a['eff_rank']:.2f}",
        ]  # fmt: skip
        for label, (b, a, final) in results.items()
    ]
    collapse = [
        [
            label,
            f"{b['std']:.3f}",
            f"{a['std']:.3f}",
            f"{a['align']:.2g}",
            f"{b['uniform']:.3f}",
            f"{a['uniform']:.3f}",
        ]  # fmt: skip
        for label, (b, a, final) in results.items()
    ]
    headers = ["run", "final loss", "top-1 init", "top-1 trained", "spread init",
               "spread trained", "eff. rank init", "eff. rank trained"]  # fmt: skip
    collapse_headers = ["run", "norm. std init", "norm. std trained", "alignment trained",
                        "uniformity init", "uniformity trained"]  # fmt: skip
    mse = results["mse wd=0.5"][1]
    text = (
        f"Retrieval of the paired view among 256 held-out pairs (chance = {1 / 256:.4f}), "
        f"{args.steps} AdamW steps, batch 128, lr 3e-3\n"
        "spread: mean per-dim std of raw embeddings across samples; eff. rank: exp(entropy of "
        "the singular values)\n" + table(headers, rows=retrieval) + "\n\n"
        "Collapse on L2-normalized embeddings u = e/||e|| (what the literature measures):\n"
        f"norm. std: mean per-dim std of u (1/sqrt({EMB}) = {EMB**-0.5:.3f} if spread over the "
        "sphere, 0 if collapsed); uniformity: log E exp(-2||u_i-u_j||^2) (0 = all one point)\n"
        + table(collapse_headers, collapse)
        + "\n\nWhy MSE's top-1 stays high although it collapses: cosine retrieval only ranks"
        " candidates, and\nranking is invariant to a common scale. MSE shrinks every embedding"
        " toward one point smoothly,\nso the tiny remaining differences keep their order"
        f" (with decay 0.5: raw spread {mse['spread']:.1g},\nnorm. std"
        f" {mse['std']:.3f}, uniformity {mse['uniform']:.3f} ~ 0: nearly one direction,"
        f" yet top-1 {mse['top1']:.3f}): the directions that remain still differ enough\nto"
        " rank. The collapse is in the geometry: MSE gives up the spread that InfoNCE keeps over"
        " the sphere.\n"
    )
    print(text)
    print("wrote", save_text(args.out, "contrastive.txt", text))
    return dict(results=results, text=text)


if __name__ == "__main__":
    main()
