"""Bad arguments to the nn layers' constructors, the optimizers and the lr schedules, made as a
new user makes them: each must raise the right exception with a message naming the class or
function and the offending value (a NaN lr must never reach a training step), and where PyTorch
has the same call and raises, the test checks that it does.

Each case is one expression, evaluated with `lib` = tinytensor and, unless `vs_torch=False`,
with `lib` = torch. Names: `nn` = lib.nn, `optim` = lib.optim, `sched` =
lib.optim.lr_scheduler, `p` a list with one parameter, `opt()` a fresh SGD(p, lr=0.1), `x` =
lib.ones(3, 4), `i([...])` an int64 tensor. `vs_torch=False` marks calls PyTorch accepts: NaN
or inf hyperparameters (its checks are `lr < 0` and the like, which NaN passes), probabilities
outside [0, 1] that it only checks in forward, and tinytensor's own classes.
"""

from __future__ import annotations

import math
import re

import pytest

import tinytensor as tt


def bad(expr, kind, *fragments, vs_torch=True):
    return pytest.param(expr, kind, fragments, vs_torch, id=expr)


CASES = [
    # ---- layers: sizes are non-negative ints, probabilities in [0, 1] ------------------------
    bad("nn.Linear(-1, 4)", ValueError, "Linear", "in_features", "-1"),
    bad("nn.Linear(4, -2)", ValueError, "Linear", "out_features", "-2"),
    bad("nn.Linear(2.5, 4)", TypeError, "Linear", "in_features", "2.5"),
    bad("nn.Linear('4', 4)", TypeError, "Linear", "in_features", "'4'"),
    bad("nn.Linear(True, 4)", TypeError, "Linear", "in_features", "True", vs_torch=False),
    bad("nn.Embedding(-1, 4)", ValueError, "Embedding", "num_embeddings", "-1"),
    bad("nn.Embedding(10, 2.5)", TypeError, "Embedding", "embedding_dim", "2.5"),
    bad("nn.Embedding(10, 4, padding_idx=10)", ValueError, "Embedding", "padding_idx", "10"),
    bad("nn.Embedding(10, 4, padding_idx=1.0)", TypeError, "Embedding", "padding_idx", "1.0"),
    bad("nn.Dropout(1.5)", ValueError, "Dropout", "p", "1.5"),
    bad("nn.Dropout(-0.1)", ValueError, "Dropout", "p", "-0.1"),
    bad("nn.Dropout(nan)", ValueError, "Dropout", "p", "nan", vs_torch=False),
    bad("nn.Dropout('0.1')", TypeError, "Dropout", "p", "'0.1'"),
    bad("nn.LayerNorm(-1)", ValueError, "LayerNorm", "-1"),
    bad("nn.LayerNorm(2.5)", TypeError, "LayerNorm", "2.5"),
    bad("nn.LayerNorm(4, eps=nan)", ValueError, "LayerNorm", "eps", "nan", vs_torch=False),
    bad("nn.LayerNorm(4, eps=-1.0)", ValueError, "LayerNorm", "eps", "-1.0", vs_torch=False),
    bad("nn.RMSNorm(-3)", ValueError, "RMSNorm", "-3"),
    bad("nn.RMSNorm(4, eps=inf)", ValueError, "RMSNorm", "eps", "inf", vs_torch=False),
    bad("nn.BatchNorm1d(-1)", ValueError, "BatchNorm1d", "num_features", "-1"),
    bad(
        "nn.BatchNorm1d(4, momentum=nan)",
        ValueError,
        "BatchNorm1d",
        "momentum",
        "nan",
        vs_torch=False,
    ),
    bad("nn.BatchNorm1d(4, eps=nan)", ValueError, "BatchNorm1d", "eps", "nan", vs_torch=False),
    bad("nn.MultiheadAttention(10, 3)", ValueError, "MultiheadAttention", "10", "3"),
    bad("nn.MultiheadAttention(8, 0)", ValueError, "MultiheadAttention", "num_heads", "0"),
    bad("nn.MultiheadAttention(-8, 2)", ValueError, "MultiheadAttention", "embed_dim", "-8"),
    bad(
        "nn.MultiheadAttention(8, 2, dropout=1.5)",
        ValueError,
        "MultiheadAttention",
        "dropout",
        "1.5",
        vs_torch=False,
    ),
    bad("nn.TransformerEncoderLayer(8, 3)", ValueError, "8", "3"),
    bad(
        "nn.TransformerEncoderLayer(8, 2, dim_feedforward=-1)", ValueError, "dim_feedforward", "-1"
    ),
    bad("nn.TransformerEncoderLayer(8, 2, dropout=1.5)", ValueError, "dropout", "1.5"),
    bad("nn.TransformerDecoderLayer(8, 2, dropout=-0.5)", ValueError, "dropout", "-0.5"),
    bad(
        "nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), num_layers=-1)",
        ValueError,
        "TransformerEncoder",
        "num_layers",
        "-1",
        vs_torch=False,
    ),
    bad("nn.Flatten(1.5)", TypeError, "Flatten", "start_dim", "1.5", vs_torch=False),
    bad("nn.Softmax(dim=1.5)", TypeError, "Softmax", "dim", "1.5", vs_torch=False),
    bad("nn.LeakyReLU('0.1')", TypeError, "LeakyReLU", "negative_slope", "'0.1'", vs_torch=False),
    bad("nn.GELU(approximate='fast')", ValueError, "GELU", "approximate", "'fast'", vs_torch=False),
    bad(
        "nn.CrossEntropyLoss(label_smoothing=1.5)(x, i([0, 1, 2]))",
        ValueError,
        "label_smoothing",
        "1.5",
    ),
    bad("nn.CrossEntropyLoss(reduction='avg')(x, i([0, 1, 2]))", ValueError, "reduction", "'avg'"),
    bad("nn.HuberLoss(delta=-1.0)(x, x)", ValueError, "huber_loss", "delta", "-1.0"),
    # ---- optimizers: finite lr, momentum, eps, betas, weight decay ---------------------------
    bad("optim.SGD(p, lr=nan)", ValueError, "SGD", "lr", "nan", vs_torch=False),
    bad("optim.SGD(p, lr=inf)", ValueError, "SGD", "lr", "inf", vs_torch=False),
    bad("optim.SGD(p, lr=-0.1)", ValueError, "SGD", "lr", "-0.1"),
    bad("optim.SGD(p, lr='0.1')", TypeError, "SGD", "lr", "'0.1'"),
    bad("optim.SGD(p, lr=0.1, momentum=-0.9)", ValueError, "SGD", "momentum", "-0.9"),
    bad("optim.SGD(p, lr=0.1, momentum=nan)", ValueError, "SGD", "momentum", "nan", vs_torch=False),
    bad("optim.SGD(p, lr=0.1, weight_decay=-1.0)", ValueError, "SGD", "weight_decay", "-1.0"),
    bad(
        "optim.SGD(p, lr=0.1, dampening=inf)", ValueError, "SGD", "dampening", "inf", vs_torch=False
    ),
    bad("optim.SGD(p, lr=0.1, nesterov=True)", ValueError, "SGD", "Nesterov", "momentum"),
    bad("optim.SGD([], lr=0.1)", ValueError, "SGD", "empty"),
    bad(
        "optim.SGD([{'params': p, 'lr': nan}], lr=0.1)",
        ValueError,
        "SGD",
        "lr",
        "nan",
        vs_torch=False,
    ),
    bad(
        "opt().add_param_group({'params': [lib.ones(1, requires_grad=True)], 'lr': inf})",
        ValueError,
        "SGD",
        "lr",
        "inf",
        vs_torch=False,
    ),
    bad("optim.Adam(p, lr=nan)", ValueError, "Adam", "lr", "nan", vs_torch=False),
    bad("optim.Adam(p, lr=-1.0)", ValueError, "Adam", "lr", "-1.0"),
    bad("optim.Adam(p, betas=(1.0, 0.999))", ValueError, "Adam", "betas", "1.0"),
    bad("optim.Adam(p, betas=(0.9, -0.1))", ValueError, "Adam", "betas", "-0.1"),
    bad("optim.Adam(p, betas=(nan, 0.999))", ValueError, "Adam", "betas", "nan", vs_torch=False),
    bad("optim.Adam(p, betas=(0.9, '0.999'))", TypeError, "Adam", "betas", "'0.999'"),
    bad("optim.Adam(p, eps=-1e-8)", ValueError, "Adam", "eps", "-1e-08"),
    bad("optim.Adam(p, eps=nan)", ValueError, "Adam", "eps", "nan", vs_torch=False),
    bad("optim.Adam(p, weight_decay=-0.1)", ValueError, "Adam", "weight_decay", "-0.1"),
    bad("optim.AdamW(p, lr=inf)", ValueError, "AdamW", "lr", "inf", vs_torch=False),
    bad(
        "optim.AdamW(p, weight_decay=nan)",
        ValueError,
        "AdamW",
        "weight_decay",
        "nan",
        vs_torch=False,
    ),
    bad("optim.AdamW(p, weight_decay=-0.1)", ValueError, "AdamW", "weight_decay", "-0.1"),
    bad("optim.AdamW(p, betas=(0.9, 1.5))", ValueError, "AdamW", "betas", "1.5"),
    bad("optim.RMSprop(p, lr=nan)", ValueError, "RMSprop", "lr", "nan", vs_torch=False),
    bad("optim.RMSprop(p, alpha=-0.9)", ValueError, "RMSprop", "alpha", "-0.9"),
    bad("optim.RMSprop(p, momentum=nan)", ValueError, "RMSprop", "momentum", "nan", vs_torch=False),
    bad("optim.RMSprop(p, eps=-1.0)", ValueError, "RMSprop", "eps", "-1.0"),
    bad("optim.Adagrad(p, lr=inf)", ValueError, "Adagrad", "lr", "inf", vs_torch=False),
    bad("optim.Adagrad(p, lr_decay=-1.0)", ValueError, "Adagrad", "lr_decay", "-1.0"),
    bad(
        "optim.Adagrad(p, initial_accumulator_value=-1.0)",
        ValueError,
        "Adagrad",
        "initial_accumulator_value",
        "-1.0",
    ),
    bad("optim.Adagrad(p, eps=nan)", ValueError, "Adagrad", "eps", "nan", vs_torch=False),
    bad("optim.Adadelta(p, rho=1.5)", ValueError, "Adadelta", "rho", "1.5"),
    bad("optim.Adadelta(p, rho=nan)", ValueError, "Adadelta", "rho", "nan", vs_torch=False),
    bad("optim.Adadelta(p, lr=-1.0)", ValueError, "Adadelta", "lr", "-1.0"),
    # ---- lr schedules: finite settings, and every lr they set is finite ------------------------
    bad("sched.StepLR(opt(), step_size=0)", ValueError, "StepLR", "step_size", "0", vs_torch=False),
    bad(
        "sched.StepLR(opt(), step_size=2, gamma=nan)",
        ValueError,
        "StepLR",
        "gamma",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.ExponentialLR(opt(), gamma=inf)",
        ValueError,
        "ExponentialLR",
        "gamma",
        "inf",
        vs_torch=False,
    ),
    bad(
        "sched.ExponentialLR(opt(), gamma=nan)",
        ValueError,
        "ExponentialLR",
        "gamma",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.CosineAnnealingLR(opt(), T_max=10, eta_min=nan)",
        ValueError,
        "CosineAnnealingLR",
        "eta_min",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.CosineAnnealingLR(opt(), T_max=0)",
        ValueError,
        "CosineAnnealingLR",
        "T_max",
        "0",
        vs_torch=False,
    ),
    bad("sched.LinearLR(opt(), start_factor=0.0)", ValueError, "LinearLR", "start_factor", "0.0"),
    bad(
        "sched.LinearLR(opt(), start_factor=nan)",
        ValueError,
        "LinearLR",
        "start_factor",
        "nan",
        vs_torch=False,
    ),
    bad("sched.ConstantLR(opt(), factor=1.5)", ValueError, "ConstantLR", "factor", "1.5"),
    bad(
        "sched.ConstantLR(opt(), factor=nan)",
        ValueError,
        "ConstantLR",
        "factor",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.MultiStepLR(opt(), milestones=[2, 4], gamma=nan)",
        ValueError,
        "MultiStepLR",
        "gamma",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.PolynomialLR(opt(), total_iters=4, power=inf)",
        ValueError,
        "PolynomialLR",
        "power",
        "inf",
        vs_torch=False,
    ),
    bad(
        "sched.OneCycleLR(opt(), max_lr=nan, total_steps=10)",
        ValueError,
        "OneCycleLR",
        "max_lr",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.OneCycleLR(opt(), max_lr=0.1, total_steps=0)",
        ValueError,
        "OneCycleLR",
        "total_steps",
        "0",
    ),
    bad(
        "sched.OneCycleLR(opt(), max_lr=0.1, total_steps=10, pct_start=1.5)",
        ValueError,
        "OneCycleLR",
        "pct_start",
        "1.5",
    ),
    bad(
        "sched.CosineAnnealingWarmRestarts(opt(), T_0=0)",
        ValueError,
        "CosineAnnealingWarmRestarts",
        "T_0",
        "0",
    ),
    bad(
        "sched.CosineAnnealingWarmRestarts(opt(), T_0=5, eta_min=inf)",
        ValueError,
        "CosineAnnealingWarmRestarts",
        "eta_min",
        "inf",
        vs_torch=False,
    ),
    bad(
        "sched.ReduceLROnPlateau(opt(), factor=1.0)",
        ValueError,
        "ReduceLROnPlateau",
        "factor",
        "1.0",
    ),
    bad(
        "sched.ReduceLROnPlateau(opt(), factor=nan)",
        ValueError,
        "ReduceLROnPlateau",
        "factor",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.ReduceLROnPlateau(opt(), min_lr=nan)",
        ValueError,
        "ReduceLROnPlateau",
        "min_lr",
        "nan",
        vs_torch=False,
    ),
    bad(
        "sched.LambdaLR(opt(), lambda step: nan)",
        ValueError,
        "LambdaLR",
        "lr",
        "nan",
        vs_torch=False,
    ),
    bad("sched.LambdaLR(opt(), 0.5)", TypeError, "LambdaLR", "lr_lambda"),
    # ---- gradient clipping ---------------------------------------------------------------------
    bad(
        "lib.nn.utils.clip_grad_norm_(p, max_norm=nan)",
        ValueError,
        "clip_grad_norm_",
        "max_norm",
        "nan",
        vs_torch=False,
    ),
    bad(
        "lib.nn.utils.clip_grad_norm_(p, max_norm=1.0, norm_type='bogus')",
        ValueError,
        "clip_grad_norm_",
        "norm_type",
        "'bogus'",
    ),
    bad(
        "lib.nn.utils.clip_grad_value_(p, clip_value=nan)",
        ValueError,
        "clip_grad_value_",
        "clip_value",
        "nan",
        vs_torch=False,
    ),
    # ---- nn.init -------------------------------------------------------------------------------
    bad("nn.init.normal_(x, std=-1.0)", ValueError, "normal_", "std", "-1.0"),
    bad("nn.init.normal_(x, mean=nan)", ValueError, "normal_", "mean", "nan", vs_torch=False),
    bad("nn.init.uniform_(x, a=1.0, b=0.0)", ValueError, "uniform_", "a=1.0", "b=0.0"),
    bad(
        "nn.init.trunc_normal_(x, std=nan)",
        ValueError,
        "trunc_normal_",
        "std",
        "nan",
        vs_torch=False,
    ),
    bad("nn.init.constant_(x, 'a')", TypeError, "constant_", "val", "'a'"),
    bad(
        "nn.init.kaiming_uniform_(x, mode='bogus')",
        ValueError,
        "kaiming_uniform_",
        "mode",
        "'bogus'",
    ),
    bad("nn.init.xavier_uniform_(lib.ones(3))", ValueError, "xavier_uniform_", "(3,)"),
]


