"""chipdock Ascend NPU backend.

This package only announces the plug-in: the chipdock core finds it through the ``chipdock.backends`` entry point,
reads the manifest returned by :func:`manifest_path` and loads the native library named in it. The library opens
CANN (libascendcl.so, libnnopbase.so, libopapi*.so, libhccl.so) at run time; without CANN it reports zero devices
and the reason. ``CHIPDOCK_NPU_RUNTIME=test-double`` selects the simulated Ascend runtime shipped in
``_test_double/`` instead, and every report then says so.
"""

from __future__ import annotations

import os

__all__ = ["__version__", "manifest_path", "test_double_dir"]

__version__ = "0.1.0"

_MANIFEST = "npu.chipdock.json"


def manifest_path() -> str:
    """Absolute path of the backend manifest installed beside this file."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _MANIFEST)


def test_double_dir() -> str:
    """The folder of the simulated Ascend runtime's libraries (used only with CHIPDOCK_NPU_RUNTIME=test-double)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_test_double")
