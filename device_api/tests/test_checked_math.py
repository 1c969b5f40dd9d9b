"""The backend kit's checked size arithmetic (chipdock/support/checked_math.h).

The core and every backend compute shapes, byte sizes and view spans with
it; checked_math_driver.cpp runs its boundary cases, under UBSan where the
compiler has it, so a wrapped intermediate fails the test too.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
SUPPORT_INCLUDE = TESTS_DIR.parent / "support" / "include"


def cxx_compiler() -> list[str]:
    return shlex.split(os.environ.get("CXX", "c++"))


def test_checked_math_boundaries(tmp_path: Path, run_tool: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    cxx = cxx_compiler()
    if shutil.which(cxx[0]) is None:
        pytest.skip(f"no C++ compiler ({cxx[0]})")
    out = tmp_path / "checked_math_driver"
    base = cxx + ["-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror", f"-I{SUPPORT_INCLUDE}",
                  "-o", str(out), str(TESTS_DIR / "checked_math_driver.cpp")]
    sanitized = base + ["-fsanitize=undefined", "-fno-sanitize-recover=undefined"]
    probe = subprocess.run(sanitized, capture_output=True, text=True, check=False)
    if probe.returncode != 0:  # no UBSan runtime here: the checks still run
        run_tool(base)
    result = subprocess.run([str(out)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
