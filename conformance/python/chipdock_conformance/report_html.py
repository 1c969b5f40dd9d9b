"""report.html: one standalone page (inline CSS and SVG, no script, nothing fetched).

Sections: the verdict and header, counts per group, the failures with their details, the changes against a
baseline, the coverage table, per-op error plots drawn from the precision metrics, and every case.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

# Metrics plotted per op, in order of preference, and the keys of a case's ``tolerance`` dict that give the
# bound for each (the precision suite states its tolerance in the unit of the error it checks).
PLOT_METRICS = ("max_ulp", "max_abs", "max_rel")
BOUND_KEYS = {
    "max_ulp": ("ulp", "max_ulp", "ulps"),
    "max_abs": ("atol", "abs", "max_abs"),
    "max_rel": ("rtol", "rel", "max_rel"),
}
SUMMARY_METRICS = ("max_abs", "max_rel", "max_ulp", "mismatches")
STATUS_COLORS = {"pass": "#1a7f37", "fail": "#cf222e", "skip": "#8c959f"}

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #1f2328; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #d0d7de; padding: 2px 8px;
  text-align: left; vertical-align: top; } th { background: #f6f8fa; } td.n { text-align: right; }
.pass { color: #1a7f37; } .fail { color: #cf222e; font-weight: bold; } .skip { color: #8c959f; }
.verdict { font-size: 1.2em; padding: .5em 1em; border-radius: 6px; display: inline-block; }
.verdict.pass { background: #dafbe1; } .verdict.fail { background: #ffebe9; }
pre { background: #f6f8fa; padding: .5em; overflow-x: auto; font-size: 12px; max-height: 30em; }
figure { display: inline-block; margin: .5em 1em .5em 0; } figcaption { font-size: 12px; color: #57606a; }
code { font-size: 12px; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _table(headers: list[str], rows: list[list[str]]) -> str:
    """A table from already-escaped cells."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _td(value: Any, cls: str = "") -> str:
    return f'<td class="{cls}">{_e(value)}</td>' if cls else f"<td>{_e(value)}</td>"


def _header_rows(header: dict[str, Any], prefix: str = "") -> list[list[str]]:
    rows = []
    for key, value in header.items():
        if isinstance(value, dict):
            rows += _header_rows(value, f"{prefix}{key}.")
        else:
            rows.append([_td(prefix + key), _td("-" if value is None else value)])
    return rows


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# ---------------------------------------------------------------------------------------------- plots


def _value(metric: Any) -> float | None:
    """A metric as a float: inf for "inf" and "nan" (plotted at the top), None when absent or not a number."""
    if isinstance(metric, bool):
        return None
    if isinstance(metric, (int, float)):
        return float(metric) if not math.isnan(metric) else math.inf
    if metric in ("inf", "-inf", "nan"):
        return math.inf
    return None


def _bound(tolerance: Any, metric: str) -> float | None:
    if not isinstance(tolerance, dict):
        return None
    if tolerance.get("class") == "exact":  # the precision suite's exact class: no error at all
        return 0.0
    for key in BOUND_KEYS[metric]:
        value = _value(tolerance.get(key))
        if value is not None and math.isfinite(value):
            return value
    return None


def plot_metric(records: list[dict[str, Any]]) -> str | None:
    """The metric to plot for one op's cases: the first of PLOT_METRICS that some case recorded."""
    for metric in PLOT_METRICS:
        if any(_value(r["metrics"].get(metric)) is not None for r in records):
            return metric
    return None


