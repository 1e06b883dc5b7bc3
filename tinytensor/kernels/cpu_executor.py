"""Runs CUDA kernel source on the CPU: g++ against cpu_executor.h, loaded with ctypes.

`CpuModule(code)` stands in for `cupy.RawModule(code=...)`: `module.get_function(name)` gives a
kernel called as `kernel(grid, block, args, shared_mem=n)` with NumPy arrays where CuPy takes
CuPy arrays, so one launch code (tinytensor/kernels/flash_attention.py) serves both. Each CUDA
thread is a fiber; see cpu_executor.h for the schedules and the errors it reports.

Checks CuPy does not make, so that mistakes show here first:
- every scalar must be the exact NumPy type the kernel declares (np.float32 for float, np.int32
  for int, np.int64 for long long): CuPy would pass a Python float as a double and shift every
  later argument;
- arrays must be C-contiguous with the declared element type;
- dynamic shared memory above 48 KB needs `kernel.max_dynamic_shared_size_bytes` set first;
- every non-const pointer is an output: it is filled with NaN (floats) or 0x7f.. bytes (integers)
  before the launch, so elements a kernel forgets to write show.

Builds are cached by content hash under $TINYTENSOR_CACHE_DIR or ~/.cache/tinytensor/cpu_executor.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HEADER = Path(__file__).with_name("cpu_executor.h")
SCHEDULES = {"ascending": 0, "descending": 1, "random": 2}
STATIC_SHARED_LIMIT = 48 * 1024
MAX_SHARED_PER_BLOCK = 227 * 1024  # Hopper's opt-in maximum
MAX_THREADS_PER_BLOCK = 1024

_KERNEL = re.compile(
    r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)'
)
_TYPES = {
    "float": np.float32,
    "double": np.float64,
    "int": np.int32,
    "unsigned": np.uint32,
    "unsigned int": np.uint32,
    "long long": np.int64,
    "unsigned char": np.uint8,
    "bool": np.bool_,
}


class KernelExecutionError(RuntimeError):
    """A launch the executor refused or a fault it saw (partial barrier, deadlock...)."""


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "tinytensor" / "cpu_executor"
    return Path(os.environ.get("TINYTENSOR_CACHE_DIR", default))


def parse_kernels(code: str) -> dict:
    """{name: [(type, is_pointer, is_const)]} for every `extern "C" __global__` kernel."""
    kernels = {}
    for name, params in _KERNEL.findall(code):
        parsed = []
        for param in params.split(","):
            words = param.replace("*", " * ").replace("__restrict__", " ").split()
            is_pointer, is_const = "*" in words, "const" in words
            base = " ".join(w for w in words[:-1] if w not in ("*", "const"))
            if base not in _TYPES:
                raise ValueError(f"cpu_executor: kernel {name}: unsupported parameter {param!r}")
            parsed.append((np.dtype(_TYPES[base]), is_pointer, is_const))
        kernels[name] = parsed
    if not kernels:
        raise ValueError('cpu_executor: no `extern "C" __global__` kernel in the source')
    return kernels


def build(code: str, flags=(), name="kernels") -> Path:
    """Compiles `code` with the executor header into a shared library (cached); returns its path."""
    kernels = parse_kernels(code)
    stubs = "\n".join(
        f'extern "C" int tt_launch_{k}(const unsigned* g, const unsigned* b, '
        f"unsigned long long s, void** a, int sch, unsigned seed, char* e, int n) "
        f"{{ return tt_exec::launch(&{k}, g, b, s, a, sch, seed, e, n); }}"
        for k in kernels
    )
    wrapper = f'#include "{HEADER}"\n#line 1 "{name}.cu"\n{code}\n#line 1 "launch_stubs"\n{stubs}\n'
    command = ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-Wno-unknown-pragmas", *flags]
    version = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256(
        "\0".join([wrapper, HEADER.read_text(), " ".join(command), version]).encode()
    ).hexdigest()[:20]
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    library = folder / f"{name}-{key}.so"
    if library.exists():
        return library
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        source = Path(tmp) / f"{name}.cpp"
        source.write_text(wrapper)
        built = Path(tmp) / library.name
        result = subprocess.run(
            [*command, "-o", str(built), str(source)], capture_output=True, text=True
        )
        if result.returncode != 0:
            raise KernelExecutionError(f"cpu_executor: g++ failed on {name}:\n{result.stderr}")
        os.replace(built, library)  # atomic: parallel test workers never see half a library
    return library


class CpuKernel:
    """One kernel, callable like `cupy.RawKernel`: kernel(grid, block, args, shared_mem=0)."""

    def __init__(self, module, name, params):
        self.module, self.name, self.params = module, name, params
        self.max_dynamic_shared_size_bytes = 0
        self._entry = getattr(module.library, f"tt_launch_{name}")
        self._entry.restype = ctypes.c_int

    def __call__(self, grid, block, args, shared_mem=0):
        grid, block = _dims(grid, "grid"), _dims(block, "block")
        if block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK:
            raise KernelExecutionError(f"{self.name}: block {block} has more than 1024 threads")
        limit = max(STATIC_SHARED_LIMIT, self.max_dynamic_shared_size_bytes)
        if shared_mem > min(limit, MAX_SHARED_PER_BLOCK):
            raise KernelExecutionError(
                f"{self.name}: {shared_mem} bytes of dynamic shared memory, but the limit is "
                f"{limit}; set kernel.max_dynamic_shared_size_bytes first (at most "
                f"{MAX_SHARED_PER_BLOCK})"
            )
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}: takes {len(self.params)} arguments, got {len(args)}")
        keep, pointers = [], []
        for index, (arg, (dtype, is_pointer, is_const)) in enumerate(zip(args, self.params)):
            value = self._argument(index, arg, dtype, is_pointer, is_const)
            keep.append(value)
            pointers.append(ctypes.cast(ctypes.pointer(value), ctypes.c_void_p))
        argv = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        error = ctypes.create_string_buffer(1024)
        code = self._entry(
            (ctypes.c_uint * 3)(*grid),
            (ctypes.c_uint * 3)(*block),
            ctypes.c_ulonglong(shared_mem),
            argv,
            ctypes.c_int(self.module.schedule),
            ctypes.c_uint(self.module.next_seed()),
            error,
            ctypes.c_int(len(error)),
        )
        if code != 0:
            raise KernelExecutionError(f"{self.name}: {error.value.decode()}")

    def _argument(self, index, arg, dtype, is_pointer, is_const):
        where = f"{self.name}: argument {index}"
        if is_pointer:
            if not isinstance(arg, np.ndarray):
                raise TypeError(f"{where} must be an array, got {type(arg).__name__}")
            if arg.dtype != dtype or not arg.flags.c_contiguous:
                raise TypeError(
                    f"{where} must be a C-contiguous {dtype} array, got {arg.dtype} "
                    f"(contiguous: {arg.flags.c_contiguous})"
                )
            if not is_const:
                # NOTE: outputs start as NaN so that elements the kernel never writes show.
                arg.view(np.uint8).fill(0xFF if dtype.kind == "f" else 0x7F)
            return ctypes.c_void_p(arg.ctypes.data)
        if type(arg) is not dtype.type:
            raise TypeError(
                f"{where} must be a {dtype.type.__name__} scalar, got {type(arg).__name__} "
                "(CuPy passes a Python float as double and an int as long long)"
            )
        return np.ctypeslib.as_ctypes_type(dtype)(arg)


def _dims(value, what):
    dims = tuple(int(x) for x in (value if isinstance(value, tuple | list) else (value,)))
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        raise KernelExecutionError(f"{what} must be 1 to 3 positive sizes, got {value}")
    return dims + (1,) * (3 - len(dims))


class CpuModule:
    """The kernels of one CUDA source, built for the CPU executor (like cupy.RawModule).

    Args:
        code: the CUDA C++ source (the unchanged text of a .cu file).
        schedule: "ascending", "descending" or "random" thread order between rendezvous.
        seed: seeds the random schedule (each launch advances it).
        flags: extra g++ flags (e.g. ("-fsanitize=address",)).
        name: a name for the build (error messages and the cached file).
    """

    def __init__(self, code, schedule="ascending", seed=0, flags=(), name="kernels"):
        if schedule not in SCHEDULES:
            raise ValueError(f"CpuModule: schedule must be one of {tuple(SCHEDULES)}")
        self.schedule, self.seed = SCHEDULES[schedule], seed
        self.kernels = parse_kernels(code)
        self.path = build(code, flags, name)
        self.library = ctypes.CDLL(str(self.path))
        self._functions = {}

    def next_seed(self):
        self.seed += 1
        return self.seed & 0xFFFFFFFF

    def get_function(self, name):
        if name not in self.kernels:
            raise KeyError(f"CpuModule: no kernel {name!r}; have {sorted(self.kernels)}")
        if name not in self._functions:
            self._functions[name] = CpuKernel(self, name, self.kernels[name])
        return self._functions[name]
