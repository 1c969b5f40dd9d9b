"""Shared by the CUDA backend's tests: where the plug-in is installed, and whether a GPU is usable here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

import pytest

BACKEND_DIR = Path(__file__).resolve().parents[1]

# The device the device tests run on. CHIPDOCK_CUDA_TESTS_ON=cpu:1 runs them against a second CPU device instead,
# which checks the tests' own logic (inputs, comparisons, expected errors) on a machine without a GPU.
DEVICE = os.environ.get("CHIPDOCK_CUDA_TESTS_ON", "cuda:0")

# The reasons device_get_count gives when there is no usable GPU (src/cuda_check.cpp).
NO_GPU_REASONS = ("no NVIDIA driver: libcuda.so.1 not found", "driver too old: ", "no CUDA device")

NOT_INSTALLED = (
    "chipdock-cuda is not installed: .ci/install builds it only where nvcc (a CUDA toolkit) is found"
)


def installed_package_dir() -> Path:
    """The installed chipdock_cuda package folder; skips the test when the backend is not installed."""
    try:
        import chipdock_cuda
    except ImportError:
        pytest.skip(NOT_INSTALLED)
    return Path(chipdock_cuda.manifest_path()).parent


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter, so each test loads its own plug-in set."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env={**os.environ, **(env or {})},
        capture_output=True, text=True, timeout=300,
    )


@lru_cache(maxsize=1)
def cuda_backend_info() -> dict:
    """What chipdock.backends() says about "cuda", from a fresh interpreter."""
    proc = run_python(
        """
        import json, chipdock
        print(json.dumps([b.as_dict() for b in chipdock.backends() if b.name == "cuda"]))
        """
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(found) == 1, found
    return found[0]


def require_gpu() -> None:
    """Skips the test, with the backend's own reason, unless a CUDA device is usable."""
    if not DEVICE.startswith("cuda"):
        return
    installed_package_dir()
    info = cuda_backend_info()
    if info["device_count"] == 0:
        pytest.skip(f"no usable CUDA device: {info['device_error']}")
