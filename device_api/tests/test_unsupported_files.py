"""chipdock_add_backend(... UNSUPPORTED_FILES ...): the kit checks every entry against the opset it ships.

A configure with an entry naming an op or a dtype that does not exist (or with no reason, or an unknown key)
must fail with a message naming the file and the entry; coverage labels ("float32-bool") and the core's own
`copy` op are accepted, and the accepted entries land in the manifest in file order.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
KIT_DIR = REPO_ROOT / "device_api" / "cmake"
TOY = REPO_ROOT / "docs" / "examples" / "minimal_backend" / "toy_backend.c"

pytestmark = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")


def configure(tmp_path: Path, *files: list[object] | str) -> subprocess.CompletedProcess[str]:
    paths = []
    for i, content in enumerate(files):
        path = tmp_path / f"family{i}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        paths.append(path.as_posix())
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(uf LANGUAGES C)\nfind_package(chipdock 1 CONFIG REQUIRED)\n"
        f'chipdock_add_backend(toy_backend SOURCES "{TOY.as_posix()}" NAME toy\n'
        f"  UNSUPPORTED_FILES {' '.join(repr(p).replace(chr(39), chr(34)) for p in paths)})\n")
    return subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "build"), f"-Dchipdock_DIR={KIT_DIR}"],
                          capture_output=True, text=True, timeout=120, check=False)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    return " ".join(result.stderr.split())


def test_accepted_entries_are_merged_in_file_order(tmp_path: Path):
    first = [{"op": "add", "dtypes": ["float32-bool", "int8"], "reason": "no int8 adder; see x"},
             {"op": "copy", "dtypes": ["bool"], "reason": "no byte moves"}]
    second = [{"op": "matmul", "reason": "no matrix unit"}, {"op": "where", "dtypes": ["bool-float16"], "reason": "r"}]
    result = configure(tmp_path, first, "[]", second)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "build" / "toy.chipdock.json").read_text())
    assert manifest["unsupported"] == first + second


@pytest.mark.parametrize(("entries", "entry", "message"), [
    ([{"op": "add", "reason": "ok"}, {"op": "addd", "reason": "typo"}], 'entry 1 (op "addd")',
     '"addd" is not an op of the opset'),
    ([{"op": "add", "dtypes": ["float31"], "reason": "x"}], 'entry 0 (op "add")', '"float31" is not a chipdock dtype'),
    ([{"op": "add", "dtypes": ["float32-boolean"], "reason": "x"}], 'entry 0 (op "add")',
     '"float32-boolean" names "boolean", which is not a chipdock dtype'),
    ([{"op": "add", "dtypes": ["float32-"], "reason": "x"}], 'entry 0 (op "add")', "nor a coverage label"),
    ([{"op": "add", "dtype": ["float32"], "reason": "x"}], "entry 0", 'unknown key "dtype"'),
    ([{"op": "add", "dtypes": ["float32"], "reason": "  "}], 'entry 0 (op "add")', '"reason" must be a non-empty'),
    ([{"op": "add", "dtypes": "float32", "reason": "x"}], 'entry 0 (op "add")', '"dtypes" must be an array'),
    ([{"dtypes": ["float32"], "reason": "x"}], "entry 0", '"op" must be a string'),
    (["add"], "entry 0", "is not an object"),
])
def test_a_bad_entry_fails_the_configure_naming_file_and_entry(tmp_path: Path, entries, entry, message):
    result = configure(tmp_path, [{"op": "relu", "reason": "fine"}], entries)
    assert result.returncode != 0
    text = one_line(result)
    assert f"chipdock_add_backend(toy_backend): {(tmp_path / 'family1.json').as_posix()}: {entry}" in text, text
    assert message in text, text
    assert not (tmp_path / "build" / "toy.chipdock.json").exists()


def test_a_file_that_is_not_a_json_array_is_refused(tmp_path: Path):
    result = configure(tmp_path, '{"op": "add"}')
    assert result.returncode != 0 and "does not hold a JSON array" in one_line(result)