def namespace(lib):
    """The names a case expression may use, bound to tinytensor or to torch."""
    params = [lib.ones(2, requires_grad=True)]
    return {
        "lib": lib,
        "nn": lib.nn,
        "optim": lib.optim,
        "sched": lib.optim.lr_scheduler,
        "p": params,
        "opt": lambda: lib.optim.SGD(params, lr=0.1),
        "x": lib.ones(3, 4),
        "i": lambda values: lib.tensor(values, dtype=lib.int64),
        "nan": math.nan,
        "inf": math.inf,
    }


def message_with(fragments):
    """A regex that matches a message holding every fragment literally, in any order."""
    return "(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments)


@pytest.mark.parametrize("expr, kind, fragments, vs_torch", CASES)
def test_bad_argument_raises_naming_it_and_its_value(expr, kind, fragments, vs_torch):
    with pytest.raises(kind, match=message_with(fragments)):
        eval(expr, namespace(tt))  # noqa: S307 - the expressions are this file's own


@pytest.mark.parametrize("expr, kind, fragments, vs_torch", [c for c in CASES if c.values[3]])
def test_pytorch_raises_for_the_same_call(expr, kind, fragments, vs_torch, torch):
    with pytest.raises(Exception):  # noqa: B017, PT011 - torch's types vary; that it raises matters
        eval(expr, namespace(torch))  # noqa: S307


def test_a_schedule_never_sets_a_nan_lr_later():
    """A lr_lambda that turns NaN at step 2: that step raises, naming it, and the optimizer
    keeps its last finite lr instead of training on NaN."""
    opt = tt.optim.SGD([tt.ones(2, requires_grad=True)], lr=0.1)
    sched = tt.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 if step < 2 else math.nan)
    sched.step()
    with pytest.raises(ValueError, match="LambdaLR: step 2 gives lr nan"):
        sched.step()
    assert opt.param_groups[0]["lr"] == 0.1
