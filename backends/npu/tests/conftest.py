"""Fixtures shared by the npu backend's tests.

Every test runs chipdock in a fresh interpreter (``run_fresh``): the plug-in opens CANN once per process, so the
runtime a test selects (the test double, a folder, none) must be chosen before chipdock is imported.

- ``npu_package_dir``: the installed chipdock_npu folder (skips when chipdock-npu is not installed).
- ``run_fresh(code, env=None, args=None)``: runs Python ``code`` (dedented) in a new interpreter with ``env`` added to
  a clean copy of this process's environment (no CHIPDOCK_NPU_* / ASCEND_HOME_PATH leaking in); returns the
  CompletedProcess. ``args`` instead of ``code`` runs ``python -m <args...>`` (e.g. the CLI).
- ``npu_double_env``: the environment that selects the simulated Ascend runtime (skips when the wheel was built
  without it); tests add the double's CHIPDOCK_NPU_SIM_* knobs to a copy.
- ``no_cann_env``: the environment of a machine without CANN (skips where a CANN install is found anyway).
- ``npu_info(env)``: what ``chipdock.backends()`` says about npu under ``env``, as a dict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Variables that steer which Ascend runtime the plug-in opens: cleared for every fresh interpreter.
RUNTIME_VARS = ("CHIPDOCK_NPU_RUNTIME", "CHIPDOCK_NPU_OPAPI_LIBRARY", "ASCEND_HOME_PATH", "CHIPDOCK_NPU_CALLBACKS")
SIM_PREFIX = "CHIPDOCK_NPU_SIM_"
DOUBLE_LABEL = "simulated Ascend runtime (test double)"

RunFresh = Callable[..., subprocess.CompletedProcess]


@pytest.fixture(scope="session")
def npu_package_dir() -> Path:
    try:
        import chipdock_npu
    except ImportError:
        pytest.skip("chipdock-npu is not installed (.ci/install builds it: pip install ./backends/npu)")
    return Path(chipdock_npu.manifest_path()).parent


def _clean_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in RUNTIME_VARS and not k.startswith(SIM_PREFIX)}


@pytest.fixture(scope="session")
def run_fresh() -> RunFresh:
    def run(code: str | None = None, env: dict[str, str] | None = None, args: list[str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", *args] if args is not None else [sys.executable, "-c",
                                                                          textwrap.dedent(code or "")]
        return subprocess.run(command, env={**_clean_environment(), **(env or {})}, capture_output=True, text=True,
                              timeout=timeout)

    return run


@pytest.fixture(scope="session")
def npu_double_env(npu_package_dir: Path) -> dict[str, str]:
    library = npu_package_dir / "_test_double" / "libascendcl.so"
    if not library.is_file():
        pytest.skip(f"the simulated Ascend runtime is not installed ({library} is absent: the wheel was built with "
                    "CHIPDOCK_NPU_TEST_DOUBLE=OFF)")
    return {"CHIPDOCK_NPU_RUNTIME": "test-double"}


@pytest.fixture(scope="session")
def no_cann_env(npu_package_dir: Path) -> dict[str, str]:
    toolkit = Path("/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so")
    if toolkit.exists():
        pytest.skip(f"this machine has CANN ({toolkit}): the no-CANN path is not taken")
    # An empty search path: nothing ld.so could find either.
    return {"LD_LIBRARY_PATH": ""}


@pytest.fixture(scope="session")
def npu_info(run_fresh: RunFresh, npu_package_dir: Path) -> Callable[[dict[str, str]], dict[str, Any]]:
    def info(env: dict[str, str]) -> dict[str, Any]:
        proc = run_fresh(
            """
            import json, chipdock
            print(json.dumps([b.as_dict() for b in chipdock.backends() if b.name == "npu"]))
            """,
            env,
        )
        assert proc.returncode == 0, proc.stderr
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        assert len(found) == 1, found
        return found[0]

    return info
