"""nn.RNN, nn.LSTM, nn.GRU and their cells against PyTorch with the same weights (a PyTorch
state_dict loaded as it is): outputs, final states and every gradient (input, initial state,
weights) in float64, across layers, directions, layouts, bias and unbatched input; dropout between
layers; the errors for bad input."""

import itertools

import numpy as np
import pytest
import torch

import tinytensor as tt

KINDS = {
    "rnn_tanh": ("RNN", {"nonlinearity": "tanh"}),
    "rnn_relu": ("RNN", {"nonlinearity": "relu"}),
    "lstm": ("LSTM", {}),
    "gru": ("GRU", {}),
}


def _pair(cls_name, **kwargs):
    torch.manual_seed(0)
    ref = getattr(torch.nn, cls_name)(**kwargs).double()
    ours = getattr(tt.nn, cls_name)(**kwargs).double()
    state = ref.state_dict()
    assert list(state) == list(ours.state_dict())
    ours.load_state_dict({k: tt.tensor(v.numpy()) for k, v in state.items()})
    return ref, ours


def _flat(out):
    """output, h_n[, c_n] as a flat list."""
    output, state = out
    return [
        t for t in (output, *(state if isinstance(state, tuple) else (state,))) if t is not None
    ]


def _compare(ref_out, out, ref_leaves, leaves, ref_module, module):
    ref_flat, flat = _flat(ref_out), _flat(out)
    for a, b in zip(ref_flat, flat):
        np.testing.assert_allclose(b.numpy(), a.detach().numpy(), rtol=1e-10, atol=1e-12)
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=tuple(a.shape)) for a in ref_flat]
    sum((a * torch.tensor(w)).sum() for a, w in zip(ref_flat, weights)).backward()
    sum((b * tt.tensor(w)).sum() for b, w in zip(flat, weights)).backward()
    for a, b in zip(ref_leaves, leaves):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-9, atol=1e-12)
    for (name, a), (_, b) in zip(ref_module.named_parameters(), module.named_parameters()):
        np.testing.assert_allclose(
            b.grad.numpy(), a.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name
        )


CASES = list(itertools.product(KINDS, [1, 2], [False, True], [False, True]))


@pytest.mark.parametrize("kind,num_layers,bidirectional,batch_first", CASES)
def test_layer_matches_torch(kind, num_layers, bidirectional, batch_first):
    cls_name, extra = KINDS[kind]
    ref, ours = _pair(cls_name, input_size=3, hidden_size=4, num_layers=num_layers,
                      bidirectional=bidirectional, batch_first=batch_first, **extra)  # fmt: skip
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 3) if batch_first else (5, 2, 3))
    states = [rng.normal(size=(num_layers * (1 + bidirectional), 2, 4))]
    if cls_name == "LSTM":
        states.append(rng.normal(size=states[0].shape))
    ref_leaves = [torch.tensor(a, requires_grad=True) for a in [x, *states]]
    leaves = [tt.tensor(a, requires_grad=True) for a in [x, *states]]
    hx = lambda ls: tuple(ls[1:]) if cls_name == "LSTM" else ls[1]  # noqa: E731
    _compare(ref(ref_leaves[0], hx(ref_leaves)), ours(leaves[0], hx(leaves)),
             ref_leaves, leaves, ref, ours)  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_unbatched_without_bias_and_zero_state(kind):
    cls_name, extra = KINDS[kind]
    ref, ours = _pair(cls_name, input_size=3, hidden_size=4, num_layers=2, bias=False, **extra)
    assert [n for n, _ in ours.named_parameters()] == ["weight_ih_l0", "weight_hh_l0",
                                                       "weight_ih_l1", "weight_hh_l1"]  # fmt: skip
    x = np.random.default_rng(2).normal(size=(6, 3))
    ref_x, our_x = torch.tensor(x, requires_grad=True), tt.tensor(x, requires_grad=True)
    out = ours(our_x)
    assert tuple(out[0].shape) == (6, 4)
    _compare(ref(ref_x), out, [ref_x], [our_x], ref, ours)


