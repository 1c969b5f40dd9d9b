"""chipdock CPU reference backend.

This package only announces the plug-in: the chipdock core finds it through
the ``chipdock.backends`` entry point, reads the manifest returned by
:func:`manifest_path` and then loads the native library named in it.
"""

from __future__ import annotations

import os

__all__ = ["__version__", "manifest_path"]

# Kept equal to pyproject.toml and the built manifest by tests/test_plugin_abi.py.
__version__ = "0.1.0"

_MANIFEST = "cpu.chipdock.json"


def manifest_path() -> str:
    """Absolute path of the backend manifest installed beside this file."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _MANIFEST)
