"""Fixtures of the core's tests; helpers live in core_helpers.py."""

from core_helpers import repo  # noqa: F401  (re-exported fixture)
