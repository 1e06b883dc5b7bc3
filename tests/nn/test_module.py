"""Module: discovery of parameters/buffers/submodules, state_dict, modes, devices, graph scope."""

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("steps", tt.zeros(1))
        self.register_buffer("table", tt.ones(2), persistent=False)

    def forward(self, x):
        return self.norm(self.fc(x)).relu()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(5, 3)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2)})
        self.scale = nn.Parameter(tt.ones(1))
        self.tied = self.embed  # the same module twice: its parameters are listed once

    def forward(self, ids):
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h[..., :3] if h.shape[-1] != 3 else h)
        return self.heads["a"](h) * self.scale


def test_named_parameters_are_dotted_and_shared_ones_listed_once():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == [
        "scale",
        "embed.weight",
        "blocks.0.fc.weight",
        "blocks.0.fc.bias",
        "blocks.0.norm.weight",
        "blocks.0.norm.bias",
        "blocks.1.fc.weight",
        "blocks.1.fc.bias",
        "blocks.1.norm.weight",
        "blocks.1.norm.bias",
        "heads.a.weight",
        "heads.a.bias",
    ]
    assert len(list(net.parameters())) == len(names)
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in net.parameters())
    assert net.num_parameters() == 1 + 15 + 2 * (12 + 4 + 8) + 10


def test_modules_children_and_buffers():
    net = Net()
    assert [n for n, _ in net.named_children()] == ["embed", "blocks", "heads"]
    modules = dict(net.named_modules())
    assert "" in modules and "heads.a" in modules and "blocks.1.norm" in modules
    assert [n for n, _ in net.named_buffers()] == [
        "blocks.0.steps",
        "blocks.0.table",
        "blocks.1.steps",
        "blocks.1.table",
    ]
    assert len(list(net.buffers())) == 4


def test_state_dict_has_parameters_and_persistent_buffers_only():
    net = Net()
    keys = list(net.state_dict())
    assert "blocks.0.steps" in keys and "blocks.0.table" not in keys
    assert "embed.weight" in keys and "tied.weight" in keys  # as PyTorch: each name of a tied one
    assert all(isinstance(v, tt.Tensor) and not v.requires_grad for v in net.state_dict().values())


def test_state_dict_round_trip():
    a, b = Net(), Net()
    state = a.state_dict()
    with tt.no_grad():
        a.blocks[0].steps.fill_(7.0)
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        np.testing.assert_array_equal(pa.numpy(), pb.numpy(), err_msg=name)
    assert b.blocks[0].steps.item() == 7.0
    # the values are copied, not shared
    with tt.no_grad():
        a.heads["a"].weight.fill_(3.0)
    assert not np.all(b.heads["a"].weight.numpy() == 3.0)
    assert set(state) == set(b.state_dict())


def test_load_state_dict_reports_every_problem_at_once():
    net = Net()
    state = dict(net.state_dict())
    del state["heads.a.bias"]
    del state["blocks.1.steps"]
    state["extra.weight"] = tt.zeros(2)
    state["embed.weight"] = tt.zeros(6, 3)
    before = net.blocks[0].fc.weight.numpy().copy()
    state["blocks.0.fc.weight"] = tt.zeros(4, 3)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(state)
    message = str(info.value)
    for expected in (
        "heads.a.bias",
        "blocks.1.steps",
        "extra.weight",
        "embed.weight: checkpoint shape (6, 3), model shape (5, 3)",
        "missing keys (2)",
        "unexpected keys (1)",
    ):
        assert expected in message
    np.testing.assert_array_equal(net.blocks[0].fc.weight.numpy(), before)  # nothing copied


def test_load_state_dict_not_strict_still_refuses_wrong_shapes():
    net = Net()
    state = {"scale": tt.full((1,), 2.0), "other": tt.zeros(1)}
    missing, unexpected = net.load_state_dict(state, strict=False)
    assert net.scale.item() == 2.0 and unexpected == ["other"] and "embed.weight" in missing
    with pytest.raises(RuntimeError, match="scale: checkpoint shape"):
        net.load_state_dict({"scale": tt.zeros(2)}, strict=False)


