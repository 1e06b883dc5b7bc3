"""The fused CPU kernel tests need numba; without it they are skipped, saying so."""

import pytest

from tinytensor.kernels.cpu import fused_available, threads


def pytest_collection_modifyitems(config, items):
    if fused_available():
        return
    skip = pytest.mark.skip(reason="numba is not installed: the fused CPU kernels cannot compile")
    for item in items:
        if "kernels_cpu" in str(item.fspath) and "no_numba_ok" not in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def restored_thread_policy():
    """Puts the pool's thread policy (set_num_threads, limits) back as it was after the test."""
    saved = dict(threads._state)
    yield
    # numba's pool, once set up, stays set up: restoring "not configured" would let the next
    # _apply give OpenBLAS the pool's thread count (a test run first in its process then saw
    # NumPy's products on 2 OpenBLAS threads at "1 thread")
    for once in ("configured", "layer"):
        saved[once] = threads._state[once]
    threads._state.update(saved)
    threads._state["current"] = None
    threads._apply(saved["fixed"] or threads.cores_allowed())
