"""Adagrad, Adadelta, RMSprop and the schedules ExponentialLR, LinearLR, OneCycleLR,
ReduceLROnPlateau and SequentialLR against torch.optim: parameters after every step (float64),
lr (and momentum) at every step, state_dict names and round trips, errors."""

import numpy as np
import pytest

import tinytensor as tt

from .test_optim import (
    assert_same_lrs,
    assert_same_trajectory,
    groups_of,
    make_problem,
    mlp_loss,
    torch_params,
    trajectory,
    tt_params,
    two_group_optimizers,
)

STEPS = 10

CASES = [
    ("Adagrad", dict(lr=0.1), None),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1), None),
    ("Adagrad", dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-6, maximize=True), None),
    ("Adadelta", dict(), None),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1), None),
    ("Adadelta", dict(lr=2.0, maximize=True), None),
    ("RMSprop", dict(lr=0.01), None),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.9), None),
    ("RMSprop", dict(lr=0.01, centered=True, weight_decay=0.1), None),
    ("RMSprop", dict(lr=0.005, centered=True, momentum=0.5, eps=1e-5, maximize=True), None),
    # weights and biases in separate groups with their own hyperparameters
    ("Adagrad", dict(lr=0.1), ({"lr": 0.05}, {"lr": 0.2, "weight_decay": 0.0})),
    ("RMSprop", dict(lr=0.01, momentum=0.9), ({}, {"momentum": 0.0, "centered": True})),
    ("Adadelta", dict(), ({"rho": 0.95}, {"lr": 0.5})),
]


@pytest.mark.parametrize("name, kwargs, groups", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_optimizer_matches_torch(torch, name, kwargs, groups):
    init, x, y = make_problem()
    ours, theirs = tt_params(init), torch_params(torch, init)
    opt = getattr(tt.optim, name)(groups_of(ours, groups), **kwargs)
    ref = getattr(torch.optim, name)(groups_of(theirs, groups), **kwargs)
    assert_same_trajectory(
        trajectory(tt, ours, opt, x, y, steps=STEPS),
        trajectory(torch, theirs, ref, x, y, steps=STEPS),
        tol=1e-9,
    )


def to_tt(torch, value):
    """A torch state_dict value as ours: tensors to Tensors, containers walked."""
    if isinstance(value, torch.Tensor):
        return tt.tensor(value.detach().numpy())
    if isinstance(value, dict):
        return {k: to_tt(torch, v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_tt(torch, v) for v in value]
    return value


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("Adagrad", dict(lr=0.1, lr_decay=0.01)),
        ("Adadelta", dict(lr=0.7)),
        ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ],
)
def test_state_dict_names_and_round_trip_match_torch(torch, tmp_path, name, kwargs):
    """Buffers carry torch's names; torch's state_dict loaded into ours continues exactly as
    torch continues; ours saved with tt.save and loaded into a fresh optimizer continues as an
    uninterrupted run."""
    init, x, y = make_problem()
    ours, theirs = tt_params(init), torch_params(torch, init)
    opt = getattr(tt.optim, name)(list(ours.values()), **kwargs)
    ref = getattr(torch.optim, name)(list(theirs.values()), **kwargs)
    trajectory(tt, ours, opt, x, y, steps=3)
    trajectory(torch, theirs, ref, x, y, steps=3)
    sd, ref_sd = opt.state_dict(), ref.state_dict()
    assert sorted(sd["state"]) == sorted(ref_sd["state"])
    for i in ref_sd["state"]:
        assert set(sd["state"][i]) == set(ref_sd["state"][i]), f"{name} state {i}"
        assert int(sd["state"][i]["step"]) == int(ref_sd["state"][i]["step"]) == 3
        for key, value in ref_sd["state"][i].items():
            np.testing.assert_allclose(np.asarray(to_tt(torch, value).numpy()),
                                       np.asarray(tt.tensor(sd["state"][i][key]).numpy()),
                                       rtol=1e-9, err_msg=f"{name} state {i} {key}")  # fmt: skip
    for g, h in zip(sd["param_groups"], ref_sd["param_groups"]):
        assert set(g) <= set(h), f"group keys torch lacks: {set(g) - set(h)}"

    # torch's state_dict -> a fresh optimizer of ours over torch's current weights
    from_torch = {k: tt.tensor(v.detach().numpy(), requires_grad=True) for k, v in theirs.items()}
    adopted = getattr(tt.optim, name)(list(from_torch.values()), **kwargs)
    adopted.load_state_dict(to_tt(torch, ref.state_dict()))
    assert_same_trajectory(
        trajectory(tt, from_torch, adopted, x, y, steps=3),
        trajectory(torch, theirs, ref, x, y, steps=3),
        tol=1e-9,
    )

    # ours -> tt.save -> tt.load -> a fresh optimizer == uninterrupted
    path = tmp_path / "optim.safetensors"
    tt.save({"model": ours, "optim": opt.state_dict()}, path)
    straight = trajectory(tt, ours, opt, x, y, steps=3)
    ckpt = tt.load(path)
    resumed = getattr(tt.optim, name)(list(ckpt["model"].values()), **kwargs)
    resumed.load_state_dict(ckpt["optim"])
    assert_same_trajectory(trajectory(tt, ckpt["model"], resumed, x, y, steps=3), straight, 0)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: tt.optim.Adagrad([p], lr_decay=-1), "Adagrad: invalid lr_decay -1"),
        (lambda p: tt.optim.Adagrad([p], initial_accumulator_value=-0.1), "initial_accumulator"),
        (lambda p: tt.optim.Adadelta([p], rho=1.5), r"Adadelta: invalid rho 1.5 \(must be in"),
        (lambda p: tt.optim.Adadelta([p], lr=-1), "Adadelta: invalid lr -1"),
        (lambda p: tt.optim.RMSprop([p], alpha=-0.5), "RMSprop: invalid alpha -0.5"),
        (lambda p: tt.optim.RMSprop([p], momentum=-1), "RMSprop: invalid momentum -1"),
        (lambda p: tt.optim.RMSprop([p, p]), "same tensor twice"),
    ],
)
def test_bad_optimizer_arguments_raise_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make(tt.ones(2, requires_grad=True))