def test_typo_attribute_raises_attribute_error():
    net = Net()
    with pytest.raises(AttributeError):
        net.emebd  # noqa: B018 - the typo is the point
    with pytest.raises(AttributeError):
        nn.Linear(2, 2).wieght  # noqa: B018


def test_train_eval_and_apply():
    net = Net()
    assert net.training and net.blocks[1].norm.training
    net.eval()
    assert not net.training and not net.blocks[1].norm.training and not net.heads["a"].training
    net.train()
    assert net.blocks[0].fc.training
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Net" and seen.count("Linear") == 3


def test_to_dtype_moves_data_in_place_and_keeps_references():
    net = Net()
    params = list(net.parameters())
    ids_before = [id(p) for p in params]
    net.to(tt.float64)
    assert [id(p) for p in net.parameters()] == ids_before
    assert all(p.dtype == tt.float64 for p in params)
    assert net.blocks[0].steps.dtype == tt.float64
    with pytest.raises(TypeError, match="floating"):
        net.to(tt.int64)


def test_zero_grad():
    net = Net()
    out = net(tt.tensor([[1, 2]])).sum()
    out.backward()
    assert net.scale.grad is not None
    net.zero_grad(set_to_none=False)
    assert net.scale.grad.item() == 0.0
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_sequential_and_module_list():
    seq = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = tt.randn(4, 3)
    expected = seq[2](seq[0](x).relu())
    np.testing.assert_allclose(seq(x).numpy(), expected.numpy())
    layers = nn.ModuleList([nn.Linear(2, 2)])
    layers.append(nn.Linear(2, 2))
    assert len(layers) == 2 and len(list(layers.parameters())) == 4
    with pytest.raises(TypeError, match="expected a Module"):
        layers.append("not a module")


def test_parameter_wraps_a_tensor_without_copying():
    t = tt.randn(2, 3)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf and p._array is t._array
    assert isinstance(p * 2, tt.Tensor)
    assert "Parameter containing" in repr(p)


def test_repr_shows_structure_as_torch():
    text = repr(Net())
    assert "(blocks): ModuleList(\n    (0-1): 2 x Block(" in text
    assert "(fc): Linear(in_features=3, out_features=4, bias=True)\n" in text
    assert text.endswith(")") and "params" not in text


def test_graph_nodes_record_the_innermost_module():
    net = Net()
    out = net(tt.tensor([[0, 1, 2]]))
    seen = {}
    stack, visited = [out], set()
    while stack:
        t = stack.pop()
        if t._ctx is None or id(t) in visited:
            continue
        visited.add(id(t))
        seen.setdefault(t._ctx.name, set()).add(t._ctx.module)
        stack.extend(t._ctx.inputs)
    assert seen["Linear"] >= {net.blocks[0].fc, net.blocks[1].fc, net.heads["a"]}
    assert seen["LayerNorm"] == {net.blocks[0].norm, net.blocks[1].norm}
    assert seen["Embedding"] == {net.embed}
    assert seen["Relu"] == {net.blocks[0], net.blocks[1]}  # relu runs in Block.forward itself
    assert seen["Mul"] == {net}
    # outside any module, no module is recorded
    x = tt.randn(2, requires_grad=True)
    assert (x * 2)._ctx.module is None


def test_register_buffer_validates():
    m = nn.Module()
    with pytest.raises(TypeError, match=r"cannot assign 'list' object to buffer 'b'"):
        m.register_buffer("b", [1, 2])
    with pytest.raises(KeyError):
        m.register_buffer("a.b", tt.zeros(1))


def test_module_to_device_runs_there(device):
    tt.manual_seed(1)
    layer = nn.EncoderBlock(8, 2, 16, dropout=0.0)
    x = tt.randn(2, 3, 8)
    expected = layer(x, is_causal=True).numpy()
    weight = layer.self_attn.q_proj.weight
    layer.to(device)
    assert layer.self_attn.q_proj.weight is weight and weight.device == device
    out = layer(x.to(device), is_causal=True)
    assert out.device == device
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
