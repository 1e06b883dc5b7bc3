"""Optimizers, schedules and clipping against PyTorch (float64) on the same small problem.

The problem: a one-hidden-layer tanh MLP on a least-squares loss, with identical initial weights
in both libraries; after every step the parameters must agree with torch.optim's.
"""

import math

import numpy as np
import pytest

import tinytensor as tt

STEPS = 5


def make_problem(seed=0):
    """Initial weights and a batch, as float64 numpy arrays (shared by both libraries)."""
    rng = np.random.default_rng(seed)
    init = {
        "w1": rng.normal(size=(4, 5)) * 0.5,
        "b1": rng.normal(size=5) * 0.1,
        "w2": rng.normal(size=(5, 3)) * 0.5,
        "b2": rng.normal(size=3) * 0.1,
    }
    x, y = rng.normal(size=(8, 4)), rng.normal(size=(8, 3))
    return init, x, y


def tt_params(init):
    return {k: tt.tensor(v, requires_grad=True) for k, v in init.items()}


def torch_params(torch, init):
    return {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}


def mlp_loss(p, x, y, lib):
    """mean((tanh(x W1 + b1) W2 + b2 - y)^2), written once for both libraries."""
    x, y = lib.tensor(x), lib.tensor(y)
    out = (x @ p["w1"] + p["b1"]).tanh() @ p["w2"] + p["b2"]
    return ((out - y) ** 2).mean()


def groups_of(params, spec):
    """The optimizer's params argument: a plain list, or weight/bias groups with their own lr."""
    if spec is None:
        return list(params.values())
    weights = [params["w1"], params["w2"]]
    biases = [params["b1"], params["b2"]]
    return [{"params": weights, **spec[0]}, {"params": biases, **spec[1]}]


def trajectory(lib, params, opt, x, y, steps=STEPS):
    """Parameter values (numpy) after each of `steps` optimizer steps."""
    out = []
    for _ in range(steps):
        opt.zero_grad()
        mlp_loss(params, x, y, lib).backward()
        opt.step()
        out.append({k: np.array(v.detach().numpy()) for k, v in params.items()})
    return out


def assert_same_trajectory(ours, theirs, tol=1e-6):
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for name in a:
            np.testing.assert_allclose(
                a[name], b[name], rtol=tol, atol=tol, err_msg=f"step {step + 1}, parameter {name}"
            )


# (optimizer name, keyword arguments, param-group spec or None)
CASES = [
    ("SGD", dict(lr=0.1), None),
    ("SGD", dict(lr=0.1, momentum=0.9), None),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3), None),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True), None),
    ("SGD", dict(lr=0.1, momentum=0.5, weight_decay=0.1), None),
    ("SGD", dict(lr=0.05, momentum=0.9, maximize=True), None),
    ("Adam", dict(lr=0.05), None),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1), None),
    ("Adam", dict(lr=0.05, amsgrad=True), None),
    ("AdamW", dict(lr=0.05), None),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True), None),
    ("AdamW", dict(lr=0.05, maximize=True), None),
    # weights and biases in separate groups: different lr, no decay on biases
    ("AdamW", dict(lr=0.05, weight_decay=0.2), ({"lr": 0.02}, {"lr": 0.1, "weight_decay": 0.0})),
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1), ({}, {"lr": 0.3, "weight_decay": 0.0})),
]


