"""A nanoGPT-style model and training loop (tests/compat/nanogpt_style.py) run once on torch and
once on tinytensor with the same weights and batches: logits, loss, every gradient, the AdamW
step in float64, generation, a checkpoint, and a float32 loss curve."""

import numpy as np
import pytest

import tinytensor as tt
from tests.compat import nanogpt_style as prog
from tests.compat._compare import copy_weights

RNG = np.random.default_rng(0)
DATA = RNG.integers(0, 29, size=400).astype(np.uint16)


def batches(lib, n, generator_seed=0, batch_size=4, block_size=16):
    """The same index draws for both libraries (drawn by numpy, handed over as tensors)."""
    rng = np.random.default_rng(generator_seed)
    out = []
    for _ in range(n):
        ix = rng.integers(0, len(DATA) - block_size, size=batch_size)
        x = lib.stack([lib.from_numpy(DATA[i : i + block_size].astype(np.int64)) for i in ix])
        y = lib.stack(
            [lib.from_numpy(DATA[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix]
        )
        out.append((x, y))
    return out


@pytest.fixture(params=[True, False], ids=["sdpa", "manual-attention"])
def models(request, torch):
    config = prog.Config()
    torch.manual_seed(0)
    theirs = prog.build(torch, config, flash=request.param).double()
    tt.set_default_dtype(tt.float64)
    try:
        ours = prog.build(tt, config, flash=request.param)
    finally:
        tt.set_default_dtype(tt.float32)
    copy_weights(theirs, ours)
    return theirs, ours


def test_same_parameters_names_and_tying(models):
    theirs, ours = models
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.transformer.wte.weight is ours.lm_head.weight
    assert ours.get_num_params() == theirs.get_num_params()


def test_logits_loss_gradients_and_adamw_step_match(torch, models):
    theirs, ours = models
    ((xt, yt),) = batches(torch, 1)
    ((xo, yo),) = batches(tt, 1)
    lt, losst = theirs(xt, yt)
    lo, losso = ours(xo, yo)
    np.testing.assert_allclose(lo.numpy(), lt.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(losso.item(), losst.item(), rtol=1e-12)
    losst.backward()
    losso.backward()
    grads_t = {n: p.grad.numpy() for n, p in theirs.named_parameters()}
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), grads_t[n], rtol=1e-8, atol=1e-12, err_msg=n)
    opt_t = theirs.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    opt_o = ours.configure_optimizers(0.1, 1e-3, (0.9, 0.95), "cpu")
    opt_t.step()
    opt_o.step()
    after_t = dict(theirs.named_parameters())
    for n, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.detach().numpy(), after_t[n].detach().numpy(), rtol=1e-10, atol=1e-14
        )


def test_training_loop_with_scaler_clip_and_lr_schedule(torch, models, tmp_path):
    theirs, ours = models
    losses_t, _ = prog.train(torch, np, theirs, DATA, 6, batches(torch, 6))
    losses_o, opt = prog.train(
        tt, np, ours, DATA, 6, batches(tt, 6), checkpoint_path=tmp_path / "ckpt.safetensors"
    )
    np.testing.assert_allclose(losses_o, losses_t, rtol=1e-9)
    ckpt = tt.load(tmp_path / "ckpt.safetensors")
    assert ckpt["iter_num"] == 6 and set(ckpt) == {
        "model",
        "optimizer",
        "model_args",
        "iter_num",
        "best_val_loss",
    }
    restored = prog.build(tt, prog.Config(), flash=ours.transformer.h[0].attn.flash).double()
    restored.load_state_dict(ckpt["model"])
    np.testing.assert_array_equal(restored.lm_head.weight.numpy(), ours.lm_head.weight.numpy())
    out_t = prog.estimate_loss(torch, theirs, batches(torch, 2, 5), 2)
    out_o = prog.estimate_loss(tt, ours, batches(tt, 2, 5), 2)
    np.testing.assert_allclose(float(out_o["val"]), float(out_t["val"]), rtol=1e-6)


def test_generate_runs_with_top_k(models):
    _, ours = models
    tt.manual_seed(3)
    idx = ours.generate(
        tt.zeros((2, 1), dtype=tt.long), max_new_tokens=20, temperature=0.8, top_k=5
    )
    assert tuple(idx.shape) == (2, 21) and idx.dtype == tt.int64
    assert int(idx.max()) < 29 and int(idx.min()) >= 0


def test_float32_loss_curve_matches(torch):
    torch.set_default_dtype(torch.float32)
    try:
        torch.manual_seed(1)
        theirs = prog.build(torch, prog.Config())
        ours = prog.build(tt, prog.Config())
        copy_weights(theirs, ours)
        losses_t, _ = prog.train(torch, np, theirs, DATA, 20, batches(torch, 20, 7))
    finally:
        torch.set_default_dtype(torch.float64)
    losses_o, _ = prog.train(tt, np, ours, DATA, 20, batches(tt, 20, 7))
    np.testing.assert_allclose(losses_o, losses_t, rtol=2e-4)
    assert losses_o[-1] < losses_o[0]
