"""The installed chipdock-cuda wheel: one exported symbol, the wheel's CUDA runtime as its only linked CUDA library, a
manifest of its needs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from cuda_helpers import BACKEND_DIR, installed_package_dir


def _library():
    return installed_package_dir() / "libchipdock_cuda.so"


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (binutils)")
    return path


def test_the_library_exports_only_the_entry_point():
    out = subprocess.run([_tool("nm"), "-D", "--defined-only", str(_library())], capture_output=True,
                         text=True, check=True).stdout
    assert [line.split()[-1] for line in out.splitlines() if line.strip()] == ["chipdock_plugin_entry"]


def test_the_library_finds_the_wheels_cuda_runtime_through_its_runpath():
    lib = "libcudart.so.13"
    dynamic = subprocess.run([_tool("readelf"), "-d", str(_library())], capture_output=True, text=True,
                             check=True).stdout
    needed = set(re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic))
    # The runtime is the only CUDA library linked: no toolkit library, no libcublas, and cuBLASLt and NCCL are
    # opened once there is a device (test_cuda_lazy_libraries.py).
    assert {n for n in needed if "cu" in n or "nccl" in n} == {lib}, needed
    assert re.search(r"R(UN)?PATH.*\[\$ORIGIN/\.\./nvidia/cu13/lib[]:]", dynamic), dynamic
    # Resolved without LD_LIBRARY_PATH, into the nvidia-cuda-runtime wheel beside the plug-in.
    env = {"PATH": "/usr/bin:/bin"}
    ldd = subprocess.run([_tool("ldd"), str(_library())], capture_output=True, text=True, env=env).stdout
    line = next(x for x in ldd.splitlines() if lib in x)
    assert f"/nvidia/cu13/lib/{lib}" in line and "not found" not in line


def test_the_manifest_declares_runtime_driver_and_version():
    import chipdock_cuda

    manifest = json.loads((installed_package_dir() / "cuda.chipdock.json").read_text())
    pyproject = (BACKEND_DIR / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1)
    assert manifest["name"] == manifest["device_type"] == "cuda"
    assert manifest["version"] == version == chipdock_cuda.__version__
    assert manifest["vendor_runtime"] == {"name": "CUDA", "version": "13.0"}
    assert manifest["driver"]["name"] == "nvidia"
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", manifest["driver"]["min_version"])
    needs = r'"nvidia-cuda-runtime==13\.0\.\*", "nvidia-cublas==13\.0\.\*", "nvidia-nccl-cu13'
    assert re.search(r"^dependencies = \[" + needs, pyproject, re.M)
