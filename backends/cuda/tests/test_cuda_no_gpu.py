"""Without a usable GPU the backend is accepted with zero devices and says why; chipdock itself keeps working."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cuda_helpers import NO_GPU_REASONS, cuda_backend_info, installed_package_dir, run_python


@pytest.fixture(scope="module")
def no_gpu_info() -> dict:
    installed_package_dir()
    info = cuda_backend_info()
    if info["device_count"] > 0:
        pytest.skip(f"this machine has {info['device_count']} CUDA device(s): the no-GPU path is not taken")
    return info


def test_the_backend_is_accepted_with_zero_devices_and_the_reason(no_gpu_info):
    assert no_gpu_info["status"] == "accepted", no_gpu_info["reason"]
    assert no_gpu_info["device_count"] == 0
    assert no_gpu_info["device_error"].startswith(NO_GPU_REASONS), no_gpu_info["device_error"]
    # Kernels register without a device: registration never touches the driver.
    # Every op signature the CPU reference registers has a CUDA kernel (copy, the elementwise family, reductions and
    # norms, linear algebra, data movement and pooling): 621 registrations, the same count as cpu.
    cpu = run_python(
        "import chipdock, json; print(json.dumps([b.kernel_count for b in chipdock.backends() if b.name == 'cpu']))"
    )
    assert cpu.returncode == 0, cpu.stderr
    assert [no_gpu_info["kernel_count"]] == json.loads(cpu.stdout.splitlines()[-1])


def test_import_and_the_cpu_device_still_work(no_gpu_info):
    proc = run_python(
        """
        import numpy as np, chipdock
        print(chipdock.tensor(np.arange(4), device="cpu:0").numpy().sum())
        try:
            chipdock.device("cuda:0")
        except chipdock.ChipdockError as e:
            print("lookup:", e)
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "6"
    assert no_gpu_info["device_error"] in proc.stdout


def test_chipdock_check_reports_the_reason(no_gpu_info):
    proc = subprocess.run([sys.executable, "-m", "chipdock.cli", "check", "--json"], capture_output=True,
                          text=True, timeout=300)
    # No CUDA device means nothing to check, not a failure: the CPU device still passes.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    cuda = [b for b in out["backends"] if b["name"] == "cuda"]
    assert [b["device_error"] for b in cuda] == [no_gpu_info["device_error"]]
    assert cuda[0]["driver"]["min_version"] and cuda[0]["vendor_runtime"]["version"] == "13.0"