def error_plot(op: str, records: list[dict[str, Any]]) -> str:
    """An inline SVG: one point per case (grouped by dtype, colored by status) on a log scale, with a dash at
    each case's tolerance. Zeros sit on the bottom line, inf and NaN on the top one. Hover a point for its id."""
    metric = plot_metric(records)
    if metric is None:
        return ""
    points = [(r, _value(r["metrics"].get(metric)), _bound(r["metrics"].get("tolerance"), metric)) for r in records]
    points = [p for p in points if p[1] is not None]
    points.sort(key=lambda p: str(p[0]["dtype"]))  # stable: keeps the suite's order within a dtype
    finite = [v for _, v, _ in points if v and math.isfinite(v)] + [b for _, _, b in points if b]
    # Half a decade of room below the smallest value keeps it off the "0" line.
    lo = math.floor(math.log10(min(finite)) - 0.5) if finite else 0
    hi = math.ceil(math.log10(max(finite)) + 0.1) if finite else 1
    hi = max(hi, lo + 1)
    width, height, left, right, top, bottom = 720, 230, 58, 10, 22, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    zero_y, inf_y = top + plot_h + 8, top - 8

    def y_of(v: float) -> float:
        if v <= 0:
            return zero_y
        if not math.isfinite(v):
            return inf_y
        return top + plot_h * (1 - (math.log10(v) - lo) / (hi - lo))

    step = plot_w / max(len(points), 1)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 16}" '
             f'viewBox="0 -16 {width} {height + 16}" role="img" aria-label="{_e(op)} {metric}">',
             f'<text x="{left}" y="-3" font-size="12" font-weight="bold">{_e(op)}: {metric} per case</text>',
             f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fbfcfd" stroke="#d0d7de"/>']
    for k in range(lo, hi + 1):
        y = y_of(10.0 ** k)
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eaeef2"/>'
                     f'<text x="{left - 4}" y="{y + 4:.1f}" font-size="10" text-anchor="end">1e{k}</text>')
    parts.append(f'<text x="{left - 4}" y="{zero_y + 4}" font-size="10" text-anchor="end">0</text>'
                 f'<text x="{left - 4}" y="{inf_y + 4}" font-size="10" text-anchor="end">inf/nan</text>')
    dtype_start = 0
    for i, (record, value, bound) in enumerate(points):
        x = left + step * (i + 0.5)
        if bound is not None:
            y = y_of(bound)
            parts.append(f'<line x1="{x - step / 2:.1f}" x2="{x + step / 2:.1f}" y1="{y:.1f}" y2="{y:.1f}" '
                         f'stroke="#bf8700" stroke-width="2"/>')
        source = record["metrics"].get("tolerance_source", "")
        tip = f"{record['id']}: {metric} = {record['metrics'].get(metric)}" + (
            f"; tolerance {bound:g} ({source})" if bound is not None else "")
        parts.append(f'<circle cx="{x:.1f}" cy="{y_of(value):.1f}" r="3.5" fill="{STATUS_COLORS[record["status"]]}">'
                     f"<title>{_e(tip)}</title></circle>")
        last_of_dtype = i + 1 == len(points) or points[i + 1][0]["dtype"] != record["dtype"]
        if last_of_dtype:
            mid = left + step * (dtype_start + i + 1) / 2
            parts.append(f'<text x="{mid:.1f}" y="{top + plot_h + 30}" font-size="11" text-anchor="middle">'
                         f'{_e(record["dtype"])}</text>')
            if i + 1 < len(points):
                sep = left + step * (i + 1)
                parts.append(f'<line x1="{sep:.1f}" x2="{sep:.1f}" y1="{top}" y2="{top + plot_h}" '
                             f'stroke="#8c959f" stroke-dasharray="3,3"/>')
            dtype_start = i + 1
    parts.append("</svg>")
    return "".join(parts)


def plots_section(records: list[dict[str, Any]]) -> str:
    by_op: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("op") and r["status"] != "skip":
            by_op.setdefault(r["op"], []).append(r)
    figures = []
    for op in sorted(by_op):
        svg = error_plot(op, by_op[op])
        if svg:
            figures.append(f"<figure>{svg}<figcaption>{len(by_op[op])} cases of {_e(op)}; "
                           "points: pass green, fail red; dashes: the tolerance</figcaption></figure>")
    if not figures:
        return "<p>No case recorded error metrics.</p>"
    return "\n".join(figures)


# ---------------------------------------------------------------------------------------------- sections


def _generic(value: Any) -> str:
    """Any JSON value as HTML: a list of objects as a table, a list as a list, an object as sections."""
    if isinstance(value, dict):  # scalars in one key/value table, then each list or object under its key
        scalars = [[_td(k), _td(_plain(v))] for k, v in value.items() if not isinstance(v, (list, dict))]
        nested = "".join(f"<h3>{_e(k)}</h3>{_generic(v)}" for k, v in value.items() if isinstance(v, (list, dict)))
        return (_table(["field", "value"], scalars) if scalars else "") + nested
    if isinstance(value, list):
        if not value:
            return "<p>none</p>"
        if all(isinstance(v, dict) for v in value):
            keys = list(dict.fromkeys(k for v in value for k in v))
            return _table(keys, [[_td(_plain(v.get(k, ""))) for k in keys] for v in value])
        if all(isinstance(v, list) for v in value):
            return _table([], [[_td(_plain(x)) for x in v] for v in value])
        return "<ul>" + "".join(f"<li>{_e(_plain(v))}</li>" for v in value) + "</ul>"
    return f"<p>{_e(value)}</p>"


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def coverage_section(coverage: dict[str, Any] | None) -> str:
    if not coverage or not coverage.get("available"):
        reason = (coverage or {}).get("reason") or "coverage unavailable"
        return f"<p>{_e(reason)}</p>"
    return _generic(coverage.get("result"))


