"""Fixtures of the core's tests; helpers live in core_helpers.py."""

from core_helpers import repo  # noqa: F401  (re-exported fixture)


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 - pytest's hook signature
    """The ONNX backend suite's count on the CPU device (quoted in reports), when it ran."""
    outcomes: dict[str, set[str]] = {}
    for key in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(key, []):
            nodeid = getattr(report, "nodeid", "")
            if "test_onnx_backend_suite" in nodeid and nodeid.endswith("_cpu"):
                outcomes.setdefault(key, set()).add(nodeid)
    if outcomes:
        counts = ", ".join(f"{len(ids)} {key}" for key, ids in outcomes.items())
        terminalreporter.write_line(f"ONNX backend suite on cpu: {counts} (skipped = excluded, see EXCLUDED)")
