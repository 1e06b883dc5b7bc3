"""The library an example runs on: tinytensor, or PyTorch for its twin (`--library torch`).

The examples' functions take the library as `torch`, so that the same code runs on both (the
tests compare the two step by step).
"""

from __future__ import annotations

LIBRARIES = ("tinytensor", "torch")


def load_library(name: str):
    """tinytensor or PyTorch, the module the examples' functions call `torch`."""
    if name == "torch":
        import torch

        torch.set_num_threads(1)  # NOTE: tiny matrices; 2 threads were 20x slower on 2 cores
        return torch
    import tinytensor

    return tinytensor
