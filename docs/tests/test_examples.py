"""The documentation's code runs, so it cannot rot.

- Every ``docs/examples/*.py`` runs in a fresh interpreter and must exit 0
  (the examples check their own results with ``assert``).
- Every fenced ```` ```python ```` block of the guides (``README.md``,
  ``docs/user_guide.md``, ``docs/backend_guide.md``, ``docs/conformance.md``,
  ``docs/models.md``) runs in a fresh interpreter and must exit 0,
  unless it contains the marker comment ``# not run`` (kept for fragments
  that need a backend built first, or hardware).
- A block introduced by "This is `docs/examples/<name>.py`" must be that
  file, character for character, and every example is named by a guide.
- Every relative link of a guide points at a file or folder that exists.

The interpreters inherit the environment, so under the repository's root
conftest.py they see the CPU backend in strict mode with two devices
(CHIPDOCK_CPU_STRICT=1, CHIPDOCK_CPU_DEVICES=2). Run: pytest -q docs/tests
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1]
REPO = DOCS.parent
EXAMPLES = sorted((DOCS / "examples").glob("*.py"))
GUIDES = [REPO / "README.md", DOCS / "user_guide.md", DOCS / "backend_guide.md", DOCS / "conformance.md",
          DOCS / "models.md"]
NOT_RUN_MARKER = "# not run"
TIMEOUT_S = 300

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*$")
_FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")
_QUOTES_EXAMPLE = re.compile(r"This is `docs/examples/(?P<name>[\w.-]+\.py)`")
_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


@dataclass
class Block:
    guide: Path
    line: int  # 1-based line of the opening fence
    code: str
    intro: str  # the last non-blank line before the fence

    @property
    def id(self) -> str:
        return f"{self.guide.name}:{self.line}"

    @property
    def runnable(self) -> bool:
        return NOT_RUN_MARKER not in self.code

    @property
    def quoted_example(self) -> str | None:
        match = _QUOTES_EXAMPLE.search(self.intro)
        return match.group("name") if match else None


def python_blocks(guide: Path) -> list[Block]:
    """Every ```python block of `guide`, dedented by its fence's indentation."""
    if not guide.is_file():
        return []
    lines = guide.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE_OPEN.match(lines[i])
        if opening is None:
            i += 1
            continue
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not _FENCE_CLOSE.match(lines[i]):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"{guide.name}:{start + 1}: a ```python block is never closed")
        intro = next((text for text in reversed(lines[:start]) if text.strip()), "")
        code = textwrap.dedent("\n".join(body) + "\n") if opening.group("indent") else "\n".join(body) + "\n"
        blocks.append(Block(guide, start + 1, code, intro))
        i += 1
    return blocks


ALL_BLOCKS = [block for guide in GUIDES for block in python_blocks(guide)]


def run_python_file(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(path)], cwd=REPO, env=dict(os.environ), capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )


def numbered(code: str) -> str:
    return "\n".join(f"{n:4} | {line}" for n, line in enumerate(code.splitlines(), 1))


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_example_runs(example: Path) -> None:
    proc = run_python_file(example)
    assert proc.returncode == 0, (
        f"{example.relative_to(REPO)} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.runnable], ids=[b.id for b in ALL_BLOCKS if b.runnable]
)
def test_guide_block_runs(block: Block, tmp_path: Path) -> None:
    script = tmp_path / f"{block.guide.stem}_line{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    proc = run_python_file(script)
    assert proc.returncode == 0, (
        f"the block at {block.id} exited {proc.returncode}\n--- code\n{numbered(block.code)}\n"
        f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    )


@pytest.mark.parametrize("guide", GUIDES, ids=[path.name for path in GUIDES])
def test_guide_exists_and_has_runnable_blocks(guide: Path) -> None:
    assert guide.is_file(), f"{guide.relative_to(REPO)} is missing"
    assert any(block.runnable for block in python_blocks(guide)), f"{guide.name} has no runnable python block"


def test_quoted_examples_match_their_files() -> None:
    quoted = [block for block in ALL_BLOCKS if block.quoted_example]
    for block in quoted:
        path = DOCS / "examples" / str(block.quoted_example)
        assert path.is_file(), f"{block.id} quotes {path.relative_to(REPO)}, which does not exist"
        assert block.code == path.read_text(encoding="utf-8"), (
            f"{block.id} differs from {path.relative_to(REPO)}: copy the file into the guide again"
        )


def test_every_example_is_named_by_a_guide() -> None:
    text = "\n".join(guide.read_text(encoding="utf-8") for guide in GUIDES if guide.is_file())
    for example in EXAMPLES:
        assert f"docs/examples/{example.name}" in text, f"no guide mentions docs/examples/{example.name}"


@pytest.mark.parametrize("guide", GUIDES, ids=[path.name for path in GUIDES])
def test_relative_links_resolve(guide: Path) -> None:
    for match in _LINK.finditer(guide.read_text(encoding="utf-8")):
        target = match.group("target").split("#", 1)[0]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):  # an anchor or a URL
            continue
        assert (guide.parent / target).exists(), f"{guide.name} links to {target}, which does not exist"


def test_the_block_parser(tmp_path: Path) -> None:
    guide_text = (
        "Intro.\n\n```python\nprint(1)\n```\n\n"
        "1. A step:\n\n   ```python\n   x = 2\n   # not run\n   ```\n\n"
        "This is `docs/examples/demo.py`:\n\n```python\nimport chipdock\n```\n"
        "```bash\necho no\n```\n"
    )
    path = tmp_path / "guide.md"
    path.write_text(guide_text, encoding="utf-8")
    blocks = python_blocks(path)
    assert [(b.line, b.code, b.runnable, b.quoted_example) for b in blocks] == [
        (3, "print(1)\n", True, None),
        (9, "x = 2\n# not run\n", False, None),
        (16, "import chipdock\n", True, "demo.py"),
    ]
