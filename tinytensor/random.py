"""Random numbers: one seeded global generator (`tt.manual_seed`) and optional private ones.

Numbers are drawn on the host with NumPy's PCG64 and moved to the tensor's device, so a seed gives
the same initial weights and the same dropout masks on the CPU and on a GPU.
"""

from __future__ import annotations

import numpy as np

from .backend import move_array


class Generator:
    """A source of random numbers, as `torch.Generator`: `g = tt.Generator().manual_seed(0)`."""

    def __init__(self, seed=None):
        self.rng = np.random.default_rng(seed)

    def manual_seed(self, seed: int) -> Generator:
        self.rng = np.random.default_rng(seed)
        return self

    def get_state(self) -> dict:
        return self.rng.bit_generator.state

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seeds the global generator: runs that seed the same draw the same numbers."""
    return default_generator.manual_seed(int(seed))


def _rng(generator):
    return (generator or default_generator).rng


def _place(array, dtype, device):
    array = array.astype(dtype, copy=False)
    return array if device is None else move_array(array, device)


def normal_array(shape, dtype, device=None, mean=0.0, std=1.0, generator=None):
    return _place(_rng(generator).normal(mean, std, size=shape), dtype, device)


def uniform_array(shape, dtype, device=None, low=0.0, high=1.0, generator=None):
    return _place(_rng(generator).uniform(low, high, size=shape), dtype, device)


def integers_array(shape, low, high, dtype, device=None, generator=None):
    return _place(_rng(generator).integers(low, high, size=shape), dtype, device)


def permutation(n: int, generator=None) -> np.ndarray:
    return _rng(generator).permutation(n)
