"""The lecture-style GPT (tests/compat/lecture_gpt_style.py) run on torch and on tinytensor with the
same weights and batches: logits, loss, every gradient and the AdamW step in float64; a 20-step
float32 loss curve with estimate_loss's printed lines; batches sliced at tensor offsets;
sampling."""

import re

import numpy as np
import torch

import tinytensor as tt

from . import lecture_gpt_style as lg
from ._compare import (
    assert_curves_close,
    assert_same_named,
    copy_weights,
    default_dtype,
    grads_by_name,
    max_diff,
    params_by_name,
)


def _pair(hp):
    vocab_size, _, _ = lg.tokenizer()
    torch.manual_seed(0)
    ref = lg.build(torch, vocab_size, hp)
    model = lg.build(tt, vocab_size, hp)
    copy_weights(ref, model)
    return ref, model


def _batches(lib, hp, n, split="train", seed=0):
    """n batches at the same offsets in both libraries (offsets drawn by NumPy, as tensors)."""
    data = lg.splits(lib)[split]
    rng = np.random.default_rng(seed)
    offsets = [rng.integers(0, len(data) - hp.block_size, hp.batch_size) for _ in range(n)]
    return [lg.batch_at(lib, data, lib.tensor(ix), hp) for ix in offsets]


@default_dtype("float64")
def test_one_step_float64():
    hp = lg.hyperparameters()
    ref, model = _pair(hp)
    assert (
        sum(p.numel() for p in model.parameters()) / 1e6
        == sum(p.numel() for p in ref.parameters()) / 1e6
    )
    (ref_x, ref_y), (x, y) = _batches(torch, hp, 1)[0], _batches(tt, hp, 1)[0]
    assert x.tolist() == ref_x.tolist() and y.tolist() == ref_y.tolist()
    ref_logits, ref_loss = ref(ref_x, ref_y)
    logits, loss = model(x, y)
    assert max_diff(ref_logits, logits) < 1e-12 and max_diff(ref_loss, loss) < 1e-12
    ref_loss.backward()
    loss.backward()
    assert_same_named(grads_by_name(ref), grads_by_name(model), 1e-12, "gradient")
    torch.optim.AdamW(ref.parameters(), lr=hp.learning_rate).step()
    tt.optim.AdamW(model.parameters(), lr=hp.learning_rate).step()
    assert_same_named(params_by_name(ref), params_by_name(model), 1e-12, "parameter after step")


def _numbers(lines):
    return np.array([[float(v) for v in re.findall(r"\d+\.\d{4}", line)] for line in lines])


def test_loss_curve_float32_with_estimate_loss():
    hp = lg.hyperparameters()
    ref, model = _pair(hp)
    results = []
    for lib, m in ((torch, ref), (tt, model)):
        evals = {"train": _batches(lib, hp, 3, seed=1), "val": _batches(lib, hp, 3, "val", 2)}
        results.append(lg.train(lib, m, _batches(lib, hp, 20), hp, eval_batches=evals))
    (ref_losses, ref_lines), (losses, lines) = results
    assert min(ref_losses[-5:]) < ref_losses[0]
    assert_curves_close(ref_losses, losses)
    assert len(lines) == len(ref_lines) == 5 and lines[0].startswith("step 0: train loss ")
    np.testing.assert_allclose(_numbers(lines), _numbers(ref_lines), atol=2e-4)
    assert model.training


def test_random_batches_and_sampling():
    hp = lg.hyperparameters()
    _, model = _pair(hp)
    data = lg.splits(tt)["train"]
    tt.manual_seed(1337)
    x, y = lg.get_batch(tt, data, hp)
    assert tuple(x.shape) == tuple(y.shape) == (hp.batch_size, hp.block_size)
    assert x.dtype == tt.int64
    assert x[:, 1:].tolist() == y[:, :-1].tolist()  # y is x shifted by one character
    _, _, decode = lg.tokenizer()
    text = lg.sample(tt, model, decode, max_new_tokens=20)  # with the graph on, as such scripts do
    assert len(text) == 21 and set(text) <= set(lg.TEXT)
