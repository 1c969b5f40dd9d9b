"""Fixtures shared by the conformance package's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def suites_own_quick_marks() -> Iterator[None]:
    """The suites' own quick marks instead of the shipped quick selection (CHIPDOCK_CONFORMANCE_QUICK=marked):
    for tests of the recipes and the marks they carry. The selection (quick_selection.json) is tested in
    test_quick_selection.py, and against the planted bugs in test_broken_backends.py."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CHIPDOCK_CONFORMANCE_QUICK", "marked")
        yield
