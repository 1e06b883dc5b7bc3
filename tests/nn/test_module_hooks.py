"""nn.Module's hooks, state-dict protocol and registration rules against torch.

Each test is a small program written the way PyTorch users write it, run once with `lib = torch`
and once with `lib = tinytensor` on the same weights. What the program records (the order of the
hook calls, every argument each hook received, as type names, shapes and values, the outputs,
the state_dict keys, the errors' types and the attribute their message names, the reprs) must be
the same for both.
"""

import copy
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


@pytest.fixture
def libs(torch, float64):
    """(tinytensor, torch), both computing in float64."""
    return tt, torch


def global_hooks(lib):
    """Where the hooks common to all modules live: torch.nn.modules.module, tinytensor.nn.module"""
    return lib.nn.modules.module if lib.__name__ == "torch" else tt.nn.module


def snap(x):
    """What a hook received, comparable across the libraries: tensors as (shape, values),
    modules by class name, containers element by element."""
    if hasattr(x, "shape") and hasattr(x, "detach"):
        return ("tensor", tuple(x.shape), np.array(x.detach().numpy(), dtype=np.float64))
    if hasattr(x, "named_modules"):
        return ("module", type(x).__name__)
    if isinstance(x, tuple):
        return ("tuple", [snap(v) for v in x])
    if isinstance(x, list):
        return ("list", [snap(v) for v in x])
    if isinstance(x, dict):
        return ("dict", [(k, snap(v)) for k, v in x.items()])
    return x


def assert_same(ours, theirs, path="log"):
    """Recursive equality of two snapped records (arrays to 1e-12)."""
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), f"{path}: {ours!r} is not an array"
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=path)
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), (
            f"{path}: {ours!r} != {theirs!r}"
        )
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert ours == theirs, f"{path}: {ours!r} != {theirs!r}"


def same_weights(ours, theirs, torch):
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})


def data(lib, *shape, seed=0):
    return lib.tensor(np.random.default_rng(seed).standard_normal(shape))


