"""The reports of a conformance run: report.json, junit.xml, the baseline comparison, the terminal summary.

report.json is the source of the others (and of a later run's ``--baseline``):

- ``schema`` (1), ``header`` (versions, device, host, command, timing, level, seed; see docs/conformance.md),
- ``summary`` (``total``, ``pass``, ``fail``, ``skip``, ``seconds``), ``groups`` (the same per group),
- ``cases``: per case ``id``, ``suite``, ``group``, ``op``, ``dtype``, ``status``, ``reason``, ``metrics``,
  ``seconds`` and ``details`` (a traceback or the tail of a dead worker's output),
- ``coverage``: ``{"available": true, "result": ...}`` or ``{"available": false, "reason": ...}``,
- ``baseline``: null, or the ``fixed``, ``regressed`` and ``changed`` cases against an earlier report.
"""

from __future__ import annotations

import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA = 1
METRIC_RTOL = 0.01  # a metric that moved by more than 1 % (relative) counts as a change against the baseline
# move with any tiny change of the data; not a change worth a line (worst: the values at worst_index)
IGNORED_METRICS = ("worst_index", "worst")
FAILURES_SHOWN = 50  # failures listed in the terminal; the reports have all of them


class ReportError(ValueError):
    """A file that is not a conformance report."""


