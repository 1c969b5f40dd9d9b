"""chipdock: one stable C device ABI, many accelerator backends.

    import chipdock
    x = chipdock.tensor([[1.0, 2.0]], device="cpu:0")
    s = chipdock.Stream("cpu:0")
    with chipdock.stream(s):
        y = x.T.contiguous()      # queued on s
        print(y.numpy())          # ordered after it on s; waits for the copy
    print(chipdock.memory_stats("cpu:0"))

Backends are separate wheels found through the ``chipdock.backends`` entry
point group or ``CHIPDOCK_PLUGIN_PATH``; ``chipdock.backends()`` says why
each was accepted or refused. Importing chipdock never fails because of a
backend: plugins load on first use.
"""

from __future__ import annotations

from . import (
    _C,
    ops,  # noqa: E402  (registers the opset with the core)
)
from ._dtypes import (
    ALL_DTYPES,
    bfloat16,
    bool_,
    dtype,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from ._fallback import deny_ops, fallback_policy, fallback_report, set_fallback_policy
from ._runtime import (
    BackendInfo,
    Device,
    Event,
    Stream,
    _resolve_device,
    backends,
    cmake_dir,
    current_stream,
    default_stream,
    device,
    devices,
    empty_cache,
    get_default_device,
    include_dir,
    memory_stats,
    opset_docs,
    reset_peak_memory_stats,
    set_default_device,
    stream,
    synchronize,
)
from ._tensor import Tensor, empty, from_dlpack, is_pinned, pinned_empty, tensor, zeros
from .errors import (
    ChipdockError,
    DeviceError,
    FallbackWarning,
    InvalidArgumentError,
    InvalidHandleError,
    NotReadyError,
    OutOfMemoryError,
    OutOfRangeError,
    PluginRefusedError,
    UnavailableError,
    UnimplementedError,
)

__version__: str = _C.__version__
ABI_VERSION: tuple[int, int] = tuple(_C.ABI_VERSION)  # type: ignore[assignment]

__all__ = [
    "ABI_VERSION", "ALL_DTYPES", "BackendInfo", "ChipdockError", "Device", "DeviceError", "Event",
    "FallbackWarning", "InvalidArgumentError", "InvalidHandleError", "NotReadyError", "OutOfMemoryError",
    "OutOfRangeError", "PluginRefusedError", "Stream", "Tensor", "UnavailableError", "UnimplementedError",
    "__version__", "_resolve_device", "backends", "bfloat16", "bool_", "cmake_dir", "current_stream",
    "default_stream", "deny_ops", "device", "devices", "dtype", "empty", "empty_cache", "fallback_policy",
    "fallback_report", "float16", "float32", "float64", "from_dlpack", "get_default_device", "include_dir", "int16",
    "int32", "int64", "int8", "is_pinned", "memory_stats", "ops", "opset_docs", "pinned_empty",
    "reset_peak_memory_stats", "set_default_device", "set_fallback_policy", "stream", "synchronize", "tensor", "uint8",
    "zeros",
]
