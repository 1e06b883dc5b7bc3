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
        if seed is None:  # fresh entropy, kept as a number so that initial_seed() can report it
            seed = int(np.random.SeedSequence().entropy) % 2**63
        self.manual_seed(seed)

    def manual_seed(self, seed: int) -> Generator:
        self._initial_seed = int(seed)
        self.rng = np.random.default_rng(self._initial_seed)
        return self

    def initial_seed(self) -> int:
        """The seed this generator was last seeded with (as `torch.Generator.initial_seed`)."""
        return self._initial_seed

    def get_state(self) -> dict:
        return self.rng.bit_generator.state

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state


default_generator = Generator(0)


def manual_seed(seed: int) -> Generator:
    """Seeds the global generator: runs that seed the same draw the same numbers."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__} {seed!r}")
    return default_generator.manual_seed(int(seed))


def initial_seed() -> int:
    """The global generator's seed; inside a DataLoader worker, that worker's seed (so the
    `worker_init_fn` idiom `np.random.seed(tt.initial_seed() % 2**32)` works as in PyTorch)."""
    return default_generator.initial_seed()


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
