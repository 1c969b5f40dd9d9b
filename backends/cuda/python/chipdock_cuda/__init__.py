"""chipdock CUDA backend.

This package only announces the plug-in: the chipdock core finds it through
the ``chipdock.backends`` entry point, reads the manifest returned by
:func:`manifest_path` and then loads the native library named in it. The
library finds the CUDA runtime of the ``nvidia-cuda-runtime`` wheel through
its RPATH, so the host needs nothing but an NVIDIA driver.
"""

from __future__ import annotations

import os

__all__ = ["__version__", "manifest_path"]

# Kept equal to pyproject.toml and the built manifest by tests/test_build.py.
__version__ = "0.1.0"

_MANIFEST = "cuda.chipdock.json"


def manifest_path() -> str:
    """Absolute path of the backend manifest installed beside this file."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _MANIFEST)
