"""The word-language-model-style program (tests/compat/word_lm_style.py) run on torch and on
tinytensor with the same weights: log-probs, loss, every gradient and the hand-written SGD step in
float64 for LSTM, GRU, RNN_TANH and the nn.Transformer subclass; an epoch of truncated BPTT in
float32 and the evaluation; the corpus and batchify."""

import warnings

import numpy as np
import pytest
import torch

import tinytensor as tt

from . import word_lm_style as wl
from ._compare import (
    assert_curves_close,
    assert_same_named,
    copy_weights,
    default_dtype,
    grads_by_name,
    max_diff,
    params_by_name,
)

MODELS = ["LSTM", "GRU", "RNN_TANH", "Transformer"]


def _pair(model_type):
    ids, vocab = wl.corpus_ids(torch)
    torch.manual_seed(0)
    ref = wl.build(torch, model_type, len(vocab))
    model = wl.build(tt, model_type, len(vocab))
    copy_weights(ref, model)
    return ref, model, len(vocab)


@pytest.mark.parametrize("model_type", MODELS)
@default_dtype("float64")
def test_one_step_float64(model_type):
    ref, model, ntokens = _pair(model_type)
    results = []
    for lib, m in ((torch, ref), (tt, model)):
        source = wl.batchify(wl.corpus_ids(lib)[0], 3)
        data, targets = wl.get_batch(source, 0, 5)
        if model_type == "Transformer":
            output = m(data).view(-1, ntokens)
            hidden = []
        else:
            output, hidden = m(data, m.init_hidden(3))
            hidden = list(hidden) if isinstance(hidden, tuple) else [hidden]
        loss = lib.nn.NLLLoss()(output, targets)
        loss.backward()
        lib.nn.utils.clip_grad_norm_(m.parameters(), 0.25)
        results.append((output, loss, *hidden))
    for a, b in zip(*results):
        assert max_diff(a, b) < 1e-12
    assert_same_named(grads_by_name(ref), grads_by_name(model), 1e-12, "clipped gradient")
    for m in (ref, model):
        for p in m.parameters():
            p.data.add_(p.grad, alpha=-1.0)
    assert_same_named(params_by_name(ref), params_by_name(model), 1e-12, "parameter after step")


@pytest.mark.parametrize("model_type", MODELS)
def test_epoch_float32_and_evaluation(model_type):
    ref, model, ntokens = _pair(model_type)
    curves, evals = [], []
    for lib, m in ((torch, ref), (tt, model)):
        ids = wl.corpus_ids(lib)[0]
        train_data = wl.batchify(ids, 3)
        losses = []
        for _ in range(10):  # ten epochs of 2 chunks (10 rows, bptt 5): 20 steps
            losses += wl.train_epoch(lib, m, train_data, ntokens)
        curves.append(losses)
        evals.append(wl.evaluate(lib, m, wl.batchify(ids, 2), ntokens))
    assert len(curves[1]) == 20 and min(curves[0][-4:]) < curves[0][0]
    assert_curves_close(*curves)
    assert abs(evals[0] - evals[1]) / evals[0] < 2e-3
    assert not model.training


def test_corpus_and_batchify():
    ids, vocab = wl.corpus_ids(tt)
    ref_ids, ref_vocab = wl.corpus_ids(torch)
    assert vocab == ref_vocab and ids.tolist() == ref_ids.tolist() and ids.dtype == tt.int64
    batches = wl.batchify(ids, 3)
    assert batches.tolist() == wl.batchify(ref_ids, 3).tolist()
    assert tuple(batches.shape) == (10, 3)
    data, target = wl.get_batch(batches, 5, 5)
    assert tuple(data.shape) == (4, 3) and tuple(target.shape) == (12,)  # the last, short chunk
    hidden = (tt.ones(2, 3, 4, requires_grad=True) * 2, tt.ones(2, 3, 4))
    cut = wl.repackage_hidden(tt, hidden)
    assert isinstance(cut, tuple) and not cut[0].requires_grad
    np.testing.assert_array_equal(cut[0].numpy(), 2.0)


def _clipped(lib):
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 2.0], dtype=lib.float64))
    (p * lib.tensor([3.0, 1.0, 2.0], dtype=lib.float64)).sum().backward()
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        norm = lib.nn.utils.clip_grad_norm(p, 0.25)
    return float(norm), p.grad.tolist()


def test_older_scripts_deprecated_clip_name():
    """Older versions of such scripts call clip_grad_norm (no underscore): it warns and clips."""
    (ref_norm, ref_grad), (norm, grad) = _clipped(torch), _clipped(tt)
    assert norm == pytest.approx(ref_norm, rel=1e-12)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-12)


def test_older_scripts_sgd_step_with_alpha_first():
    results = []
    for lib in (torch, tt):
        p = lib.nn.Parameter(lib.tensor([1.0, 2.0], dtype=lib.float64))
        (p * 3).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns that the overload is deprecated
            p.data.add_(-0.5, p.grad.data)
        results.append(p.tolist())
    assert results[1] == results[0] == [-0.5, 0.5]


def test_older_scripts_adam_with_value_first():
    """exp_avg.mul_(b1).add_(1 - b1, g); exp_avg_sq.mul_(b2).addcmul_(1 - b2, g, g);
    p.data.addcdiv_(-step, exp_avg, denom): the deprecated orders, same numbers and warnings."""
    results = []
    for lib in (torch, tt):
        g = lib.tensor([0.5, -2.0], dtype=lib.float64)
        p = lib.tensor([1.0, 2.0], dtype=lib.float64)
        m, v = lib.zeros(2, dtype=lib.float64), lib.zeros(2, dtype=lib.float64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.mul_(0.9).add_(0.1, g)
            v.mul_(0.999).addcmul_(0.001, g, g)
            p.addcdiv_(-0.01, m, v.sqrt().add_(1e-8))
        if lib is tt:  # torch warns once per process, so only ours is counted
            assert sum("deprecated" in str(w.message) for w in caught) == 3
        results.append([m.tolist(), v.tolist(), p.tolist()])
    np.testing.assert_allclose(np.array(results[1][2]), np.array(results[0][2]), rtol=1e-14)
    assert results[1][:2] == results[0][:2]
