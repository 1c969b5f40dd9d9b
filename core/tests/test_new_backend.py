"""`chipdock new-backend`: the scaffold builds, loads and passes the runtime groups of the quick suite as generated.

The end-to-end test does what a vendor does after generating: configure on the kit of the chipdock under test
(``chipdock.cmake_dir()``), build with -Werror, install into a private prefix, point CHIPDOCK_PLUGIN_PATH at it,
run ``chipdock conformance --suite quick --only runtime`` and the generated pytest file. It takes about half a
minute on two cores (ccache, when installed, makes a rebuild of the same sources cost nothing; CCACHE_BASEDIR is
set so that the temporary folder's name does not defeat it). The other tests cover the refusals: nothing is
written for a bad name, device type or folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import chipdock
from chipdock import _scaffold
from chipdock.cli import main

NAME, DEVICE_TYPE = "ci_dev", "cidev"
RUNTIME_GROUPS = {"runtime.device", "runtime.memory", "runtime.streams", "runtime.events", "runtime.concurrency",
                  "runtime.negative", "runtime.abi"}


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"$ {' '.join(command)}\n{result.stdout[-6000:]}{result.stderr[-6000:]}"
    return result


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")
def test_a_new_backend_builds_and_passes_the_runtime_quick_suite(tmp_path: Path):
    env = dict(os.environ, CCACHE_BASEDIR=str(tmp_path))
    env.pop("CHIPDOCK_PLUGIN_PATH", None)
    started = time.monotonic()
    source, prefix, report = tmp_path / "src", tmp_path / "prefix", tmp_path / "report"
    run([sys.executable, "-m", "chipdock.cli", "new-backend", NAME, "--device-type", DEVICE_TYPE, "--output",
         str(source)], tmp_path, env)
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    run(["cmake", "-S", str(source), "-B", str(tmp_path / "build"), *generator,
         f"-Dchipdock_DIR={chipdock.cmake_dir()}", f"-DCHIPDOCK_{NAME.upper()}_WERROR=ON"], tmp_path, env)
    run(["cmake", "--build", str(tmp_path / "build"), "--parallel", "2"], tmp_path, env, timeout=600)
    run(["cmake", "--install", str(tmp_path / "build"), "--prefix", str(prefix)], tmp_path, env)
    built = time.monotonic()

    plugin_dir = prefix / f"chipdock_{NAME}"
    manifest = json.loads((plugin_dir / f"{NAME}.chipdock.json").read_text())
    assert (manifest["name"], manifest["device_type"]) == (NAME, DEVICE_TYPE)
    assert manifest["unsupported"][0]["op"] == "add"  # unsupported/kernels.json, merged by the kit

    # Two devices, so that the cross-device negative cases run instead of skipping.
    env.update(CHIPDOCK_PLUGIN_PATH=str(plugin_dir), **{f"CHIPDOCK_{NAME.upper()}_DEVICES": "2"})
    result = run([sys.executable, "-m", "chipdock.cli", "conformance", "--device", DEVICE_TYPE, "--suite", "quick",
                  "--only", "runtime", "--report", str(report)], tmp_path, env)
    passed = time.monotonic()
    data = json.loads((report / "report.json").read_text())
    statuses = [case["status"] for case in data["cases"]]
    assert statuses and set(statuses) == {"pass"}, result.stdout
    assert {case["group"] for case in data["cases"]} == RUNTIME_GROUPS
    print(f"\nnew-backend -> passing runtime quick suite: {passed - started:.1f} s (generate + build + install "
          f"{built - started:.1f} s, {len(statuses)} cases {passed - built:.1f} s)")

    run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests")], source, env)


def test_a_non_empty_folder_is_refused_and_left_alone(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["new-backend", "mydev", "--output", str(tmp_path)])
    assert result.exit_code == 1
    assert "is not empty (1 entries: notes.txt)" in result.output and "nothing was written" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("name", ["9lives", "my-dev", "my dev", "_mydev", "dév", "x" * 49, ""])
def test_a_name_that_is_not_an_identifier_is_refused(tmp_path: Path, name: str):
    result = CliRunner().invoke(main, ["new-backend", name, "--output", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "chipdock new-backend: [core] new-backend: NAME" in result.output
    assert "is not a valid identifier" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("device_type", ["my:dev", "-x", "a/b", "acme.v2", "2x", "t" * 65])
def test_a_bad_device_type_is_refused(tmp_path: Path, device_type: str):
    result = CliRunner().invoke(main, ["new-backend", "mydev", "--device-type", device_type, "--output",
                                       str(tmp_path / "out")])
    assert result.exit_code == 1 and "--device-type" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [["cpu"], ["mydev", "--device-type", "cuda"]])
def test_the_device_type_of_a_chipdock_backend_is_refused(tmp_path: Path, args: list[str]):
    result = CliRunner().invoke(main, ["new-backend", *args, "--output", str(tmp_path / "out")])
    assert result.exit_code == 1 and "belongs to chipdock's own" in result.output
    assert not (tmp_path / "out").exists()


def test_an_output_that_is_a_file_is_refused(tmp_path: Path):
    target = tmp_path / "taken"
    target.write_text("x")
    result = CliRunner().invoke(main, ["new-backend", "mydev", "--output", str(target)])
    assert result.exit_code == 1 and "exists and is not a folder" in result.output
    assert target.read_text() == "x"


def test_an_empty_folder_is_filled_and_every_placeholder_replaced(tmp_path: Path):
    result = CliRunner().invoke(main, ["new-backend", "acme_x1", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["CMakeLists.txt", "README.md", "pyproject.toml", "python/chipdock_acme_x1/__init__.py",
                     "src/backend.h", "src/device.cpp", "src/kernels.cpp", "src/plugin.cpp", "src/stream.cpp",
                     "tests/test_acme_x1.py", "unsupported/kernels.json"]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert "@NAME" not in text and "@DEVICE_TYPE@" not in text and "@PACKAGE@" not in text, path
    pyproject = (tmp_path / "pyproject.toml").read_text()
    assert 'acme_x1 = "chipdock_acme_x1:manifest_path"' in pyproject and 'name = "chipdock-acme-x1"' in pyproject
    assert json.loads((tmp_path / "unsupported" / "kernels.json").read_text())[0]["op"] == "add"
    assert "CHIPDOCK_ACME_X1_DEVICES" in (tmp_path / "src" / "device.cpp").read_text()


def test_the_generated_python_is_lint_clean(tmp_path: Path):
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    _scaffold.new_backend("lint_me", output=tmp_path / "b")
    result = subprocess.run([ruff, "check", "--isolated", "--line-length", "120", "--select", "E,F,W,I,UP,B",
                             str(tmp_path / "b")], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
