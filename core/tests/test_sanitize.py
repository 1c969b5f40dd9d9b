"""The sanitizer run (.ci/sanitize): the core and the CPU backend built with ASan + UBSan, and a
part of their tests run under them with LeakSanitizer on. Slow (two sanitized builds, several
minutes even from ccache), so outside the default run: `pytest -m sanitize core/tests/test_sanitize.py`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.sanitize]

# Tensors and views (host copies, as_strided), the allocator, and the CPU movement kernels.
SUBSET = ["core/tests/test_tensor.py", "core/tests/test_allocator.py", "backends/cpu/tests/test_kernels_movement.py"]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc (its libasan and libubsan)")
def test_tests_pass_under_asan_and_ubsan_with_no_report(repo: Path) -> None:
    done = subprocess.run(["bash", ".ci/sanitize", *SUBSET, "-n", "2"], cwd=repo, capture_output=True, text=True,
                          timeout=3600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert "0 from Python processes" in done.stdout
