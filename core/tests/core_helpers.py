"""Helpers shared by the core's tests (a unique module name: every test folder has a conftest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120,
               unset: list[str] | None = None) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter (own plugin set, own env, without the variables in `unset`)."""
    full_env = {k: v for k, v in os.environ.items() if k not in (unset or [])}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True, text=True,
        timeout=timeout,
    )


def run_json(code: str, env: dict[str, str] | None = None, unset: list[str] | None = None) -> object:
    """Runs `code`, which must print one JSON document last, and parses it."""
    proc = run_python(code, env, unset=unset)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO
