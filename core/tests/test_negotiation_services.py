"""Conformance's negotiation cases against the toy backend: a core service
called past the core's struct_size is named, and the backend guide's own copy
kernel (the toy's TOY_COPY_KERNEL section) checks the core's size before it
uses kernel_register, so it passes every negotiation case and runs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from core_helpers import REPO, run_json
from plugins.build import TOY_SOURCE, build_toy_plugin

NEGOTIATE = """
import json
import chipdock
from chipdock_conformance import runtime
from chipdock_conformance.case import Context

ctx = Context("toy:0")
out = {"kernels": next(b.kernel_count for b in chipdock.backends() if b.name == "toy"), "cases": {}}
for case in runtime.collect(ctx):
    if case.id.startswith("runtime/abi/negotiate"):
        result = case.run(ctx)
        out["cases"][case.id] = [result.status, result.reason]
print(json.dumps(out))
"""


def _negotiate(tmp_path: Path, variant: str) -> dict:
    manifest = build_toy_plugin(tmp_path, variant)
    return run_json(NEGOTIATE, env={"CHIPDOCK_PLUGIN_PATH": str(manifest)})  # type: ignore[return-value]


def test_a_service_called_past_struct_size_is_named(tmp_path: Path) -> None:
    out = _negotiate(tmp_path, "log_unguarded")
    failed = {k: reason for k, (status, reason) in out["cases"].items() if status == "fail"}
    assert set(failed) == {"runtime/abi/negotiate[smaller_core_struct]", "runtime/abi/negotiate[header_only_core]"}
    for reason in failed.values():
        assert re.search(r"past the core's struct_size of \d+ bytes: log \(1 call; it needs struct_size >= \d+\)",
                         reason), reason
        assert "CD_STRUCT_SIZE(cd_core_api, log)" in reason, reason


def test_the_guides_copy_kernel_checks_the_core_size(tmp_path: Path) -> None:
    out = _negotiate(tmp_path, "copy_kernel")
    assert out["kernels"] == 1
    assert all(status == "pass" for status, _ in out["cases"].values()), out["cases"]
    manifest = tmp_path / "copy_kernel" / "toy_copy_kernel.chipdock.json"
    ran = run_json("""
        import json, numpy as np, chipdock
        x = chipdock.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="toy:0")
        print(json.dumps(np.asarray(x.T.contiguous()).tolist()))
        """, env={"CHIPDOCK_PLUGIN_PATH": str(manifest)})
    assert ran == np.arange(12, dtype=np.float32).reshape(3, 4).T.tolist()


def test_the_guides_copy_kernel_is_the_toys() -> None:
    """The guide's C block with the copy kernel is, line for line, the toy's TOY_COPY_KERNEL section."""
    guide = (REPO / "docs" / "backend_guide.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```c\n(.*?)```", guide, re.S)
    block = next(b for b in blocks if "toy_kernels_register" in b)
    source = TOY_SOURCE.read_text(encoding="utf-8")
    assert block in source, "docs/backend_guide.md's copy kernel differs from toy_backend.c's TOY_COPY_KERNEL"
