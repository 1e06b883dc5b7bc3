"""keep_freed_memory: the glibc malloc tuning at import is applied, and skipped when opted out."""

import platform
import sys

import pytest

from tinytensor.allocator import keep_freed_memory

on_glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not on_glibc, reason="the tuning applies to glibc malloc only")
def test_applies_on_glibc(monkeypatch):
    for name in ("TINYTENSOR_KEEP_FREED_MEMORY", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert keep_freed_memory() is True


@pytest.mark.parametrize(
    "name, value",
    [
        ("TINYTENSOR_KEEP_FREED_MEMORY", "0"),
        ("MALLOC_TRIM_THRESHOLD_", "131072"),
        ("MALLOC_MMAP_THRESHOLD_", "131072"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072"),
    ],
)
def test_opt_out_and_user_settings_leave_malloc_alone(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    assert keep_freed_memory() is False
