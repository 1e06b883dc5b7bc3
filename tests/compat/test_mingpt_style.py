"""The minGPT-style program (tests/compat/mingpt_style.py) run on torch and on tinytensor with the
same weights and batches: the weight-decay groups found by walking named_modules(), logits, loss,
every gradient and the AdamW step in float64; the Trainer's 20-step float32 loss curve (with an
epoch boundary); the Trainer's own endless RandomSampler loader with worker processes; sampling."""

import numpy as np
import torch
import torch.utils.data as torch_data

import tinytensor as tt
import tinytensor.utils.data as tt_data
from tinytensor.utils.data.dataloader import DataLoader

from . import mingpt_style as mg
from ._compare import (
    assert_curves_close,
    assert_same_named,
    copy_weights,
    default_dtype,
    grads_by_name,
    max_diff,
    params_by_name,
)

TEXT = "first citizen: before we proceed any further, hear me speak. all: speak, speak. " * 2


def _dataset(lib, Dataset, block_size=8):
    return mg.make_char_dataset(lib, Dataset)(TEXT, block_size)


def _pair(dataset, **overrides):
    config = mg.default_model_config(
        vocab_size=dataset.get_vocab_size(), block_size=dataset.get_block_size(), **overrides
    )
    mg.set_seed(torch, np, 0)
    ref = mg.build(torch, config)
    model = mg.build(tt, config)
    copy_weights(ref, model)
    return ref, model


def _batch(lib, dataset, rows):
    xs, ys = zip(*(dataset[i] for i in rows))
    return lib.stack(xs), lib.stack(ys)


def _group_names(model, optimizer):
    names = {id(p): n for n, p in model.named_parameters()}
    return [[names[id(p)] for p in g["params"]] for g in optimizer.param_groups]


@default_dtype("float64")
def test_one_step_float64_with_decay_groups():
    ref_data, data = _dataset(torch, torch_data.Dataset), _dataset(tt, tt_data.Dataset)
    ref, model = _pair(ref_data)
    rows = [0, 5, 17, 40]
    ref_logits, ref_loss = ref(*_batch(torch, ref_data, rows))
    logits, loss = model(*_batch(tt, data, rows))
    assert max_diff(ref_logits, logits) < 1e-12 and max_diff(ref_loss, loss) < 1e-12
    ref_loss.backward()
    loss.backward()
    assert_same_named(grads_by_name(ref), grads_by_name(model), 1e-12, "gradient")
    train_config = mg.default_train_config()
    ref_opt, opt = ref.configure_optimizers(train_config), model.configure_optimizers(train_config)
    assert _group_names(model, opt) == _group_names(ref, ref_opt)
    assert len(_group_names(model, opt)[0]) == 2 * 4 + 1  # 4 Linear weights a block, lm_head
    torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
    tt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    ref_opt.step()
    opt.step()
    assert_same_named(params_by_name(ref), params_by_name(model), 1e-12, "parameter after step")


class _InOrderTrainer(mg.Trainer):
    """The same batches in both libraries: a sequential sampler (epochs end, the loop restarts)."""

    def make_sampler(self):
        return self.torch.utils.data.SequentialSampler(self.train_dataset)


def _train(lib, Dataset, DataLoader_, model, trainer_class=_InOrderTrainer, **config):
    dataset = _dataset(lib, Dataset)
    trainer = trainer_class(lib, DataLoader_, mg.default_train_config(**config), model, dataset)
    losses, lines = [], []

    def batch_end_callback(trainer):
        losses.append(trainer.loss.item())
        lines.append(f"iter_dt {trainer.iter_dt * 1000:.2f}ms; iter {trainer.iter_num}: "
                     f"train loss {trainer.loss.item():.5f}")  # fmt: skip

    trainer.add_callback("on_batch_end", batch_end_callback)
    trainer.run()
    return losses, lines


def test_trainer_loss_curve_float32():
    ref_data = _dataset(torch, torch_data.Dataset)
    ref, model = _pair(ref_data)
    steps_per_epoch = -(-len(ref_data) // 16)
    assert steps_per_epoch < 20  # the loop meets StopIteration and starts a new epoch
    ref_losses, _ = _train(torch, torch_data.Dataset, torch_data.DataLoader, ref,
                           max_iters=20, batch_size=16)  # fmt: skip
    losses, lines = _train(tt, tt_data.Dataset, DataLoader, model, max_iters=20, batch_size=16)
    assert len(losses) == 20 and lines[-1].endswith(f"train loss {losses[-1]:.5f}")
    assert min(ref_losses[-5:]) < ref_losses[0]
    assert_curves_close(ref_losses, losses)


def test_trainer_endless_random_sampler_with_workers():
    data = _dataset(tt, tt_data.Dataset)
    _, model = _pair(data, embd_pdrop=0.1, resid_pdrop=0.1, attn_pdrop=0.1)
    tt.manual_seed(0)
    losses, _ = _train(tt, tt_data.Dataset, DataLoader, model, trainer_class=mg.Trainer,
                       max_iters=6, batch_size=8, num_workers=2)  # fmt: skip
    assert len(losses) == 6 and all(np.isfinite(losses))


@default_dtype("float64")
def test_completion_greedy_matches_and_sampled_is_valid():
    ref_data, data = _dataset(torch, torch_data.Dataset), _dataset(tt, tt_data.Dataset)
    ref, model = _pair(ref_data)
    for lib, m in ((torch, ref), (tt, model)):  # a few steps so that the greedy path is not flat
        _train(lib, lib.utils.data.Dataset, lib.utils.data.DataLoader, m, max_iters=5,
               batch_size=16)  # fmt: skip
    ref_text = mg.complete(torch, ref, ref_data, "speak", 12)
    assert mg.complete(tt, model, data, "speak", 12) == ref_text
    tt.manual_seed(0)
    sampled = mg.complete(tt, model, data, "speak", 12, do_sample=True, top_k=3)
    assert len(sampled) == 17 and set(sampled) <= set(TEXT)
    assert model.training
