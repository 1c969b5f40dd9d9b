"""Test plugins for the core's loader tests: see build.py."""

from .build import (  # noqa: F401
    DELETE,
    NO_DEVICES_REASON,
    VARIANTS,
    PluginBuildError,
    build_toy_plugin,
    toy_manifest,
)