def failures_section(records: list[dict[str, Any]]) -> str:
    failures = [r for r in records if r["status"] == "fail"]
    if not failures:
        return "<p>No failures.</p>"
    rows = []
    for r in failures:
        details = r["details"]
        if r["metrics"]:
            details = f"metrics: {json.dumps(r['metrics'])}\n{details}"
        more = f"<details><summary>details</summary><pre>{_e(details)}</pre></details>" if details.strip() else ""
        rows.append([_td(r["id"]), f"<td>{_e(r['reason'])}{worst_table(r['metrics'].get('worst'))}{more}</td>"])
    return _table(["case", "reason"], rows)


def worst_table(worst: Any) -> str:
    """A failed precision case's worst element: each input there, the value got and the value expected, with
    their bit patterns (floats), as a small table; "" when the case has none."""
    if not isinstance(worst, dict) or "index" not in worst:
        return ""
    rows = []
    for i in worst.get("inputs", []):
        value = i.get("value", f"shape {tuple(i.get('shape', []))}")
        rows.append([_td(f"input {i.get('name')}"), _td(i.get("dtype", "")), _td(value), _td(i.get("bits", ""))])
    for label in ("got", "expected"):
        v = worst.get(label) or {}
        rows.append([_td(label), _td(""), _td(v.get("value", "")), _td(v.get("bits", ""))])
    if "oracle" in worst:
        rows.append([_td("exact (float64)"), _td(""), _td(worst["oracle"]), _td("")])
    return (f"<p>output {_e(worst.get('output'))} at {_e(worst['index'])}:</p>"
            + _table(["", "dtype", "value", "bits"], rows))


def baseline_section(baseline: dict[str, Any] | None) -> str:
    if not baseline:
        return ""
    parts = [f"<h2>Against the baseline</h2><p><code>{_e(baseline['path'])}</code>: "
             f"{_e(json.dumps(baseline.get('header', {})))}</p>"]
    for kind in ("regressed", "fixed", "changed"):
        entries = baseline[kind]
        parts.append(f"<h3>{kind} ({len(entries)})</h3>")
        if entries:
            parts.append(_table(["case", "before", "after", "change"],
                                [[_td(e["id"]), _td(e["before"] or "-"), _td(e["after"] or "-"), _td(e["change"])]
                                 for e in entries]))
    return "".join(parts)


def render(report: dict[str, Any]) -> str:
    """The whole page."""
    header, summary, records = report["header"], report["summary"], report["cases"]
    verdict = "fail" if summary["fail"] else "pass"
    title = f"chipdock conformance: {header.get('device')} ({header.get('device_name')})"
    group_rows = [[_td(g["group"]), _td(g["pass"], "n"), _td(g["fail"], "n fail" if g["fail"] else "n"),
                   _td(g["skip"], "n"), _td(f"{g['seconds']:.2f}", "n")] for g in report["groups"]]
    case_rows = [[_td(r["id"]), _td(r["status"], r["status"]), _td(_first_line(r["reason"])),
                  *[_td(_plain(r["metrics"].get(m, ""))) for m in SUMMARY_METRICS], _td(f"{r['seconds']:.3f}", "n")]
                 for r in records]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{_e(title)}</title>",
        f"<style>{CSS}</style></head><body>", f"<h1>{_e(title)}</h1>",
        f'<p class="verdict {verdict}">{"FAILED" if summary["fail"] else "PASSED"}: {summary["pass"]} passed, '
        f'{summary["fail"]} failed, {summary["skip"]} skipped of {summary["total"]} '
        f'in {header.get("duration_s", summary["seconds"])} s</p>',
        "<h2>Header</h2>", _table(["field", "value"], _header_rows(header)),
        "<h2>Groups</h2>", _table(["group", "pass", "fail", "skip", "seconds"], group_rows),
        "<h2>Failures</h2>", failures_section(records),
        baseline_section(report.get("baseline")),
        "<h2>Coverage</h2>", "<p>Ops and dtypes of the reference that this device lacks.</p>",
        coverage_section(report.get("coverage")),
        "<h2>Error plots</h2>", plots_section(records),
        f"<h2>All cases ({len(records)})</h2><details><summary>show</summary>",
        _table(["case", "status", "reason", *SUMMARY_METRICS, "seconds"], case_rows), "</details>",
        "</body></html>",
    ])


def write_html(report: dict[str, Any], path: Path) -> None:
    path.write_text(render(report), encoding="utf-8")