# ---- schedules ----------------------------------------------------------------------------------

SCHEDULES = {
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 8], gamma=0.5),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.25, total_iters=4),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=12, power=2.0),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(o, T_0=4),
    "CosineAnnealingWarmRestarts-mult": lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=0.01
    ),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.8),
    "LinearLR-default": lambda m, o: m.LinearLR(o),
    "LinearLR-decay": lambda m, o: m.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=7),
    "SequentialLR-warmup-cosine": lambda m, o: m.SequentialLR(
        o, [m.LinearLR(o, start_factor=0.1, total_iters=4), m.CosineAnnealingLR(o, T_max=10)], [4]
    ),
    "SequentialLR-three": lambda m, o: m.SequentialLR(
        o,
        [m.ExponentialLR(o, 0.5), m.StepLR(o, 2, 0.3), m.LinearLR(o, 0.5, 1.0, total_iters=3)],
        milestones=[3, 9],
    ),
    "SequentialLR-nested": lambda m, o: m.SequentialLR(
        o,
        [
            m.SequentialLR(o, [m.LinearLR(o, 0.5, total_iters=2), m.ExponentialLR(o, 0.9)], [2]),
            m.StepLR(o, 3, 0.5),
        ],
        milestones=[6],
    ),  # fmt: skip
    "SequentialLR-lambda": lambda m, o: m.SequentialLR(
        o, [m.LambdaLR(o, lambda s: (s + 1) / 5), m.ExponentialLR(o, 0.9)], milestones=[5]
    ),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_matches_torch(torch, name):
    opt, ref_opt = two_group_optimizers(torch)
    ours = SCHEDULES[name](tt.optim.lr_scheduler, opt)
    theirs = SCHEDULES[name](torch.optim.lr_scheduler, ref_opt)
    assert_same_lrs(ours, theirs, opt, steps=20)


ONE_CYCLE = [
    ("SGD", dict(momentum=0.9), dict(max_lr=0.1, total_steps=20)),
    ("SGD", dict(momentum=0.9), dict(max_lr=[0.1, 0.5], total_steps=20, anneal_strategy="linear")),
    ("SGD", dict(), dict(max_lr=0.1, epochs=4, steps_per_epoch=5, cycle_momentum=False)),
    ("Adam", dict(), dict(max_lr=0.01, total_steps=21, pct_start=0.25, three_phase=True)),
    (
        "AdamW",
        dict(),
        dict(
            max_lr=0.01,
            total_steps=25,
            div_factor=10,
            final_div_factor=100,
            base_momentum=[0.8, 0.7],
            max_momentum=0.9,
        ),
    ),  # fmt: skip
]


