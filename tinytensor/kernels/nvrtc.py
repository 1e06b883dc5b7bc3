"""Compiles CUDA source to a cubin through NVRTC without a GPU, and reads ptxas's resource report.

CuPy's RawModule compiles with NVRTC for the architecture of the current device. On a machine
without one, `compile_cubin` asks CuPy's compiler for a given architecture instead: it replaces
CuPy's private, device-querying helper `_get_arch_for_options_for_nvrtc` for the duration of the
call (checked against the pinned cupy-cuda13x version: `NvrtcUnavailable` says why otherwise).
NVRTC itself ships in the `nvidia-cuda-nvrtc` wheel (see the project's setup script).
"""

from __future__ import annotations

import io
import re
from contextlib import contextmanager

PINNED_CUPY = "14.2.0"

_ENTRY = re.compile(r"Compiling entry function '(\w+)' for 'sm_(\d+)'")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")


class NvrtcUnavailable(RuntimeError):
    """NVRTC (or the CuPy helper used to reach it without a device) is not usable here."""


@contextmanager
def _arch_without_device():
    try:
        import cupy
        from cupy.cuda import compiler
    except Exception as e:  # noqa: BLE001 - any import failure means no NVRTC through CuPy
        raise NvrtcUnavailable(f"cupy does not import: {e}") from e
    if cupy.__version__ != PINNED_CUPY or not hasattr(compiler, "_get_arch_for_options_for_nvrtc"):
        raise NvrtcUnavailable(
            f"cupy {cupy.__version__} is not the pinned {PINNED_CUPY} whose private "
            "_get_arch_for_options_for_nvrtc this check replaces"
        )
    original = compiler._get_arch_for_options_for_nvrtc
    compiler._get_arch_for_options_for_nvrtc = lambda arch=None: (f"-arch=sm_{arch}", "cubin")
    try:
        yield compiler
    finally:
        compiler._get_arch_for_options_for_nvrtc = original


def nvrtc_version():
    """NVRTC's (major, minor), or raises NvrtcUnavailable with the loader's message."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        return nvrtc.getVersion()
    except Exception as e:  # noqa: BLE001 - a missing libnvrtc shows as various errors
        raise NvrtcUnavailable(f"NVRTC cannot be loaded: {e}") from e


def compile_cubin(source: str, arch: str, options=()):
    """(cubin bytes, ptxas log) of `source` for sm_`arch`, with `-Xptxas=-v` added."""
    nvrtc_version()
    log = io.StringIO()
    with _arch_without_device() as compiler:
        binary, _ = compiler.compile_using_nvrtc(
            source, (*options, "-Xptxas=-v"), arch=arch, log_stream=log
        )
    return binary, log.getvalue()


def parse_ptxas_log(log: str) -> dict:
    """{kernel: {"arch", "registers", "stack", "spill_stores", "spill_loads"}} from ptxas -v."""
    kernels, current = {}, None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = kernels.setdefault(m.group(1), {"arch": int(m.group(2))})
        elif current is not None and (m := _STACK.search(line)):
            current.update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif current is not None and (m := _REGISTERS.search(line)):
            current["registers"] = int(m[1])
    return kernels
