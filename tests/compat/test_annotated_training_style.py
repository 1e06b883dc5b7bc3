"""The Annotated-Transformer-style training code (tests/compat/annotated_training_style.py) run on
torch and on tinytensor: label smoothing (its target distribution, loss and gradient) for no, one
and several padding targets; the Noam rate under LambdaLR; one copy-task step in float64 (output,
loss, every gradient, Adam + schedule step); a float32 epoch with its progress lines and an
evaluation epoch with the do-nothing optimizer; greedy decoding; the copy-task batches."""

import numpy as np
import pytest
import torch

import tinytensor as tt

from . import annotated_training_style as at
from ._compare import (
    assert_curves_close,
    assert_same_named,
    copy_weights,
    default_dtype,
    grads_by_name,
    max_diff,
    params_by_name,
)

V = 11
D_MODEL = 16


@pytest.mark.parametrize("pad_rows", [[], [3], [0, 2, 5]])
@default_dtype("float64")
def test_label_smoothing_matches(pad_rows):
    rng = np.random.default_rng(len(pad_rows))
    logits = rng.normal(size=(6, V))
    target = rng.integers(1, V, 6)
    target[pad_rows] = 0
    results = []
    for lib in (torch, tt):
        x = lib.tensor(logits, requires_grad=True)
        log_probs = lib.nn.functional.log_softmax(x, dim=-1)
        crit = at.make_label_smoothing(lib)(V, padding_idx=0, smoothing=0.4)
        loss = crit(log_probs, lib.tensor(target))
        loss.backward()
        results.append((loss, crit.true_dist, x.grad))
        assert not crit.true_dist.requires_grad
    for ref, ours in zip(*results):
        assert max_diff(ref, ours) < 1e-12
    true_dist = results[1][1].numpy()
    assert np.all(true_dist[pad_rows] == 0) and np.all(true_dist[:, 0] == 0)


def test_noam_rate_under_lambda_lr():
    lrs = []
    for lib in (torch, tt):
        model = lib.nn.Linear(2, 2)
        optimizer, scheduler = at.make_optimizer_and_schedule(lib, model, D_MODEL, warmup=10)
        seen = []
        for _ in range(30):
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        lrs.append(seen)
    np.testing.assert_allclose(lrs[1], lrs[0], rtol=1e-15)
    assert lrs[1][0] == pytest.approx(0.5 * at.rate(0, D_MODEL, 1.0, 10))  # base lr 0.5
    assert np.argmax(lrs[1]) == 10  # the peak is at the end of the warmup


def _draw(lib, batch_size, seed=0):
    rng = np.random.default_rng(seed)
    symbols = [rng.integers(1, V, size=(batch_size, 10)) for _ in range(100)]
    return lambda i: lib.tensor(symbols[i])


def _pair():
    torch.manual_seed(0)
    ref = at.build(torch, V, D_MODEL)
    model = at.build(tt, V, D_MODEL)
    copy_weights(ref, model)
    return ref, model


def _loss_compute(lib, model):
    criterion = at.make_label_smoothing(lib)(V, padding_idx=0, smoothing=0.0)
    return at.SimpleLossCompute(model.generator, criterion)


@default_dtype("float64")
def test_copy_task_step_float64():
    ref, model = _pair()
    outs = []
    for lib, m in ((torch, ref), (tt, model)):
        batch = next(at.data_gen(lib, V, 8, 1, draw=_draw(lib, 8)))
        out = m.forward(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
        loss, loss_node = _loss_compute(lib, m)(out, batch.tgt_y, batch.ntokens)
        loss_node.backward()
        outs.append((out, loss, loss_node, batch.ntokens))
    for a, b in zip(*outs):
        assert max_diff(a, b) < 1e-12
    assert_same_named(grads_by_name(ref), grads_by_name(model), 1e-12, "gradient")
    for lib, m in ((torch, ref), (tt, model)):
        optimizer, scheduler = at.make_optimizer_and_schedule(lib, m, D_MODEL)
        optimizer.step()
        scheduler.step()
    assert_same_named(params_by_name(ref), params_by_name(model), 1e-12, "parameter after step")


def test_copy_task_epoch_float32_and_evaluation():
    ref, model = _pair()
    results = []
    for lib, m in ((torch, ref), (tt, model)):
        optimizer, scheduler = at.make_optimizer_and_schedule(lib, m, D_MODEL, warmup=20)
        m.train()
        train = at.run_epoch(at.data_gen(lib, V, 8, 20, draw=_draw(lib, 8)), m,
                             _loss_compute(lib, m), optimizer, scheduler, mode="train")  # fmt: skip
        m.eval()
        DummyOptimizer, DummyScheduler = at.make_dummies(lib)
        evaluation = at.run_epoch(at.data_gen(lib, V, 8, 3, draw=_draw(lib, 8, seed=1)), m,
                                  _loss_compute(lib, m), DummyOptimizer(), DummyScheduler(),
                                  mode="eval")  # fmt: skip
        results.append((train, evaluation))
    (ref_train, ref_eval), (train, evaluation) = results
    assert min(ref_train[2][-5:]) < ref_train[2][0]
    assert_curves_close(ref_train[2], train[2])
    assert train[1].step == 20 and train[1].samples == 160 and int(train[1].tokens) == 20 * 8 * 9
    assert max_diff(ref_train[0], train[0]) < 1e-4 and max_diff(ref_eval[0], evaluation[0]) < 1e-4
    assert len(train[3]) == len(ref_train[3]) == 4
    for line, ref_line in zip(train[3], ref_train[3]):
        assert line.split("| Loss")[0] == ref_line.split("| Loss")[0]
        assert line.split("| Loss: ")[1][:6] == ref_line.split("| Loss: ")[1][:6]
        assert line.split("Learning Rate: ")[1] == ref_line.split("Learning Rate: ")[1]
    assert evaluation[3] == [] and evaluation[1].step == 0


@default_dtype("float64")
def test_greedy_decode_matches():
    ref, model = _pair()
    for lib, m in ((torch, ref), (tt, model)):
        optimizer, scheduler = at.make_optimizer_and_schedule(lib, m, D_MODEL, warmup=5)
        at.run_epoch(at.data_gen(lib, V, 8, 10, draw=_draw(lib, 8)), m, _loss_compute(lib, m),
                     optimizer, scheduler)  # fmt: skip
        m.eval()
    decoded = []
    for lib, m in ((torch, ref), (tt, model)):
        src = lib.LongTensor([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])
        src_mask = lib.ones(1, 1, 10)
        ys = at.greedy_decode(lib, m, src, src_mask, max_len=10, start_symbol=1)
        assert ys.dtype == lib.int64
        decoded.append(ys.tolist())
    assert decoded[1] == decoded[0]


def test_copy_task_batches():
    tt.manual_seed(0)
    batches = list(at.data_gen(tt, V, 4, 3))
    assert len(batches) == 3
    for batch in batches:
        src = batch.src.numpy()
        assert src.dtype == np.int64 and src.shape == (4, 10)
        assert np.all(src[:, 0] == 1) and src.min() >= 1 and src.max() < V
        assert batch.tgt.tolist() == batch.src[:, :-1].tolist()
        assert int(batch.ntokens) == 4 * 9
        assert tuple(batch.src_mask.shape) == (4, 1, 10) and batch.src_mask.dtype == tt.bool
        assert tuple(batch.tgt_mask.shape) == (4, 9, 9)
        assert batch.tgt_mask[0].numpy().tolist() == np.tril(np.ones((9, 9), bool)).tolist()
    assert batches[0].src.tolist() != batches[1].src.tolist()