@pytest.mark.parametrize("name, kwargs, groups", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_optimizer_matches_torch(torch, name, kwargs, groups):
    init, x, y = make_problem()
    ours = tt_params(init)
    theirs = torch_params(torch, init)
    opt = getattr(tt.optim, name)(groups_of(ours, groups), **kwargs)
    ref = getattr(torch.optim, name)(groups_of(theirs, groups), **kwargs)
    assert_same_trajectory(trajectory(tt, ours, opt, x, y), trajectory(torch, theirs, ref, x, y))


def test_state_buffer_names_match_torch(torch):
    """A PyTorch user finds the same buffers: state[i] has momentum_buffer / exp_avg / ..."""
    init, x, y = make_problem()
    for name, kwargs in [("SGD", dict(momentum=0.9)), ("AdamW", dict(amsgrad=True))]:
        ours, theirs = tt_params(init), torch_params(torch, init)
        opt = getattr(tt.optim, name)(list(ours.values()), **kwargs)
        ref = getattr(torch.optim, name)(list(theirs.values()), **kwargs)
        trajectory(tt, ours, opt, x, y, steps=1)
        trajectory(torch, theirs, ref, x, y, steps=1)
        sd, ref_sd = opt.state_dict(), ref.state_dict()
        assert sorted(sd["state"]) == sorted(ref_sd["state"])
        assert set(sd["state"][0]) == set(ref_sd["state"][0]), name
        assert [g["params"] for g in sd["param_groups"]] == [
            g["params"] for g in ref_sd["param_groups"]
        ]


def test_step_updates_in_place_and_keeps_dtype():
    w = tt.randn(3, 2, requires_grad=True)  # float32
    array = w._array
    opt = tt.optim.AdamW([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    assert w._array is array, "the parameter's array must be updated in place"
    assert w.dtype == tt.float32 and opt.state[w]["exp_avg"].dtype == tt.float32
    assert not np.array_equal(w.numpy(), array.copy() * 0)


def test_params_without_grad_are_skipped_and_modules_are_accepted():
    class TinyModule:  # duck typing: anything with parameters()
        def __init__(self):
            self.a = tt.ones(2, requires_grad=True)
            self.b = tt.ones(2, requires_grad=True)

        def parameters(self):
            return iter([self.a, self.b])

    m = TinyModule()
    opt = tt.optim.SGD(m, lr=0.5)
    (m.a * 2).sum().backward()  # b gets no gradient
    opt.step()
    np.testing.assert_array_equal(m.a.numpy(), [0.0, 0.0])  # 1 - 0.5 * 2
    np.testing.assert_array_equal(m.b.numpy(), [1.0, 1.0])


def test_zero_grad():
    w = tt.ones(2, requires_grad=True)
    opt = tt.optim.SGD([w], lr=0.1)
    (w * 3).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])
    opt.zero_grad()
    assert w.grad is None


def test_add_param_group_and_closure(torch):
    init, x, y = make_problem()
    ours, theirs = tt_params(init), torch_params(torch, init)
    opt = tt.optim.Adam([ours["w1"], ours["b1"]], lr=0.05)
    ref = torch.optim.Adam([theirs["w1"], theirs["b1"]], lr=0.05)
    opt.add_param_group({"params": [ours["w2"], ours["b2"]], "lr": 0.01})
    ref.add_param_group({"params": [theirs["w2"], theirs["b2"]], "lr": 0.01})
    for _ in range(3):

        def closure():
            opt.zero_grad()
            loss = mlp_loss(ours, x, y, tt)
            loss.backward()
            return loss

        def ref_closure():
            ref.zero_grad()
            loss = mlp_loss(theirs, x, y, torch)
            loss.backward()
            return loss

        assert opt.step(closure).item() == pytest.approx(ref.step(ref_closure).item(), rel=1e-9)
    for k in ours:
        np.testing.assert_allclose(ours[k].numpy(), theirs[k].detach().numpy(), rtol=1e-9)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda p: tt.optim.SGD([], lr=0.1), "empty parameter list"),
        (lambda p: tt.optim.SGD([p], lr=-1.0), "invalid lr"),
        (lambda p: tt.optim.SGD([p], lr=0.1, nesterov=True), "Nesterov"),
        (lambda p: tt.optim.Adam([p], betas=(0.9, 1.0)), "invalid betas"),
        (lambda p: tt.optim.Adam([p, p]), "same tensor twice"),
        (lambda p: tt.optim.Adam([{"params": [p]}, {"params": [p]}]), "more than one"),
        (lambda p: tt.optim.Adam([p * 2]), "not a leaf"),
        (lambda p: tt.optim.Adam([p.numpy()]), "not a Tensor"),
        (lambda p: tt.optim.Adam({p}), "not a set"),
    ],
)
def test_bad_arguments_raise_clear_errors(make, match):
    p = tt.ones(2, requires_grad=True)
    with pytest.raises((ValueError, TypeError), match=match):
        make(p)


def test_load_state_dict_rejects_a_different_layout():
    a, b = tt.ones(2, requires_grad=True), tt.ones(3, requires_grad=True)
    sd = tt.optim.Adam([a, b]).state_dict()
    with pytest.raises(ValueError, match="group 0 was saved with 2 parameters"):
        tt.optim.Adam([a]).load_state_dict(sd)
    with pytest.raises(ValueError, match=r"1 parameter group\(s\), this optimizer has 2"):
        tt.optim.Adam([{"params": [a]}, {"params": [b]}]).load_state_dict(sd)


