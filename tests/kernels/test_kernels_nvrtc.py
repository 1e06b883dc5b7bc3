"""The attention kernels compile through NVRTC (what cupy.RawModule uses) with no register spills.

No GPU is needed: NVRTC compiles for a named architecture. NVRTC comes from the nvidia-cuda-nvrtc
wheel; where it cannot be loaded the tests skip with the reason, and fail instead under
TINYTENSOR_REQUIRE_REFERENCE=1 (CI), so a broken install cannot pass silently.
"""

import pytest

from tinytensor.kernels.flash_attention import KERNEL_NAMES, NVRTC_OPTIONS, kernel_source
from tinytensor.kernels.nvrtc import NvrtcUnavailable, compile_cubin, parse_ptxas_log

from ..conftest import REQUIRE_REFERENCE

REGISTER_PRESSURE = r"""
extern "C" __global__ void register_pressure(const float* x, float* y) {
  float a[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) a[i] = x[threadIdx.x * 48 + i];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 48; ++i)
#pragma unroll
    for (int j = 0; j < 48; ++j) s += a[i] * a[47 - j] * (float)(i ^ j);
  y[threadIdx.x] = s;
}
"""


def compile_or_skip(source, arch, options=()):
    try:
        return compile_cubin(source, arch, options)
    except NvrtcUnavailable as e:
        if REQUIRE_REFERENCE:
            pytest.fail(f"NVRTC is required under TINYTENSOR_REQUIRE_REFERENCE=1: {e}")
        pytest.skip(f"NVRTC is not usable here, so the kernels' compile check is skipped ({e})")


@pytest.mark.parametrize("arch", ["90", "80"])
def test_attention_kernels_compile_without_spills(arch):
    cubin, log = compile_or_skip(kernel_source(), arch, NVRTC_OPTIONS)
    assert cubin[:4] == b"\x7fELF", "NVRTC did not return a cubin"
    report = parse_ptxas_log(log)
    print(f"sm_{arch}: {report}")
    assert set(report) == set(KERNEL_NAMES), f"ptxas reported {sorted(report)}"
    for name, info in report.items():
        assert info["arch"] == int(arch)
        assert info["spill_stores"] == 0 and info["spill_loads"] == 0, f"{name} spills: {info}"
        assert info["stack"] == 0, f"{name} uses a stack frame (local memory): {info}"
        assert info["registers"] <= 255, f"{name}: {info}"


def test_the_report_parser_sees_spills():
    """A kernel squeezed into 24 registers spills, and the parser must say so."""
    _, log = compile_or_skip(REGISTER_PRESSURE, "90", ("-maxrregcount=24",))
    info = parse_ptxas_log(log)["register_pressure"]
    assert info["spill_stores"] > 0 and info["spill_loads"] > 0, log


def test_nvrtc_rejects_what_it_should():
    """NVRTC has no host headers: INFINITY is undefined there (g++ would accept it)."""
    source = 'extern "C" __global__ void f(float* y) { y[0] = INFINITY; }'
    compile_or_skip('extern "C" __global__ void f(float* y) { y[0] = 1.0f; }', "90")
    with pytest.raises(Exception, match="INFINITY"):
        compile_cubin(source, "90")
