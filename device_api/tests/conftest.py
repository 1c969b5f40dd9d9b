"""Fixtures shared by the ABI guard tests (run: pytest device_api/tests).

These tests need a C compiler (``cc``, or $CC) and, for the backend kit,
CMake and Ninja; they never need the Python core.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = REPO_ROOT / "device_api" / "include"


def c_compiler() -> list[str]:
    """The C compiler command: $CC if set, else cc."""
    return shlex.split(os.environ.get("CC", "cc"))


def run_tool(command: list[str], cwd: Path | None = None,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs `command`; fails the calling test with the command and its output
    if it exits non-zero."""
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        pytest.fail(f"$ {shlex.join(command)}\n{result.stdout}{result.stderr}", pytrace=False)
    return result


@pytest.fixture(scope="session", name="run_tool")
def run_tool_fixture() -> Callable[..., subprocess.CompletedProcess[str]]:
    """run_tool(command, cwd=None, env=None): run it, fail the test on error."""
    return run_tool


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def load_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """device_api/tests/load_driver.c, built once per session."""
    if shutil.which(c_compiler()[0]) is None:
        pytest.skip(f"no C compiler ({c_compiler()[0]})")
    out = tmp_path_factory.mktemp("load_driver") / "load_driver"
    run_tool(c_compiler() + [
        "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", f"-I{INCLUDE_DIR}",
        "-o", str(out), str(TESTS_DIR / "load_driver.c"), "-ldl",
    ])
    return out


@dataclass
class DriverResult:
    """What load_driver printed: its exit code, key=value fields, raw output."""

    returncode: int
    output: str
    fields: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"load_driver exited {self.returncode}:\n{self.output}"


@pytest.fixture(scope="session")
def drive(load_driver: Path) -> Callable[..., DriverResult]:
    """drive(library, mode="probe", core_major=None, env=None) -> DriverResult."""

    def run(library: Path, mode: str = "probe", core_major: int | None = None,
            env: dict[str, str] | None = None) -> DriverResult:
        command = [str(load_driver), mode, str(library)]
        if core_major is not None:
            command.append(str(core_major))
        full_env = dict(os.environ)
        full_env.pop("TOY_DEVICES", None)
        full_env.update(env or {})
        result = subprocess.run(command, capture_output=True, text=True, timeout=60,
                                env=full_env, check=False)
        output = result.stdout + result.stderr
        fields: dict[str, str] = {}
        for line in result.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.isidentifier():
                fields.setdefault(key, value)
        return DriverResult(result.returncode, output, fields)

    return run


@pytest.fixture(scope="session")
def toy_build() -> ModuleType:
    """core/tests/plugins/build.py, imported under a name that cannot clash."""
    path = REPO_ROOT / "core" / "tests" / "plugins" / "build.py"
    spec = importlib.util.spec_from_file_location("chipdock_tests_toy_build", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
