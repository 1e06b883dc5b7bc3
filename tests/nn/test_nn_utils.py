"""tt.nn.utils' parameter vectors and split clipping (get_total_norm, clip_grads_with_norm_)
against torch.nn.utils."""

from __future__ import annotations

import numpy as np
import pytest

import tinytensor as tt


def _params(lib):
    rng = np.random.default_rng(0)
    ps = [lib.tensor(rng.standard_normal(s), requires_grad=True) for s in ((3, 4), (4,), (2, 2))]
    for p in ps:
        p.grad = lib.tensor(rng.standard_normal(tuple(p.shape)) * 3)
    return ps


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_split_clipping_matches_torch(torch, norm_type):
    out = []
    for lib in (torch, tt):
        ps = _params(lib)
        total = lib.nn.utils.get_total_norm([p.grad for p in ps], norm_type)
        lib.nn.utils.clip_grads_with_norm_(ps, 1.5, total)
        out.append([total.item()] + [p.grad.numpy().copy() for p in ps])
        again = _params(lib)
        out[-1].append(lib.nn.utils.clip_grad_norm_(again, 1.5, norm_type).item())
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_parameters_to_vector_and_back_match_torch(torch):
    out = []
    for lib in (torch, tt):
        ps = _params(lib)
        vec = lib.nn.utils.parameters_to_vector(ps)
        lib.nn.utils.vector_to_parameters(vec * 2, ps)
        out.append([vec.detach().numpy()] + [p.detach().numpy().copy() for p in ps])
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a)
    with pytest.raises(ValueError, match="1-D vector"):
        tt.nn.utils.vector_to_parameters(tt.ones(3), _params(tt))


def test_clipping_takes_a_generator_of_parameters(torch):
    out = []
    for lib in (torch, tt):
        ps = _params(lib)
        lib.nn.utils.clip_grad_norm_((p for p in ps), 1.0)  # as model.parameters() is
        out.append([p.grad.numpy().copy() for p in ps])
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-12)
