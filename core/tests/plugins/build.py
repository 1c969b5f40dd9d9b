"""Build the toy backend and its planted-fault variants for loader tests.

The toy backend (``docs/examples/minimal_backend/toy_backend.c``) is compiled
straight with the C compiler (no CMake, so a variant takes a fraction of a
second), and its manifest is written beside it::

    from build import build_toy_plugin          # or: from plugins import ...
    manifest = build_toy_plugin(tmp_path, "abi_major_2")
    # tmp_path/abi_major_2/libtoy_abi_major_2.so
    # tmp_path/abi_major_2/toy_abi_major_2.chipdock.json  <- returned

Every variant's manifest is honest (name "toy", device type "toy", ABI 1.0,
the real library file name) unless ``manifest_overrides`` makes it lie, so a
test chooses whether the fault is caught before ``dlopen`` (the manifest) or
after it (the table). Importing this module needs nothing beyond the standard
library.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

REPO_ROOT: Path = Path(__file__).resolve().parents[3]
TOY_SOURCE: Path = REPO_ROOT / "docs" / "examples" / "minimal_backend" / "toy_backend.c"
INCLUDE_DIR: Path = REPO_ROOT / "device_api" / "include"
FROZEN_V1_0_INCLUDE_DIR: Path = REPO_ROOT / "core" / "tests" / "abi_v1_0"

#: The reason the ``no_devices`` variant gives for having no devices.
NO_DEVICES_REASON = "toy runtime not installed (planted by the no_devices variant)"

#: Variant name -> preprocessor definitions that plant its fault.
VARIANT_DEFINES: dict[str, list[str]] = {
    "ok": [],
    "abi_major_2": ["TOY_ABI_MAJOR_OVERRIDE=2"],  # the table claims ABI 2.x
    "undersized": ["TOY_UNDERSIZED_TABLE"],  # struct_size ends before memory_allocate
    "null_slot": ["TOY_NULL_REQUIRED_SLOT"],  # memory_allocate is NULL
    "no_entry": ["TOY_NO_ENTRY"],  # dlsym("chipdock_plugin_entry") fails
    "refuse": ["TOY_REFUSE_CORE"],  # the entry returns NULL
    "name_mismatch": ['TOY_NAME_OVERRIDE="other"'],  # table name "other" != manifest "toy"
    "no_devices": [f'TOY_NO_DEVICES_REASON="{NO_DEVICES_REASON}"'],  # UNAVAILABLE + reason
    "copy_kernel": ["TOY_COPY_KERNEL"],  # the backend guide's copy kernel (float32), registered
    "log_unguarded": ["TOY_LOG_UNGUARDED"],  # the entry calls core->log without checking struct_size
    "attribute_echo": ["TOY_ATTRIBUTE_ECHO"],  # softmax(float32) writes num_attributes and axis to its output
    "frozen_v1_0": [],  # the ok backend, compiled against core/tests/abi_v1_0
    "not_a_library": [],  # a text file with a .so name: dlopen fails
    "crash_in_entry": ["TOY_CRASH_IN_ENTRY=SIGSEGV"],  # raise(SIGSEGV) in chipdock_plugin_entry
    "hang_in_entry": ["TOY_HANG_IN_ENTRY"],  # chipdock_plugin_entry never returns
    "scale_kernel": ["TOY_SCALE_KERNEL"],  # registers a float32 kernel of the test op toy_scale
}

#: Every variant build_toy_plugin accepts.
VARIANTS: list[str] = list(VARIANT_DEFINES)


class _Delete:
    """Marker for manifest_overrides: remove this key from the manifest."""

    def __repr__(self) -> str:
        return "DELETE"


#: Use as a value in ``manifest_overrides`` to drop a key, e.g.
#: ``{"abi": {"minor": DELETE}}``.
DELETE: Any = _Delete()


class PluginBuildError(RuntimeError):
    """The compiler failed; the message holds the command and its output."""


def abi_version(include_dir: Path = INCLUDE_DIR) -> tuple[int, int]:
    """(major, minor) as the headers under `include_dir` define them."""
    text = (include_dir / "chipdock" / "cd_base.h").read_text()
    major = re.search(r"#define CD_ABI_VERSION_MAJOR (\d+)", text)
    minor = re.search(r"#define CD_ABI_VERSION_MINOR (\d+)", text)
    assert major and minor, f"no ABI version in {include_dir}"
    return int(major.group(1)), int(minor.group(1))


def toy_manifest(library: str, include_dir: Path = INCLUDE_DIR) -> dict[str, Any]:
    """The honest manifest of the toy backend whose library file is `library`,
    built against the headers under `include_dir`."""
    major, minor = abi_version(include_dir)
    return {
        "schema": 1,
        "name": "toy",
        "device_type": "toy",
        "version": "0.1.0",
        "library": library,
        "abi": {"major": major, "minor": minor},
        "vendor_runtime": {"name": None, "version": None},
        "driver": {"name": None, "min_version": None},
    }


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of `base` with `overrides` merged in, recursing into dicts.

    A value of DELETE removes the key; any other non-dict value replaces it.
    """
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if value is DELETE:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def build_toy_plugin(
    out_dir: Path,
    variant: str = "ok",
    include_dir: Path | None = None,
    manifest_overrides: dict[str, Any] | None = None,
    cc: str = "cc",
    extra_defines: list[str] | None = None,
) -> Path:
    """Build one toy backend variant and return the path of its manifest.

    Writes ``out_dir/<variant>/libtoy_<variant>.so`` and, beside it,
    ``toy_<variant>.chipdock.json``. `include_dir` replaces the ABI headers
    (default: ``device_api/include``; ``core/tests/abi_v1_0`` for the
    ``frozen_v1_0`` variant). `manifest_overrides` is deep-merged into the
    manifest (see DELETE). `cc` is the compiler command (may hold arguments,
    e.g. ``"ccache cc"``). `extra_defines` are more ``-D`` definitions on top of the
    variant's, e.g. ``['TOY_DEVICE_NAME_OVERRIDE="name"']`` (a hostile device name
    for the terminal-escaping tests). Raises ValueError for an unknown variant and
    PluginBuildError when compilation fails.
    """
    if variant not in VARIANT_DEFINES:
        raise ValueError(f"unknown toy variant {variant!r}; known: {', '.join(VARIANTS)}")
    target_dir = Path(out_dir) / variant
    target_dir.mkdir(parents=True, exist_ok=True)
    library = target_dir / f"libtoy_{variant}.so"

    if variant == "not_a_library":
        library.write_text("this is not a shared library; dlopen must fail on it\n")
    else:
        if include_dir is None:
            include_dir = FROZEN_V1_0_INCLUDE_DIR if variant == "frozen_v1_0" else INCLUDE_DIR
        command = shlex.split(cc) + [
            "-shared", "-fPIC", "-std=c99", "-O1", "-fvisibility=hidden",
            "-Wall", "-Wextra",
            f"-I{include_dir}",
            *[f"-D{define}" for define in [*VARIANT_DEFINES[variant], *(extra_defines or [])]],
            "-o", str(library), str(TOY_SOURCE),
            "-pthread",
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise PluginBuildError(
                f"building toy variant {variant!r} failed ({result.returncode}):\n"
                f"$ {shlex.join(command)}\n{result.stdout}{result.stderr}"
            )

    manifest = toy_manifest(library.name, include_dir or INCLUDE_DIR)
    if manifest_overrides:
        manifest = deep_merge(manifest, manifest_overrides)
    manifest_path = target_dir / f"toy_{variant}.chipdock.json"
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest_path


__all__ = [
    "DELETE",
    "FROZEN_V1_0_INCLUDE_DIR",
    "INCLUDE_DIR",
    "NO_DEVICES_REASON",
    "PluginBuildError",
    "REPO_ROOT",
    "TOY_SOURCE",
    "VARIANTS",
    "VARIANT_DEFINES",
    "build_toy_plugin",
    "deep_merge",
    "toy_manifest",
]
