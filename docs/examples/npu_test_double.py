"""Ascend NPUs through chipdock-npu, tried on the simulated Ascend runtime (test double).

Run it with ``python3 docs/examples/npu_test_double.py`` once chipdock-npu is installed
(``.ci/install`` builds it on any machine). It selects the test double unless
CHIPDOCK_NPU_RUNTIME already names a runtime: on an Atlas machine, run it with
``CHIPDOCK_NPU_RUNTIME=$ASCEND_HOME_PATH/lib64`` and the same code runs on the chip. It checks
every result with ``assert``.
"""

import os
import warnings

# The plug-in opens CANN once, when chipdock first loads it: choose the runtime before that.
os.environ.setdefault("CHIPDOCK_NPU_RUNTIME", "test-double")

import numpy as np  # noqa: E402

import chipdock  # noqa: E402

npu = next((b for b in chipdock.backends() if b.name == "npu"), None)
assert npu is not None, "chipdock-npu is not installed (pip install --no-build-isolation ./backends/npu)"
assert npu.accepted and npu.device_count > 0, npu.reason or npu.device_error
print(f"npu: {npu.device_count} devices, {npu.kernel_count} kernels; supports CANN {npu.vendor_runtime['version']}")
props = chipdock.device("npu:0").properties()
print(f"npu:0: {props['name']}, {props['runtime_version']}, {props['total_memory'] >> 20} MiB")
# Every line about the double says so; on a real chip there is no such label.
if os.environ["CHIPDOCK_NPU_RUNTIME"] == "test-double":
    assert "test double" in props["name"] and "test double" in props["runtime_version"]

# The same op on npu:0 and on the CPU reference: aclnn kernels on the NPU.
x = np.linspace(-4, 4, 24, dtype=np.float32).reshape(4, 6)
on_npu = chipdock.ops.gelu(chipdock.tensor(x, device="npu:0"), approximate="tanh").numpy()
on_cpu = chipdock.ops.gelu(chipdock.tensor(x, device="cpu:0"), approximate="tanh").numpy()
assert np.allclose(on_npu, on_cpu, rtol=1e-6, atol=1e-7)

# float64 tanh has no aclnn kernel on Atlas A2 (declared in the backend's manifest): it runs
# on the CPU reference, with a FallbackWarning, and chipdock.fallback_report() counts it.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = chipdock.ops.tanh(chipdock.tensor(np.ones(3), device="npu:0"))
assert y.device == chipdock.device("npu:0") and np.allclose(y.numpy(), np.tanh(1.0))
assert any(issubclass(w.category, chipdock.FallbackWarning) for w in caught)
# The report's reason is the manifest's own, "declared unsupported: <why>" (else "no kernel").
assert chipdock.fallback_report()[0]["reason"].startswith("declared unsupported: aclnnTanh")
print("fell back:", chipdock.fallback_report())