@pytest.mark.parametrize("opt_name, opt_kwargs, kwargs", ONE_CYCLE)
def test_one_cycle_lr_and_momentum_match_torch(torch, opt_name, opt_kwargs, kwargs):
    def groups(lib):
        return [{"params": [lib.ones(1, requires_grad=True)], "lr": lr} for lr in (0.1, 0.3)]

    opt = getattr(tt.optim, opt_name)(groups(tt), **opt_kwargs)
    ref = getattr(torch.optim, opt_name)(groups(torch), **opt_kwargs)
    ours = tt.optim.lr_scheduler.OneCycleLR(opt, **kwargs)
    theirs = torch.optim.lr_scheduler.OneCycleLR(ref, **kwargs)
    total = kwargs.get("total_steps") or kwargs["epochs"] * kwargs["steps_per_epoch"]
    momentum = "betas" if "Adam" in opt_name else "momentum"
    for step in range(total):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12), step
        for g, h in zip(opt.param_groups, ref.param_groups):
            assert g[momentum] == pytest.approx(h[momentum], rel=1e-12), (step, momentum)
        opt.step(), ref.step()
        ours.step(), theirs.step()
    with pytest.raises(ValueError, match=f"OneCycleLR: stepped {total + 1} times"):
        ours.step()


PLATEAU = [
    dict(),
    dict(mode="max", factor=0.5, patience=1),
    dict(patience=0, threshold=0.1, threshold_mode="abs", cooldown=2),
    dict(factor=0.3, patience=1, min_lr=[0.01, 0.05], eps=1e-3),
    dict(mode="max", threshold=0.05, patience=2, cooldown=1),
]


@pytest.mark.parametrize("kwargs", PLATEAU)
def test_reduce_lr_on_plateau_matches_torch(torch, kwargs):
    rng = np.random.default_rng(0)
    # a validation loss that improves, stalls, wiggles and improves again
    metrics = np.concatenate([np.linspace(1.0, 0.5, 5), 0.5 + 0.02 * rng.standard_normal(25),
                              np.linspace(0.5, 0.3, 5), [0.3] * 15])  # fmt: skip
    opt, ref_opt = two_group_optimizers(torch)
    ours = tt.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(ref_opt, **kwargs)
    lrs = []
    for i, metric in enumerate(metrics):
        value = tt.tensor(metric) if i % 2 else float(metric)  # a loss Tensor or a number
        ours.step(value)
        theirs.step(float(metric))
        assert [g["lr"] for g in opt.param_groups] == pytest.approx(
            [g["lr"] for g in ref_opt.param_groups], rel=1e-12
        ), f"step {i}"
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
        lrs.append(ours.get_last_lr()[0])
        for key in ("best", "num_bad_epochs", "cooldown_counter", "last_epoch"):
            assert getattr(ours, key) == pytest.approx(getattr(theirs, key)), (i, key)
    assert len(set(lrs)) > 1, "the metric sequence should trigger at least one reduction"


@pytest.mark.parametrize(
    "make",
    [
        lambda m, o: m.ExponentialLR(o, gamma=0.9),
        lambda m, o: m.OneCycleLR(o, max_lr=0.5, total_steps=30),
        lambda m, o: m.SequentialLR(
            o, [m.LinearLR(o, 0.2, total_iters=3), m.ExponentialLR(o, 0.7)], milestones=[3]
        ),
    ],
    ids=["ExponentialLR", "OneCycleLR", "SequentialLR"],
)
def test_schedule_state_dict_resumes(make):
    def fresh():
        opt = tt.optim.SGD([tt.ones(1, requires_grad=True)], lr=0.1, momentum=0.9)
        return opt, make(tt.optim.lr_scheduler, opt)

    opt, sched = fresh()
    for _ in range(5):
        sched.step()
    saved_opt, saved = opt.state_dict(), sched.state_dict()
    straight = []
    for _ in range(6):
        sched.step()
        straight.append(sched.get_last_lr())

    opt2, sched2 = fresh()
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved)
    assert sched2.get_last_lr() == [g["lr"] for g in opt2.param_groups]
    resumed = []
    for _ in range(6):
        sched2.step()
        resumed.append(sched2.get_last_lr())
    assert resumed == straight