# ---- checkpoint and resume ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, kwargs",
    [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)), ("AdamW", dict(lr=0.05, amsgrad=True))],
)
def test_resume_from_checkpoint_continues_identically(tmp_path, name, kwargs):
    """Three steps, tt.save, fresh objects, tt.load, three more == six uninterrupted steps."""
    init, x, y = make_problem()
    make_opt = getattr(tt.optim, name)
    make_sched = lambda opt: tt.optim.lr_scheduler.get_cosine_schedule_with_warmup(opt, 2, 6)

    def run(params, opt, sched, steps):
        for _ in range(steps):
            opt.zero_grad()
            mlp_loss(params, x, y, tt).backward()
            opt.step()
            sched.step()

    straight = tt_params(init)
    opt = make_opt(groups_of(straight, ({}, {"weight_decay": 0.0})), **kwargs)
    sched = make_sched(opt)
    run(straight, opt, sched, 6)

    first = tt_params(init)
    opt = make_opt(groups_of(first, ({}, {"weight_decay": 0.0})), **kwargs)
    sched = make_sched(opt)
    run(first, opt, sched, 3)
    path = tmp_path / "ckpt.safetensors"
    tt.save({"model": first, "optim": opt.state_dict(), "sched": sched.state_dict()}, path)
    del first, opt, sched

    ckpt = tt.load(path)
    resumed = ckpt["model"]
    assert all(p.requires_grad for p in resumed.values())
    opt = make_opt(groups_of(resumed, ({}, {"weight_decay": 0.0})), **kwargs)
    sched = make_sched(opt)
    opt.load_state_dict(ckpt["optim"])
    sched.load_state_dict(ckpt["sched"])
    run(resumed, opt, sched, 3)

    for k in straight:
        np.testing.assert_array_equal(resumed[k].numpy(), straight[k].numpy(), err_msg=k)
    assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]


def test_load_state_dict_copies_and_casts_buffers():
    w64 = tt.ones(2, dtype=tt.float64, requires_grad=True)
    opt = tt.optim.Adam([w64])
    (w64 * w64).sum().backward()
    opt.step()
    w32 = tt.ones(2, requires_grad=True)
    other = tt.optim.Adam([w32])
    other.load_state_dict(opt.state_dict())
    assert other.state[w32]["exp_avg"].dtype == tt.float32
    assert other.state[w32]["exp_avg"]._array is not opt.state[w64]["exp_avg"]._array


def test_optimizer_on_device_matches_cpu(device):
    init, x, y = make_problem()
    cpu = tt_params(init)
    dev = {k: tt.tensor(v, device=device, requires_grad=True) for k, v in init.items()}
    opt_cpu, opt_dev = tt.optim.AdamW(list(cpu.values())), tt.optim.AdamW(list(dev.values()))
    for params, opt in [(cpu, opt_cpu), (dev, opt_dev)]:
        xd, yd = tt.tensor(x).to(params["w1"].device), tt.tensor(y).to(params["w1"].device)
        out = (xd @ params["w1"] + params["b1"]).tanh() @ params["w2"] + params["b2"]
        ((out - yd) ** 2).mean().backward()
        tt.optim.clip_grad_norm_(list(params.values()), 0.5)
        opt.step()
    for k in cpu:
        assert dev[k].device == device
        np.testing.assert_allclose(dev[k].numpy(), cpu[k].numpy(), rtol=1e-10)


# ---- gradient accumulation ---------------------------------------------------------------------


def test_gradient_accumulation_of_two_half_batches_equals_the_full_batch(torch):
    init, x, y = make_problem()
    full, accumulated = tt_params(init), tt_params(init)
    mlp_loss(full, x, y, tt).backward()
    for half in (slice(0, 4), slice(4, 8)):  # each half's mean loss, weighted by its share
        (mlp_loss(accumulated, x[half], y[half], tt) * 0.5).backward()

    reference = torch_params(torch, init)
    mlp_loss(reference, x, y, torch).backward()
    for k in full:
        np.testing.assert_allclose(full[k].grad.numpy(), reference[k].grad.numpy(), rtol=1e-10)
        np.testing.assert_allclose(accumulated[k].grad.numpy(), full[k].grad.numpy(), rtol=1e-10)

    for params in (full, accumulated):
        tt.optim.SGD(list(params.values()), lr=0.1, momentum=0.9).step()
    for k in full:
        np.testing.assert_allclose(accumulated[k].numpy(), full[k].numpy(), rtol=1e-12)