@pytest.mark.parametrize("kind", KINDS)
def test_cells_match_torch(kind):
    cls_name, extra = KINDS[kind]
    ref, ours = _pair(cls_name + "Cell", input_size=3, hidden_size=4, **extra)
    rng = np.random.default_rng(3)
    x, h = rng.normal(size=(2, 3)), rng.normal(size=(2, 4))
    ref_leaves = [torch.tensor(a, requires_grad=True) for a in (x, h, h * 0.5)]
    leaves = [tt.tensor(a, requires_grad=True) for a in (x, h, h * 0.5)]
    if cls_name == "LSTM":
        ref_out, out = ref(ref_leaves[0], tuple(ref_leaves[1:])), ours(leaves[0], tuple(leaves[1:]))
    else:
        ref_out, out = (ref(*ref_leaves[:2]), None), (ours(*leaves[:2]), None)
        ref_leaves, leaves = ref_leaves[:2], leaves[:2]
    _compare(ref_out, out, ref_leaves, leaves, ref, ours)
    unbatched = ours(tt.tensor(x[0]))
    assert tuple((unbatched[0] if isinstance(unbatched, tuple) else unbatched).shape) == (4,)


def test_dropout_between_layers_only_in_training():
    ref, ours = _pair("LSTM", input_size=3, hidden_size=4, num_layers=2, dropout=0.5)
    x = np.random.default_rng(4).normal(size=(5, 2, 3))
    ref.eval()
    ours.eval()
    expected = ref(torch.tensor(x))[0].detach().numpy()
    np.testing.assert_allclose(ours(tt.tensor(x))[0].numpy(), expected, rtol=1e-10)
    ours.train()
    tt.manual_seed(0)
    a = ours(tt.tensor(x))[0].numpy()
    b = ours(tt.tensor(x))[0].numpy()
    assert not np.allclose(a, b)  # a fresh mask each call
    one_layer = tt.nn.GRU(3, 4, 1, dropout=0.5).double()  # no layer after the only one: no dropout
    y = tt.tensor(x)
    np.testing.assert_array_equal(one_layer(y)[0].numpy(), one_layer(y)[0].numpy())


def test_init_range_and_flatten_parameters():
    lstm = tt.nn.LSTM(3, 16, 2)
    lstm.flatten_parameters()
    for p in lstm.parameters():
        assert np.abs(p.numpy()).max() <= 0.25 and np.abs(p.numpy()).max() > 0.2
    assert len(lstm.all_weights) == 2 and len(lstm.all_weights[0]) == 4
    assert repr(lstm) == "LSTM(3, 16, num_layers=2)"


def test_bad_calls_name_the_argument():
    lstm = tt.nn.LSTM(3, 4)
    with pytest.raises(ValueError, match=r"LSTM: input of shape \(5, 2, 7\).*input_size=3"):
        lstm(tt.zeros(5, 2, 7))
    with pytest.raises(ValueError, match=r"LSTM: h_0 has shape \(1, 3, 4\), expected \(1, 2, 4\)"):
        lstm(tt.zeros(5, 2, 3), (tt.zeros(1, 3, 4), tt.zeros(1, 2, 4)))
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\)"):
        lstm(tt.zeros(5, 2, 3), tt.zeros(1, 2, 4))
    with pytest.raises(TypeError, match="GRU: input must be a Tensor, got list"):
        tt.nn.GRU(3, 4)([[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="RNN: nonlinearity must be 'tanh' or 'relu', got 'gelu'"):
        tt.nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(NotImplementedError, match="LSTM: proj_size=2 is not supported"):
        tt.nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="GRUCell: h has shape"):
        tt.nn.GRUCell(3, 4)(tt.zeros(2, 3), tt.zeros(2, 5))