def mlp(lib):
    nn_ = lib.nn

    class MLP(nn_.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn_.Linear(3, 4)
            self.act = nn_.ReLU()
            self.fc2 = nn_.Linear(4, 2)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    return MLP()


def both(libs, program):
    """Runs program(lib, model) on tinytensor's and torch's MLP with the same weights."""
    ours_lib, torch = libs
    ours, theirs = mlp(ours_lib), mlp(torch)
    same_weights(ours, theirs, torch)
    return program(ours_lib, ours), program(torch, theirs)


# ---- forward hooks ----------------------------------------------------------------------------


def test_every_forward_hook_sees_what_torch_passes_in_the_same_order(libs):
    def program(lib, model):
        log, handles = [], []
        g = global_hooks(lib)
        handles.append(
            g.register_module_forward_pre_hook(lambda m, a: log.append(("gpre", snap(m), snap(a))))
        )
        handles.append(
            g.register_module_forward_hook(
                lambda m, a, o: log.append(("gpost", snap(m), snap(a), snap(o)))
            )
        )
        try:
            for name, module in model.named_modules():
                handles.append(
                    module.register_forward_pre_hook(
                        lambda m, a, name=name: log.append(("pre", name, snap(m), snap(a)))
                    )
                )
                handles.append(
                    module.register_forward_hook(
                        lambda m, a, o, name=name: log.append(("post", name, snap(a), snap(o)))
                    )
                )
            out = model(data(lib, 2, 3))
            log.append(("out", snap(out)))
            for h in handles:
                h.remove()
            model(data(lib, 2, 3))  # nothing is recorded any more
            log.append("removed")
        finally:
            for h in handles:
                h.remove()
        return log  # fmt: skip

    ours, theirs = both(libs, program)
    assert len(theirs) == 1 + 4 * 4 + 1 and ours[-1] == "removed"
    assert_same(ours, theirs)


def test_hook_return_values_replace_inputs_and_outputs(libs):
    def program(lib, model):
        log = []
        # a single value is wrapped in a tuple; the next pre-hook sees the replacement
        model.fc1.register_forward_pre_hook(lambda m, a: a[0] * 2)
        model.fc1.register_forward_pre_hook(lambda m, a: log.append(("pre2", snap(a))))
        model.fc2.register_forward_pre_hook(lambda m, a: (a[0] + 1,))
        model.act.register_forward_hook(lambda m, a, o: o - 0.5)  # a new output
        model.act.register_forward_hook(lambda m, a, o: log.append(("act-post", snap(o))))
        model.register_forward_hook(lambda m, a, o: (o, "extra"))  # any object is an output
        out, extra = model(data(lib, 2, 3))
        log.append(("out", snap(out), extra))
        return log

    assert_same(*both(libs, program))


def test_prepend_and_global_hooks_run_first(libs):
    def program(lib, model):
        log, g = [], global_hooks(lib)
        model.fc1.register_forward_pre_hook(lambda m, a: log.append("pre-a"))
        model.fc1.register_forward_pre_hook(lambda m, a: log.append("pre-b"))
        model.fc1.register_forward_pre_hook(lambda m, a: log.append("pre-first"), prepend=True)
        model.fc1.register_forward_hook(lambda m, a, o: log.append("post-a"))
        model.fc1.register_forward_hook(lambda m, a, o: log.append("post-first"), prepend=True)
        model.fc1.register_forward_hook(lambda m, a, o: log.append("post-b"))
        handles = [
            g.register_module_forward_pre_hook(lambda m, a: log.append(f"gpre-{type(m).__name__}")),
            g.register_module_forward_hook(lambda m, a, o: log.append(f"gpost-{type(m).__name__}")),
        ]
        try:
            model.fc1(data(lib, 1, 3))
        finally:
            for h in handles:
                h.remove()
        return log

    ours, theirs = both(libs, program)
    assert theirs[:2] == ["gpre-Linear", "pre-first"] and theirs[-1] == "post-b"
    assert ours == theirs


def test_with_kwargs_hooks_get_and_replace_args_and_kwargs(libs):
    ours_lib, torch = libs

    def program(lib):
        class Scaled(lib.nn.Module):
            def forward(self, x, scale=1.0, *, shift=0.0):
                return x * scale + shift

        m, log = Scaled(), []

        def pre(module, args, kwargs):
            log.append(("pre", snap(args), sorted(kwargs)))
            return (args[0] + 1,), {**kwargs, "shift": 10.0}

        m.register_forward_pre_hook(pre, with_kwargs=True)
        m.register_forward_pre_hook(lambda mod, a: log.append(("plain-pre", snap(a))))
        m.register_forward_hook(
            lambda mod, a, kw, o: log.append(("post", snap(a), kw, snap(o))), with_kwargs=True
        )
        m.register_forward_hook(lambda mod, a, o: log.append(("plain-post", snap(a), snap(o))))
        log.append(("out", snap(m(data(lib, 2), 3.0, shift=1.0))))
        bad = Scaled()
        bad.register_forward_pre_hook(lambda mod, a, kw: "not a pair", with_kwargs=True)
        with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
            bad(data(lib, 2))
        return log

    assert_same(program(ours_lib), program(torch))


def test_always_call_hooks_run_when_forward_raises(libs):
    ours_lib, torch = libs

    def program(lib):
        class Fails(lib.nn.Module):
            def forward(self, x):
                raise ValueError("forward failed")

        log, g = [], global_hooks(lib)
        m = Fails()
        m.register_forward_pre_hook(lambda mod, a: log.append(("pre", snap(a))))
        m.register_forward_hook(lambda mod, a, o: log.append("not always"))
        m.register_forward_hook(
            lambda mod, a, o: log.append(("always", snap(a), o)), always_call=True
        )
        m.register_forward_hook(
            lambda mod, a, kw, o: log.append(("always-kw", kw, o)),
            always_call=True,
            with_kwargs=True,
        )

        def broken(mod, a, o):
            raise KeyError("the hook fails too")

        m.register_forward_hook(broken, always_call=True)
        handle = g.register_module_forward_hook(
            lambda mod, a, o: log.append(("global-always", o)), always_call=True
        )
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with pytest.raises(ValueError, match="forward failed"):
                    m(data(lib, 2))
            log.append([str(w.message).split(":")[0] for w in caught])
            ok = lib.nn.Identity()
            ok.register_forward_hook(lambda mod, a, o: log.append("always, once"), always_call=True)
            ok(data(lib, 1))
        finally:
            handle.remove()
        return log  # fmt: skip

    ours, theirs = program(ours_lib), program(torch)
    assert ("always-kw", {}, None) in theirs and "not always" not in theirs
    assert_same(ours, theirs)


def test_handles_remove_once_and_work_as_context_managers(libs):
    def program(lib, model):
        log = []
        h = model.fc1.register_forward_hook(lambda m, a, o: log.append("hook"))
        with model.fc2.register_forward_pre_hook(lambda m, a: log.append("ctx")) as h2:
            model(data(lib, 1, 3))
        model(data(lib, 1, 3))
        h.remove()
        h.remove()  # a second remove does nothing
        h2.remove()
        model(data(lib, 1, 3))
        log.append((type(h).__name__, isinstance(h.id, int), h2.id > h.id))
        return log

    ours, theirs = both(libs, program)
    assert theirs == ["hook", "ctx", "hook", ("RemovableHandle", True, True)]
    assert ours == theirs


def test_removing_every_hook_brings_back_the_fast_call():
    m = nn.Linear(2, 2)
    assert not m._call_hooks
    h = m.register_forward_hook(lambda *a: None)
    g = tt.nn.module.register_module_forward_pre_hook(lambda *a: None)
    assert m._call_hooks and nn.ReLU()._call_hooks  # a global hook reaches every module
    h.remove()
    g.remove()
    m(tt.ones(2))
    assert not m._call_hooks and not nn.Module._call_hooks and "_call_hooks" not in vars(m)


def test_deepcopy_keeps_hooks_and_registration(libs):
    def program(lib, model):
        log = []
        model.fc1.register_forward_hook(lambda m, a, o: log.append(type(m).__name__))
        clone = copy.deepcopy(model)
        clone(data(lib, 1, 3))
        with lib.no_grad():
            clone.fc1.weight.mul_(0)
        fresh = clone.fc1.weight is not model.fc1.weight
        log.append((fresh, list(clone.state_dict()), snap(model.fc1.weight)))
        clone.fc3 = lib.nn.Linear(2, 2)  # the copy registers as any module
        log.append([n for n, _ in clone.named_parameters()])
        return log

    assert_same(*both(libs, program))


def test_module_registration_hooks(libs):
    ours_lib, torch = libs

    def program(lib):
        g, log = global_hooks(lib), []
        handles = [
            g.register_module_module_registration_hook(lambda m, n, v: log.append(("module", n))),
            g.register_module_parameter_registration_hook(lambda m, n, v: log.append(("param", n))),
            g.register_module_buffer_registration_hook(lambda m, n, v: log.append(("buffer", n))),
        ]
        try:
            m = lib.nn.Module()
            m.fc = lib.nn.Linear(1, 1)
            m.register_buffer("steps", lib.zeros(1))
            m.w = lib.nn.Parameter(lib.ones(1))
            lib.nn.Sequential(lib.nn.ReLU()).append(lib.nn.Tanh())
            lib.nn.ModuleDict({"a": lib.nn.ReLU()})
            lib.nn.ParameterList([lib.ones(1)])
        finally:
            for h in handles:
                h.remove()
        return log

    assert program(ours_lib) == program(torch)


# ---- state_dict -------------------------------------------------------------------------------


def test_state_dict_hooks(libs):
    def program(lib, model):
        log = []
        model.fc1.register_state_dict_pre_hook(
            lambda m, prefix, keep: log.append(("pre", prefix, keep))
        )

        def post(m, state, prefix, meta):
            log.append(("post", prefix, list(state), meta))
            state[prefix + "note"] = lib.zeros(1)

        model.fc2.register_state_dict_post_hook(post)
        model._register_state_dict_hook(
            lambda m, state, prefix, meta: OrderedDict(only=state[prefix + "fc1.bias"])
        )
        state = model.state_dict(prefix="net.", keep_vars=True)
        log.append(("keys", list(state)))
        model.fc1._register_state_dict_hook(lambda *a: {"from fc1": 1})  # used at the root only
        log.append(("fc1 as root", list(model.fc1.state_dict())))
        log.append(("fc1 as child", list(model.state_dict())))
        bad = lib.nn.Linear(1, 1)
        bad.register_state_dict_post_hook(lambda *a: {})
        with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
            bad.state_dict()
        return log  # fmt: skip

    assert_same(*both(libs, program))


def test_load_state_dict_hooks_rename_old_keys_and_edit_incompatible_keys(libs):
    def program(lib, model):
        log = []
        old = {k.replace("fc1.", "first."): v.clone() for k, v in model.state_dict().items()}
        old["stale.counter"] = lib.zeros(1)
        with lib.no_grad():
            for p in model.parameters():
                p.zero_()

        def rename(module, state, prefix, meta, strict, missing, unexpected, errors):
            log.append(("pre", type(module).__name__, prefix, meta, strict, sorted(state)))
            for key in [k for k in state if k.startswith(prefix + "first.")]:
                state[key.replace("first.", "fc1.")] = state.pop(key)

        def forgive(module, incompatible):
            log.append(
                (
                    "post",
                    type(module).__name__,
                    list(incompatible.missing_keys),
                    list(incompatible.unexpected_keys),
                )
            )
            incompatible.unexpected_keys.clear()

        model.register_load_state_dict_pre_hook(rename)
        model.fc2.register_load_state_dict_pre_hook(
            lambda m, state, prefix, *rest: log.append(("child-pre", prefix, sorted(state)))
        )
        model.register_load_state_dict_post_hook(forgive)
        result = model.load_state_dict(old)
        log.append(("result", repr(result), snap(model.fc1.weight)))
        model.register_load_state_dict_post_hook(lambda m, keys: "a value")
        with pytest.raises(AssertionError, match="not expected to return new values"):
            model.load_state_dict(old)
        return log  # fmt: skip

    ours, theirs = both(libs, program)
    result = next(entry for entry in theirs if entry[0] == "result")
    assert result[1] == "<All keys matched successfully>"
    assert_same(ours, theirs)


def test_extra_state_round_trips(libs):
    ours_lib, torch = libs

    def program(lib):
        class Counter(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = lib.nn.Linear(2, 2)
                self.steps = 0

            def get_extra_state(self):
                return {"steps": self.steps}

            def set_extra_state(self, state):
                self.steps = state["steps"]

        def model():
            return lib.nn.Sequential(Counter(), lib.nn.ReLU())

        log, source, target = [], model(), model()
        source[0].steps = 7
        state = source.state_dict()
        log.append((list(state), state["0._extra_state"]))
        log.append(repr(target.load_state_dict(state)))
        log.append(target[0].steps)
        del state["0._extra_state"]
        with pytest.raises(RuntimeError) as info:
            target.load_state_dict(state)
        log.append("0._extra_state" in str(info.value))
        log.append(repr(target.load_state_dict(state, strict=False)))
        plain = lib.nn.Sequential(lib.nn.Linear(2, 2))
        extra = {**plain.state_dict(), "0._extra_state": 1}
        missing, unexpected = plain.load_state_dict(extra, strict=False)
        log.append((missing, unexpected))
        return log

    ours, theirs = program(ours_lib), program(torch)
    assert theirs[2] == 7 and theirs[-1] == ([], ["0._extra_state"])
    assert ours == theirs


def test_load_state_dict_assign_and_override_of_load_from_state_dict(libs):
    ours_lib, torch = libs

    def program(lib):
        class Legacy(lib.nn.Linear):
            def _load_from_state_dict(self, state, prefix, *args):
                if prefix + "w" in state:  # an old name for the weight
                    state[prefix + "weight"] = state.pop(prefix + "w")
                super()._load_from_state_dict(state, prefix, *args)

        m = lib.nn.Sequential(Legacy(2, 2))
        state = {"0.w": lib.ones(2, 2), "0.bias": lib.zeros(2)}
        log = [repr(m.load_state_dict(state)), snap(m[0].weight)]
        before = m[0].weight
        m.load_state_dict({"0.weight": lib.full((2, 2), 3.0), "0.bias": lib.zeros(2)}, assign=True)
        log += [m[0].weight is before, type(m[0].weight).__name__, m[0].weight.requires_grad]
        log.append(snap(m[0].weight))
        return log

    assert_same(program(ours_lib), program(torch))


# ---- registration -----------------------------------------------------------------------------


def test_plain_lists_and_dicts_of_modules_are_not_registered(libs):
    ours_lib, torch = libs

    def program(lib):
        nn_ = lib.nn

        class Net(nn_.Module):
            def __init__(self):
                super().__init__()
                self.helpers = [nn_.Linear(2, 2), nn_.Linear(2, 2)]  # NOT registered
                self.critics = {"a": nn_.Linear(2, 1)}  # NOT registered
                self.scales = (nn_.Parameter(lib.ones(1)),)  # NOT registered
                self.blocks = nn_.ModuleList([nn_.Linear(2, 2)])
                self.heads = nn_.ModuleDict({"b": nn_.Linear(2, 1)})
                self.gains = nn_.ParameterList([nn_.Parameter(lib.ones(2))])
                self.table = lib.zeros(3)  # a plain tensor: neither parameter nor buffer

        net = Net()
        return [
            [n for n, _ in net.named_parameters()],
            list(net.state_dict()),
            [n for n, _ in net.named_modules()],
            [n for n, _ in net.named_buffers()],
            sum(p.numel() for p in net.parameters()),
            repr(net),
        ]

    ours, theirs = program(ours_lib), program(torch)
    assert "helpers.0.weight" not in theirs[0] and "critics.a.weight" not in theirs[1]
    assert ours == theirs


def assignments(lib):
    """(what, action) pairs that a program may try on a fresh Linear with a buffer."""
    nn_ = lib.nn
    t = lib.zeros(2, 2)
    return [
        ("tensor as parameter", lambda m: setattr(m, "weight", t), "weight"),
        ("int as parameter", lambda m: setattr(m, "bias", 3), "bias"),
        ("module as parameter", lambda m: setattr(m, "weight", nn_.ReLU()), "weight"),
        ("int as buffer", lambda m: setattr(m, "steps", 1), "steps"),
        ("string as buffer", lambda m: setattr(m, "steps", "x"), "steps"),
        ("tensor as child", lambda m: setattr(m, "act", t), "act"),
        ("int as child", lambda m: setattr(m, "act", 5), "act"),
        ("buffer over parameter", lambda m: m.register_buffer("weight", t), "weight"),
        ("buffer over attribute", lambda m: m.register_buffer("in_features", t), "in_features"),
        ("parameter over method",
         lambda m: m.register_parameter("forward", nn_.Parameter(t)), "forward"),
        ("tensor to register_parameter", lambda m: m.register_parameter("w", t), "w"),
        ("list to register_buffer", lambda m: m.register_buffer("b", [1, 2]), "b"),
        ("dotted buffer name", lambda m: m.register_buffer("a.b", t), None),
        ("empty parameter name", lambda m: m.register_parameter("", None), None),
        ("module over attribute", lambda m: m.add_module("in_features", nn_.ReLU()), "in_features"),
        ("non-bool train", lambda m: m.train("yes"), None),
        ("ModuleDict key naming a method", lambda m: nn_.ModuleDict({"keys": m}), "keys"),
    ]  # fmt: skip


def fresh_linear(lib):
    m = lib.nn.Linear(2, 2)
    m.register_buffer("steps", lib.zeros(1))
    m.act = lib.nn.ReLU()
    return m


def test_wrong_assignments_raise_torch_errors_naming_the_attribute(libs):
    ours_lib, torch = libs
    for (what, ours_action, name), (_, theirs_action, _) in zip(
        assignments(ours_lib), assignments(torch)
    ):
        errors = []
        for lib, action in ((ours_lib, ours_action), (torch, theirs_action)):
            m = fresh_linear(lib)
            with pytest.raises(Exception) as info:
                action(m)
            errors.append(info.value)
            assert name is None or f"'{name}'" in str(info.value), (what, lib.__name__, info.value)
        assert type(errors[0]) is type(errors[1]), (what, errors)


def test_allowed_reassignments_as_torch(libs):
    ours_lib, torch = libs

    def program(lib):
        m, log = fresh_linear(lib), []
        m.steps = lib.nn.Parameter(lib.ones(1))  # a Parameter replaces the buffer
        m.bias = None  # a parameter slot may hold None: left out of state_dict
        m.act = None  # so may a child's
        m.register_buffer("table", None)
        m.register_buffer("running", lib.nn.Parameter(lib.ones(1)))  # a Parameter as a buffer
        m.table = lib.ones(2)  # a registered (None) buffer takes a tensor
        m.extra = lib.nn.Linear(1, 1)
        m.extra = lib.nn.Tanh()  # a child replaced in place
        del m.running
        log.append([n for n, _ in m.named_parameters()])
        log.append([n for n, _ in m.named_buffers()])
        log.append([n for n, _ in m.named_children()])
        log.append(list(m.state_dict()))
        log.append((m.bias, m.act, hasattr(m, "running")))
        plain = lib.nn.Module()
        plain.x = 3
        plain.x = lib.nn.ReLU()  # a plain attribute becomes a child
        plain.w = lib.nn.Parameter(lib.ones(1))
        plain.w = lib.nn.Parameter(lib.zeros(1))
        log.append((list(plain._modules), list(plain._parameters), "x" in dir(plain)))
        return log

    assert_same(program(ours_lib), program(torch))


def test_train_calls_each_childs_train(libs):
    ours_lib, torch = libs

    def program(lib):
        nn_, log = lib.nn, []

        class FrozenNorm(nn_.LayerNorm):
            def train(self, mode=True):
                log.append(("FrozenNorm.train", mode))
                return super().train(False)  # stays in eval, as frozen batch-norm statistics

        class Block(nn_.Module):
            def __init__(self):
                super().__init__()
                self.norm = FrozenNorm(2)
                self.drop = nn_.Dropout(0.1)

            def train(self, mode=True):
                log.append(("Block.train", mode))
                return super().train(mode)

        model = nn_.Sequential(Block(), nn_.ModuleList([Block()]))
        model.train()
        log.append([m.training for m in model.modules()])
        model.eval()
        log.append([m.training for m in model.modules()])
        return log

    ours, theirs = program(ours_lib), program(torch)
    assert theirs[0] == ("Block.train", True) and theirs[1] == ("FrozenNorm.train", True)
    assert ours == theirs


def test_submodule_parameter_and_buffer_access(libs):
    ours_lib, torch = libs

    def program(lib):
        nn_, log = lib.nn, []
        model = nn_.Sequential(
            OrderedDict(enc=nn_.Sequential(nn_.Linear(2, 3), nn_.ReLU()), head=nn_.Linear(3, 1))
        )
        model.enc[0].register_buffer("count", lib.zeros(1))
        model.set_submodule("enc.1", nn_.Tanh())
        model.set_submodule("enc.extra", nn_.Identity())  # not strict: added
        model.set_submodule("head", nn_.Linear(3, 2), strict=True)
        layers = nn_.ModuleList([nn_.ReLU(), nn_.ReLU()])
        layers.register_module("x", nn_.ReLU())
        model.layers = layers
        model.set_submodule("layers.0", nn_.GELU())
        log.append([(n, type(m).__name__) for n, m in model.named_modules()])
        log.append(list(model.state_dict()))
        log.append(tuple(model.get_parameter("head.weight").shape))
        log.append(tuple(model.get_buffer("enc.0.count").shape))
        log.append(type(model.get_submodule("layers.0")).__name__)
        for action in (
            lambda: model.set_submodule("enc.nothing", nn_.ReLU(), strict=True),
            lambda: model.set_submodule("", nn_.ReLU()),
            lambda: model.set_submodule("head", "not a module"),
            lambda: model.get_submodule("enc.7"),
            lambda: model.get_submodule("head.weight"),
            lambda: model.get_parameter("head.nothing"),
            lambda: model.get_parameter("enc.0.count"),
            lambda: model.get_buffer("head.weight"),
        ):
            with pytest.raises(Exception) as info:
                action()
            log.append(type(info.value).__name__)
        return log

    assert program(ours_lib) == program(torch)


def test_dtype_and_storage_conversions(libs):
    ours_lib, torch = libs

    def program(lib):
        m = lib.nn.Linear(2, 3)
        m.register_buffer("index", lib.zeros(2, dtype=lib.int64))
        log = []
        for convert in ("float", "double", "half", "double"):
            out = getattr(m, convert)()
            log.append(
                (out is m, [str(t.dtype).replace("torch.", "") for t in m.state_dict().values()])
            )
        m.type(lib.float32)  # every tensor, integer buffers too
        log.append([str(t.dtype).replace("torch.", "") for t in m.state_dict().values()])
        log.append(m.to_empty(device="cpu") is m)
        log.append([tuple(t.shape) for t in m.state_dict().values()])
        log.append(m.share_memory() is m)
        return log  # fmt: skip

    assert program(ours_lib) == program(torch)
    with pytest.raises(TypeError, match="bfloat16"):  # NumPy has no bfloat16 arithmetic
        nn.Linear(2, 2).bfloat16()


# ---- printing ---------------------------------------------------------------------------------


def reprs(lib):
    nn_ = lib.nn

    class Attention(nn_.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv = nn_.Linear(d, 3 * d)
            self.proj = nn_.Linear(d, d, bias=False)
            self.drop = nn_.Dropout(0.1)

        def extra_repr(self):
            return "heads=2,\nrope=False"  # a multi-line extra_repr

    class Block(nn_.Module):
        def __init__(self, d):
            super().__init__()
            self.ln = nn_.LayerNorm(d)
            self.attn = Attention(d)
            self.mlp = nn_.Sequential(nn_.Linear(d, 4 * d), nn_.GELU(), nn_.Linear(4 * d, d))

    class Model(nn_.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn_.Embedding(10, 4)
            self.blocks = nn_.ModuleList([Block(4) for _ in range(3)] + [nn_.Identity()])
            self.heads = nn_.ModuleDict({"lm": nn_.Linear(4, 10), "cls": nn_.Linear(4, 2)})
            self.empty = nn_.Sequential()

        def extra_repr(self):
            return "vocab=10"

    return [
        nn_.Sequential(nn_.Linear(3, 4), nn_.ReLU(), nn_.LayerNorm(4), nn_.Dropout(0.2)),
        nn_.Sequential(OrderedDict(fc=nn_.Linear(2, 2), act=nn_.Tanh())),
        Block(4),
        Model(),
        nn_.ModuleList(),
    ]


def test_repr_as_torch(libs):
    ours_lib, torch = libs
    for ours, theirs in zip(reprs(ours_lib), reprs(torch)):
        assert repr(ours) == repr(theirs)