# ---- gradient clipping -------------------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(torch, norm_type, max_norm):
    rng = np.random.default_rng(1)
    grads = [rng.normal(size=s) for s in [(3, 4), (4,), (2, 2, 2)]]
    ours = [tt.zeros(g.shape, dtype=tt.float64, requires_grad=True) for g in grads]
    theirs = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, q, g in zip(ours, theirs, grads):
        p.grad, q.grad = tt.tensor(g), torch.tensor(g)
    extra = tt.zeros(2, requires_grad=True)  # no gradient: skipped

    total = tt.optim.clip_grad_norm_([*ours, extra], max_norm, norm_type=norm_type)
    ref_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)

    assert total.item() == pytest.approx(ref_total.item(), rel=1e-12)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-12)


def test_clip_grad_norm_nonfinite_and_value_clipping(torch):
    w = tt.zeros(3, requires_grad=True)
    w.grad = tt.tensor([1.0, float("inf"), 0.0])
    with pytest.raises(RuntimeError, match="inf"):
        tt.optim.clip_grad_norm_(w, 1.0, error_if_nonfinite=True)

    g = np.array([-3.0, 0.5, 2.0])
    w.grad, ref = tt.tensor(g, dtype=tt.float32), torch.zeros(3, requires_grad=True)
    ref.grad = torch.tensor(g)
    tt.optim.clip_grad_value_([w], 1.0)
    torch.nn.utils.clip_grad_value_([ref], 1.0)
    np.testing.assert_array_equal(w.grad.numpy(), ref.grad.numpy())


# ---- learning-rate schedules -------------------------------------------------------------------


def two_group_optimizers(torch):
    def groups(lib):
        return [{"params": [lib.ones(1, requires_grad=True)], "lr": lr} for lr in (0.1, 0.3)]

    return tt.optim.SGD(groups(tt)), torch.optim.SGD(groups(torch))


def assert_same_lrs(ours, theirs, opt, steps=20):
    for step in range(steps):
        assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12, abs=1e-15), (
            f"step {step}"
        )
        assert [g["lr"] for g in opt.param_groups] == ours.get_last_lr()
        opt.step()
        ours.step()
        theirs.optimizer.step()
        theirs.step()


SCHEDULES = {
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda s: 0.9**s),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, [lambda s: 0.9**s, lambda s: 1 / (s + 1)]),
    "StepLR": lambda m, o: m.StepLR(o, step_size=3, gamma=0.5),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
}


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_matches_torch(torch, name):
    opt, ref_opt = two_group_optimizers(torch)
    ours = SCHEDULES[name](tt.optim.lr_scheduler, opt)
    theirs = SCHEDULES[name](torch.optim.lr_scheduler, ref_opt)
    assert_same_lrs(ours, theirs, opt)  # 20 steps: past CosineAnnealingLR's T_max


HF_SCHEDULES = {
    "linear": lambda m, o: m.get_linear_schedule_with_warmup(o, 4, 15),
    "cosine": lambda m, o: m.get_cosine_schedule_with_warmup(o, 4, 15),
    "cosine-1.5-cycles": lambda m, o: m.get_cosine_schedule_with_warmup(o, 3, 15, num_cycles=1.5),
    "constant": lambda m, o: m.get_constant_schedule_with_warmup(o, 5),
}


@pytest.mark.parametrize("name", HF_SCHEDULES)
def test_warmup_schedule_matches_huggingface(torch, transformers, name):
    opt, ref_opt = two_group_optimizers(torch)
    ours = HF_SCHEDULES[name](tt.optim.lr_scheduler, opt)
    theirs = HF_SCHEDULES[name](transformers, ref_opt)
    assert_same_lrs(ours, theirs, opt)  # 20 steps: past num_training_steps (lr stays 0)


def test_schedule_state_dict_resumes(torch):
    opt, ref_opt = two_group_optimizers(torch)
    sched = tt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    ref = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=2, gamma=0.5)
    for _ in range(5):
        sched.step()
        ref_opt.step()
        ref.step()
    state = sched.state_dict()
    # created in the other order than PyTorch recommends: the scheduler's load restores the lr
    fresh_opt, _ = two_group_optimizers(torch)
    fresh_opt.load_state_dict(opt.state_dict())
    resumed = tt.optim.lr_scheduler.StepLR(fresh_opt, step_size=2, gamma=0.5)
    resumed.load_state_dict(state)
    for _ in range(4):
        assert [g["lr"] for g in fresh_opt.param_groups] == pytest.approx(ref.get_last_lr())
        resumed.step()
        ref_opt.step()
        ref.step()
        assert resumed.get_last_lr() == pytest.approx(ref.get_last_lr(), rel=1e-12)