def test_reduce_lr_on_plateau_state_dict_resumes():
    opt = tt.optim.SGD([tt.ones(1, requires_grad=True)], lr=0.1)
    sched = tt.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, cooldown=1)
    for metric in [1.0, 0.9, 0.95, 0.97]:
        sched.step(metric)
    saved, saved_opt = sched.state_dict(), opt.state_dict()
    assert "optimizer" not in saved
    opt2 = tt.optim.SGD([tt.ones(1, requires_grad=True)], lr=0.1)
    opt2.load_state_dict(saved_opt)
    sched2 = tt.optim.lr_scheduler.ReduceLROnPlateau(opt2)
    sched2.load_state_dict(saved)
    for metric in [0.99, 0.98, 0.97, 0.99]:
        sched.step(metric)
        sched2.step(metric)
        assert sched2.get_last_lr() == sched.get_last_lr()
    assert sched.get_last_lr()[0] < 0.01


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda m, o: m.ExponentialLR(o, gamma=0), ValueError, "ExponentialLR: gamma .* gamma=0"),
        (
            lambda m, o: m.LinearLR(o, start_factor=0),
            ValueError,
            "LinearLR: start_factor .* start_factor=0",
        ),
        (
            lambda m, o: m.LinearLR(o, end_factor=2),
            ValueError,
            "LinearLR: end_factor .* end_factor=2",
        ),
        (lambda m, o: m.LinearLR(o, total_iters=0), ValueError, "total_iters=0"),
        (lambda m, o: m.ConstantLR(o, factor=2), ValueError, "ConstantLR: factor .* factor=2"),
        (lambda m, o: m.PolynomialLR(o, total_iters=0), ValueError, "PolynomialLR: .*=0"),
        (lambda m, o: m.CosineAnnealingWarmRestarts(o, 0), ValueError, "T_0=0"),
        (lambda m, o: m.CosineAnnealingWarmRestarts(o, 2, T_mult=0), ValueError, "T_mult=0"),
        (lambda m, o: m.OneCycleLR(o, 0.1), ValueError, "OneCycleLR: give total_steps"),
        (lambda m, o: m.OneCycleLR(o, 0.1, total_steps=-3), ValueError, "total_steps=-3"),
        (lambda m, o: m.OneCycleLR(o, 0.1, 10, pct_start=2), ValueError, "pct_start=2"),
        (lambda m, o: m.OneCycleLR(o, 0.1, 10, anneal_strategy="exp"), ValueError, "'exp'"),
        (lambda m, o: m.OneCycleLR(o, [0.1], 10), ValueError, "expected 2 values of max_lr"),
        (lambda m, o: m.ReduceLROnPlateau(o, factor=1.0), ValueError, "factor=1.0"),
        (lambda m, o: m.ReduceLROnPlateau(o, mode="low"), ValueError, "mode='low'"),
        (lambda m, o: m.ReduceLROnPlateau(o, threshold_mode="x"), ValueError, "threshold_mode"),
        (lambda m, o: m.SequentialLR(o, [], []), ValueError, "at least one scheduler"),
        (
            lambda m, o: m.SequentialLR(o, [m.StepLR(o, 2)] * 2, []),
            ValueError,
            "2 schedulers need 1",
        ),
        (
            lambda m, o: m.SequentialLR(o, [m.ReduceLROnPlateau(o)], []),
            ValueError,
            "schedulers\\[0\\]",
        ),
    ],
)
def test_bad_schedule_arguments_raise_clear_errors(make, error, match):
    opt = tt.optim.SGD([{"params": [tt.ones(1, requires_grad=True)]},
                        {"params": [tt.ones(1, requires_grad=True)]}], lr=0.1)  # fmt: skip
    with pytest.raises(error, match=match):
        make(tt.optim.lr_scheduler, opt)


def test_one_cycle_needs_momentum_and_sequential_needs_one_optimizer():
    adagrad = tt.optim.Adagrad([tt.ones(1, requires_grad=True)])
    with pytest.raises(ValueError, match="cycle_momentum=True needs an optimizer with momentum"):
        tt.optim.lr_scheduler.OneCycleLR(adagrad, 0.1, 10)
    a = tt.optim.SGD([tt.ones(1, requires_grad=True)], lr=0.1)
    b = tt.optim.SGD([tt.ones(1, requires_grad=True)], lr=0.1)
    m = tt.optim.lr_scheduler
    with pytest.raises(ValueError, match=r"SequentialLR: schedulers\[1\] \(StepLR\) belongs to"):
        m.SequentialLR(a, [m.StepLR(a, 2), m.StepLR(b, 2)], [3])


def test_training_loop_with_warmup_then_cosine_matches_torch(torch):
    """A whole loop as written in PyTorch projects: AdamW, a SequentialLR warmup + cosine stepped
    per batch, RMSprop for a second parameter group's optimizer; weights match after 12 steps."""
    init, x, y = make_problem()
    results = []
    for lib, params in ((tt, tt_params(init)), (torch, torch_params(torch, init))):
        m = lib.optim.lr_scheduler
        opt = lib.optim.AdamW([params["w1"], params["b1"]], lr=0.05, weight_decay=0.1)
        opt2 = lib.optim.RMSprop([params["w2"], params["b2"]], lr=0.01, momentum=0.5)
        sched = m.SequentialLR(
            opt, [m.LinearLR(opt, 0.1, total_iters=3), m.CosineAnnealingLR(opt, 9)], [3]
        )
        sched2 = m.OneCycleLR(opt2, max_lr=0.02, total_steps=12)
        for _ in range(12):
            opt.zero_grad(), opt2.zero_grad()
            mlp_loss(params, x, y, lib).backward()
            opt.step(), opt2.step()
            sched.step(), sched2.step()
        results.append({k: v.detach().numpy().copy() for k, v in params.items()})
    assert_same_trajectory([results[0]], [results[1]], tol=1e-9)
