"""Module containers and tree walking as PyTorch: the same nested model, written once as a function
of the library (`torch` or `tinytensor`), gives the same names in the same order from
named_parameters, state_dict, named_modules, named_children and named_buffers; a torch
state_dict loads into ours and gives the same output and gradients."""

from collections import OrderedDict

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn

from .conftest import assert_close


def nanogpt_style(lib, vocab=17, n_embd=8, n_layer=2):
    """A model laid out as nanoGPT's (ModuleDict with attribute access, ModuleList of blocks,
    weight tying), with the other containers and registration calls PyTorch code uses."""
    nn_ = lib.nn

    class Block(nn_.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn_.LayerNorm(n_embd)
            self.mlp = nn_.Sequential(
                OrderedDict(c_fc=nn_.Linear(n_embd, 4 * n_embd), gelu=nn_.GELU(),
                            c_proj=nn_.Linear(4 * n_embd, n_embd))
            )  # fmt: skip
            self.gains = nn_.ParameterList([nn_.Parameter(lib.ones(n_embd)) for _ in range(2)])
            self.register_buffer("steps", lib.zeros(1))
            self.register_buffer("scratch", lib.zeros(3), persistent=False)

        def forward(self, x):
            x = x * self.gains[0]
            return x + self.mlp.c_proj(self.mlp.gelu(self.mlp.c_fc(self.ln_1(x)))) * self.gains[1]

    class GPT(nn_.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn_.ModuleDict(
                dict(
                    wte=nn_.Embedding(vocab, n_embd),
                    wpe=nn_.Embedding(16, n_embd),
                    h=nn_.ModuleList([Block() for _ in range(n_layer)]),
                    ln_f=nn_.LayerNorm(n_embd),
                )
            )
            self.lm_head = nn_.Linear(n_embd, vocab, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying
            self.scales = nn_.ParameterDict({"alpha": nn_.Parameter(lib.ones(1))})
            self.scales["beta"] = lib.full((1,), 0.5)  # a plain Tensor becomes a Parameter
            self.add_module("extra", nn_.Linear(n_embd, n_embd))
            self.register_module("head_norm", nn_.LayerNorm(n_embd))
            self.register_buffer("pos", lib.arange(0, 16), persistent=False)

        def forward(self, idx):
            t = idx.size(1)
            x = self.transformer.wte(idx) + self.transformer.wpe(self.pos[:t])
            for block in self.transformer.h:
                x = block(x)
            x = self.head_norm(self.extra(self.transformer.ln_f(x))) * self.scales.alpha
            return self.lm_head(x * self.scales["beta"])

    return GPT()


def names(pairs):
    return [name for name, _ in pairs]


def test_names_and_order_match_torch(torch):
    ours, theirs = nanogpt_style(tt), nanogpt_style(torch)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert names(ours.named_parameters()) == names(theirs.named_parameters())
    assert names(ours.named_modules()) == names(theirs.named_modules())
    assert names(ours.named_children()) == names(theirs.named_children())
    assert names(ours.named_buffers()) == names(theirs.named_buffers())
    assert names(ours.transformer.named_children()) == names(theirs.transformer.named_children())
    assert len(list(ours.modules())) == len(list(theirs.modules()))
    assert len(list(ours.children())) == len(list(theirs.children()))
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    for options in (dict(remove_duplicate=False), dict(prefix="model")):
        assert names(ours.named_parameters(**options)) == names(theirs.named_parameters(**options))
    assert names(ours.named_modules(remove_duplicate=False)) == names(
        theirs.named_modules(remove_duplicate=False)
    )
    assert list(ours.state_dict(prefix="m.")) == list(theirs.state_dict(prefix="m."))


def test_torch_state_dict_loads_and_the_model_matches(torch, float64):
    torch.manual_seed(0)
    theirs = nanogpt_style(torch)
    ours = nanogpt_style(tt)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    idx = np.random.default_rng(0).integers(0, 17, (2, 5))
    logits, logits_t = ours(tt.tensor(idx)), theirs(torch.tensor(idx))
    assert_close(logits, logits_t)
    target = np.random.default_rng(1).integers(0, 17, (10,))
    loss = tt.nn.functional.cross_entropy(logits.reshape(10, 17), tt.tensor(target))
    loss_t = torch.nn.functional.cross_entropy(logits_t.reshape(10, 17), torch.tensor(target))
    loss.backward()
    loss_t.backward()
    assert_close(loss, loss_t)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_close(p.grad, theirs_params[name].grad, what=name)


def test_non_persistent_buffers_are_buffers_but_not_state():
    model = nanogpt_style(tt)
    assert "pos" in dict(model.named_buffers()) and "pos" not in model.state_dict()
    assert "transformer.h.0.scratch" not in model.state_dict()
    assert "transformer.h.0.steps" in model.state_dict()
    model.to(tt.float64)
    assert model.transformer.h[0].scratch.dtype == tt.float64  # moved by to() all the same


def test_module_dict_attribute_access_and_typos():
    model = nanogpt_style(tt)
    md = model.transformer
    assert md.wte is md["wte"] and "ln_f" in md and len(md) == 4
    assert list(md.keys()) == ["wte", "wpe", "h", "ln_f"]
    with pytest.raises(AttributeError, match=r"no attribute or key 'wtee' \(keys: wte, wpe, h"):
        md.wtee  # noqa: B018 - the typo must raise
    with pytest.raises(KeyError):
        md["wtee"]
    with pytest.raises(AttributeError, match="'GPT' object has no attribute 'lm_haed'"):
        model.lm_haed  # noqa: B018 - plain modules have no __getattr__ at all
    md.drop = nn.Dropout(0.0)  # attribute assignment of a module registers it, as in torch
    assert "drop" in md and "transformer.drop" in dict(model.named_modules())
    del md.drop
    assert "drop" not in md
    assert md.training is True  # ordinary attributes are still ordinary
    md.pop("wpe")
    assert "transformer.wpe.weight" not in model.state_dict()


def test_sequential_ordered_dict_indexing_and_attribute_access(torch):
    def build(lib):
        return lib.nn.Sequential(
            OrderedDict(
                [("fc1", lib.nn.Linear(3, 4)), ("act", lib.nn.ReLU()), ("fc2", lib.nn.Linear(4, 2))]
            )
        )

    seq, seq_t = build(tt), build(torch)
    assert names(seq.named_parameters()) == names(seq_t.named_parameters())
    assert seq.fc1 is seq[0] and seq[-1] is seq.fc2 and len(seq) == 3
    assert names(seq[1:].named_children()) == names(seq_t[1:].named_children())
    seq.append(nn.Tanh())
    seq_t.append(torch.nn.Tanh())
    assert names(seq.named_children()) == names(seq_t.named_children())
    plain, plain_t = (
        nn.Sequential(nn.Linear(2, 2), nn.ReLU()),
        torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()),
    )
    plain.insert(1, nn.Tanh())
    plain_t.insert(1, torch.nn.Tanh())
    assert names(plain.named_children()) == names(plain_t.named_children())
    assert isinstance(plain[1], nn.Tanh)


def test_parameter_list_and_dict(torch):
    plist = nn.ParameterList([tt.randn(2), nn.Parameter(tt.randn(3))])
    plist.append(tt.zeros(1))
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in plist)
    assert names(plist.named_parameters()) == ["0", "1", "2"]
    pdict = nn.ParameterDict(OrderedDict(b=tt.ones(2), a=tt.ones(1)))
    pdict.c = tt.zeros(4)  # attribute assignment of a tensor stores it as a key
    assert list(pdict.keys()) == ["b", "a", "c"] and isinstance(pdict.c, nn.Parameter)
    theirs = torch.nn.ParameterDict(OrderedDict(b=torch.ones(2), a=torch.ones(1)))
    theirs["c"] = torch.zeros(4)
    assert names(pdict.named_parameters()) == names(theirs.named_parameters())
    (pdict.a * 3).sum().backward()
    assert pdict["a"].grad.item() == 3.0
    with pytest.raises(TypeError, match="ParameterList: expected a Parameter or Tensor, got str"):
        plist.append("w")
    with pytest.raises(AttributeError, match=r"no attribute or key 'd' \(keys: b, a, c\)"):
        pdict.d  # noqa: B018


def test_add_module_get_submodule_and_errors(torch):
    model, theirs = nanogpt_style(tt), nanogpt_style(torch)
    for target in ("transformer.h.1.mlp.c_fc", "transformer.wte", "extra", ""):
        ours_module = model.get_submodule(target)
        assert type(ours_module).__name__ == type(theirs.get_submodule(target)).__name__
    assert model.get_parameter("transformer.h.0.gains.1") is model.transformer.h[0].gains[1]
    assert model.get_buffer("transformer.h.1.steps") is model.transformer.h[1].steps
    with pytest.raises(AttributeError, match="ModuleList has no submodule '7'"):
        model.get_submodule("transformer.h.7")
    with pytest.raises(AttributeError, match="'weight' .*is not an nn.Module"):
        model.get_submodule("lm_head.weight")
    with pytest.raises(KeyError, match="add_module: module name must be .* got 'a.b'"):
        model.add_module("a.b", nn.ReLU())
    with pytest.raises(TypeError, match="add_module: 'x' must be a Module or None, got int"):
        model.add_module("x", 3)
    with pytest.raises(TypeError, match="ModuleDict: expected a Module, got Parameter"):
        model.transformer["p"] = nn.Parameter(tt.ones(1))


def test_apply_visits_children_first_as_torch(torch):
    visited, visited_t = [], []
    nanogpt_style(tt).apply(lambda m: visited.append(type(m).__name__))
    nanogpt_style(torch).apply(lambda m: visited_t.append(type(m).__name__))
    assert visited == visited_t


def test_module_list_editing_as_torch(torch):
    def build(lib):
        layers = lib.nn.ModuleList([lib.nn.Linear(2, 2) for _ in range(3)])
        layers.insert(1, lib.nn.ReLU())
        del layers[0]
        layers[0] = lib.nn.Tanh()
        layers += [lib.nn.Linear(2, 3)]
        return layers

    ours, theirs = build(tt), build(torch)
    assert names(ours.named_parameters()) == names(theirs.named_parameters())
    assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]


def test_weight_decay_grouping_by_module_type_as_torch(torch):
    """minGPT-style optimizer groups: walk named_modules, then each module's named_parameters,
    and sort every full name into decay / no-decay by module type and parameter name."""

    def groups(lib):
        model = nanogpt_style(lib)
        decay, no_decay = set(), set()
        for mn, m in model.named_modules():
            for pn, _ in m.named_parameters():
                fpn = f"{mn}.{pn}" if mn else pn
                if pn.endswith("bias"):
                    no_decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, lib.nn.Linear):
                    decay.add(fpn)
                elif pn.endswith("weight") and isinstance(m, (lib.nn.LayerNorm, lib.nn.Embedding)):
                    no_decay.add(fpn)
        every = {pn for pn, _ in model.named_parameters()}
        return decay, no_decay, every

    ours, theirs = groups(tt), groups(torch)
    assert ours == theirs
    assert "lm_head.weight" in ours[0] and "transformer.ln_f.bias" in ours[1]
