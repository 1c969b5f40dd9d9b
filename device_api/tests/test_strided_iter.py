"""The backend kit's strided/broadcast iteration helper (chipdock/support/strided_iter.h).

strided_iter_driver.cpp compares every walk with a naive multi-index walk
(contiguous, transposed, negative, zero-stride, broadcast, offset, empty and
0-d operands) and checks each refusal; under UBSan where the compiler has it.
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
ABI_INCLUDE = TESTS_DIR.parent / "include"


def test_strided_iter_walks(tmp_path: Path, run_tool: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    cxx = shlex.split(os.environ.get("CXX", "c++"))
    if shutil.which(cxx[0]) is None:
        pytest.skip(f"no C++ compiler ({cxx[0]})")
    out = tmp_path / "strided_iter_driver"
    base = cxx + ["-std=c++17", "-O1", "-Wall", "-Wextra", "-Wpedantic", "-Werror", f"-I{SUPPORT_INCLUDE}",
                  f"-I{ABI_INCLUDE}", "-o", str(out), str(TESTS_DIR / "strided_iter_driver.cpp")]
    sanitized = base + ["-fsanitize=undefined,address", "-fno-sanitize-recover=undefined"]
    probe = subprocess.run(sanitized, capture_output=True, text=True, check=False)
    if probe.returncode != 0:  # no sanitizer runtime here: the checks still run
        run_tool(base)
    result = subprocess.run([str(out)], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stdout + result.stderr