def summarize(records: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Counts and seconds for the whole run and per group (groups in the order they first appear)."""

    def empty() -> dict[str, Any]:
        return {"total": 0, "pass": 0, "fail": 0, "skip": 0, "seconds": 0.0}

    total = empty()
    groups: dict[str, dict[str, Any]] = {}
    for r in records:
        group = groups.setdefault(r["group"], {"group": r["group"], "suite": r["suite"], **empty()})
        for counts in (total, group):
            counts["total"] += 1
            counts[r["status"]] += 1
            counts["seconds"] += r["seconds"]
    for counts in (total, *groups.values()):
        counts["seconds"] = round(counts["seconds"], 3)
    return total, list(groups.values())


def build_report(header: dict[str, Any], records: list[dict[str, Any]], coverage: dict[str, Any],
                 baseline: dict[str, Any] | None = None, baseline_path: str = "") -> dict[str, Any]:
    """report.json's content; with ``baseline`` (an earlier report) the comparison against it."""
    summary, groups = summarize(records)
    report = {"schema": SCHEMA, "header": header, "summary": summary, "groups": groups, "cases": records,
              "coverage": coverage, "baseline": None}
    if baseline is not None:
        report["baseline"] = {
            "path": baseline_path,
            "header": {k: baseline.get("header", {}).get(k) for k in
                       ("device", "device_name", "core_version", "backend_version", "start_time", "level")},
            **diff_reports(baseline, report),
        }
    return report


def load_report(path: str | Path) -> dict[str, Any]:
    """A report.json written earlier; ReportError if the file is missing or is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReportError(f"--baseline {path}: cannot read it as JSON: {exc}") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or not all(isinstance(c, dict) and "id" in c and "status" in c for c in cases):
        raise ReportError(f"--baseline {path}: not a conformance report.json (no list of cases with id and status)")
    return data


# ---------------------------------------------------------------------------------------------- baseline


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def metric_changes(before: dict[str, Any], after: dict[str, Any], rtol: float = METRIC_RTOL) -> list[str]:
    """Human-readable metric changes: numbers that moved by more than ``rtol``, other values that differ,
    metrics that appeared or disappeared."""
    changes = []
    for key in sorted(set(before) | set(after)):
        if key in IGNORED_METRICS:
            continue
        if key not in before or key not in after:
            changes.append(f"{key} {'added' if key in after else 'removed'}")
            continue
        old, new = before[key], after[key]
        a, b = _number(old), _number(new)
        if a is not None and b is not None:
            if abs(a - b) > rtol * max(abs(a), abs(b)):
                changes.append(f"{key} {old:g} -> {new:g}")
        elif old != new:
            changes.append(f"{key} {json.dumps(old)} -> {json.dumps(new)}")
    return changes


def diff_reports(old: dict[str, Any], new: dict[str, Any], rtol: float = METRIC_RTOL) -> dict[str, list[dict]]:
    """``fixed`` (fail -> pass), ``regressed`` (pass -> fail) and ``changed`` (any other status change, a
    failure whose reason changed, metrics that moved by more than ``rtol``, cases added or removed)."""
    before = {c["id"]: c for c in old["cases"]}
    after = {c["id"]: c for c in new["cases"]}
    fixed: list[dict[str, Any]] = []
    regressed: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []

    def entry(case_id: str, b: str | None, a: str | None, change: str) -> dict[str, Any]:
        return {"id": case_id, "before": b, "after": a, "change": change}

    for case_id, now in after.items():
        was = before.get(case_id)
        if was is None:
            changed.append(entry(case_id, None, now["status"], "added"))
        elif (was["status"], now["status"]) == ("fail", "pass"):
            fixed.append(entry(case_id, "fail", "pass", f"was: {was.get('reason', '')}"))
        elif (was["status"], now["status"]) == ("pass", "fail"):
            regressed.append(entry(case_id, "pass", "fail", now.get("reason", "")))
        elif was["status"] != now["status"]:
            changed.append(entry(case_id, was["status"], now["status"], f"status {was['status']} -> {now['status']}"))
        else:
            what = metric_changes(was.get("metrics") or {}, now.get("metrics") or {}, rtol)
            if now["status"] == "fail" and was.get("reason") != now.get("reason"):
                what.insert(0, f"reason: {now.get('reason')} (was: {was.get('reason')})")
            if what:
                changed.append(entry(case_id, was["status"], now["status"], "; ".join(what)))
    changed += [entry(case_id, was["status"], None, "removed") for case_id, was in before.items()
                if case_id not in after]
    return {"fixed": fixed, "regressed": regressed, "changed": changed}


# ---------------------------------------------------------------------------------------------- junit.xml

_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """XML 1.0 cannot hold most control characters, which a crashed worker's output may contain."""
    return _XML_ILLEGAL.sub("?", text)


def failure_kind(record: dict[str, Any]) -> str:
    """crash, hang, error (an exception), collect (a suite that did not collect) or fail (a check failed)."""
    reason = record["reason"]
    if record["group"].endswith(".collect"):
        return "collect"
    if reason.startswith(("crashed", "the worker crashed")):
        return "crash"
    if reason.startswith(("hung", "the worker hung")):
        return "hang"
    if record["details"].startswith("Traceback"):
        return "error"
    return "fail"


def junit_tree(report: dict[str, Any]) -> ET.ElementTree:
    """JUnit XML: one testsuite per group, one testcase per case (classname = group, name = case id)."""
    header, summary = report["header"], report["summary"]
    root = ET.Element("testsuites", name=f"chipdock conformance {header.get('device', '')}",
                      tests=str(summary["total"]), failures=str(summary["fail"]), errors="0",
                      skipped=str(summary["skip"]), time=f"{summary['seconds']:.3f}")
    by_group: dict[str, list[dict[str, Any]]] = {}
    for record in report["cases"]:
        by_group.setdefault(record["group"], []).append(record)
    for group in report["groups"]:
        suite = ET.SubElement(root, "testsuite", name=group["group"], tests=str(group["total"]),
                              failures=str(group["fail"]), errors="0", skipped=str(group["skip"]),
                              time=f"{group['seconds']:.3f}", timestamp=str(header.get("start_time", "")),
                              hostname=str(header.get("host", {}).get("name", "")))
        props = ET.SubElement(suite, "properties")
        for key in ("device", "device_name", "core_version", "backend", "backend_version", "abi_version",
                    "driver_version", "runtime_version", "suite_version", "level", "seed"):
            value = header.get(key)
            ET.SubElement(props, "property", name=key, value=_xml_text("" if value is None else str(value)))
        for record in by_group[group["group"]]:
            case = ET.SubElement(suite, "testcase", classname=record["group"], name=record["id"],
                                 time=f"{record['seconds']:.3f}")
            if record["status"] == "fail":
                text = record["details"]
                if record["metrics"]:
                    text = f"metrics: {json.dumps(record['metrics'])}\n{text}"
                failure = ET.SubElement(case, "failure", message=_xml_text(record["reason"]),
                                        type=failure_kind(record))
                failure.text = _xml_text(text)
            elif record["status"] == "skip":
                ET.SubElement(case, "skipped", message=_xml_text(record["reason"]))
    ET.indent(root)
    return ET.ElementTree(root)


# ---------------------------------------------------------------------------------------------- files


def write_reports(report: dict[str, Any], directory: Path, write_html: Callable[[dict[str, Any], Path], None]) -> None:
    """report.json, junit.xml and report.html in ``directory`` (created if needed)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.json").write_text(json.dumps(report, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    junit_tree(report).write(directory / "junit.xml", encoding="utf-8", xml_declaration=True)
    write_html(report, directory / "report.html")


# ---------------------------------------------------------------------------------------------- terminal


def _first_line(text: str, limit: int = 240) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def worst_line(record: dict[str, Any]) -> str:
    """The inputs, got and expected at a failed precision case's worst index (metrics["worst"]), or ""."""
    from .metrics import describe_worst

    worst = (record.get("metrics") or {}).get("worst")
    return describe_worst(worst) if isinstance(worst, dict) and "index" in worst else ""


def format_seconds(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds < 100 or not math.isfinite(seconds) else f"{seconds:.0f}"


def coverage_line(coverage: dict[str, Any] | None) -> str:
    """One line on what the device lacks: the length of each list the coverage result holds."""
    if not coverage or not coverage.get("available"):
        return (coverage or {}).get("reason") or "coverage unavailable"
    result = coverage.get("result")
    if isinstance(result, dict):
        counts = [f"{len(v)} {k.replace('_', ' ')}" for k, v in result.items() if isinstance(v, list)]
        if counts:
            return "coverage: " + ", ".join(counts) + " (see report.html)"
    return "coverage: see report.html"


def print_summary(report: dict[str, Any], directory: Path) -> None:
    """The terminal summary: a table per group, the failures with their reasons, the baseline changes."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=160)
    header, summary = report["header"], report["summary"]
    console.print(f"chipdock conformance on [bold]{header.get('device')}[/] ({header.get('device_name')}), "
                  f"backend {header.get('backend')} {header.get('backend_version')}, core {header.get('core_version')}"
                  f", --suite {header.get('level')}, seed {header.get('seed')}")
    table = Table(title="groups", title_justify="left")
    for col, justify in (("group", "left"), ("pass", "right"), ("fail", "right"), ("skip", "right"),
                         ("seconds", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for g in report["groups"]:
        fail = f"[red]{g['fail']}[/]" if g["fail"] else "0"
        table.add_row(escape(g["group"]), str(g["pass"]), fail, str(g["skip"]), format_seconds(g["seconds"]))
    table.add_row("[bold]total[/]", str(summary["pass"]), str(summary["fail"]), str(summary["skip"]),
                  format_seconds(header.get("duration_s", summary["seconds"])), end_section=True)
    console.print(table)
    failures = [r for r in report["cases"] if r["status"] == "fail"]
    if failures:
        console.print(f"[bold red]{len(failures)} failed:[/]")
        for r in failures[:FAILURES_SHOWN]:
            shown = _first_line(r["reason"])
            console.print(f"  [red]FAIL[/] {escape(r['id'])}: {escape(shown)}", soft_wrap=True)
            worst = worst_line(r)
            if worst and worst not in shown:  # cut off with a long reason: the values still get a line
                console.print(f"       {escape(worst)}", soft_wrap=True)
        if len(failures) > FAILURES_SHOWN:
            console.print(f"  ... and {len(failures) - FAILURES_SHOWN} more (see the report)")
    console.print(escape(coverage_line(report.get("coverage"))), soft_wrap=True)
    baseline = report.get("baseline")
    if baseline:
        console.print(f"against {escape(baseline['path'])}: {len(baseline['fixed'])} fixed, "
                      f"{len(baseline['regressed'])} regressed, {len(baseline['changed'])} changed")
        for kind, color in (("regressed", "red"), ("fixed", "green"), ("changed", "yellow")):
            for e in baseline[kind][:FAILURES_SHOWN]:
                console.print(f"  [{color}]{kind}[/] {escape(e['id'])}: {escape(_first_line(e['change']))}",
                              soft_wrap=True)
    verdict = "[bold red]FAILED[/]" if summary["fail"] else "[bold green]PASSED[/]"
    interrupted = header.get("interrupted")
    if interrupted:
        verdict = (f"[bold yellow]INTERRUPTED[/] by {escape(str(interrupted['signal']))} "
                   f"({interrupted['not_run']} cases not run)")
    console.print(f"{verdict}: {summary['pass']} passed, {summary['fail']} failed, {summary['skip']} skipped "
                  f"in {format_seconds(header.get('duration_s', 0.0))} s. Reports: "
                  f"{directory / 'report.json'}, {directory / 'junit.xml'}, {directory / 'report.html'}",
                  soft_wrap=True)
