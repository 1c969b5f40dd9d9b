"""The ``chipdock`` command line."""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table


def _console() -> Console:
    # Logs and pipes get a wide table instead of one wrapped to 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=160)


ENV_VARS = ("CHIPDOCK_PLUGIN_PATH", "CHIPDOCK_CPU_STRICT", "CHIPDOCK_CPU_DEVICES", "CHIPDOCK_CPU_MEMORY_LIMIT")


def _backend_table(backends: list[dict[str, Any]]) -> Table:
    table = Table(title="backends", title_justify="left")
    for col in ("backend", "version", "ABI", "status", "devices / reason"):
        table.add_column(col)
    for b in backends:
        if b["status"] == "accepted":
            status = "[green]accepted[/]"
            detail = str(b["device_count"]) + (f" ({b['device_error']})" if b["device_error"] else "")
        else:
            status, detail = "[red]refused[/]", b["reason"]
        table.add_row(b["name"], b["version"] or "-", b["abi_version"] or "-", status, detail)
    return table


def _device_table(devices: list[dict[str, Any]]) -> Table:
    table = Table(title="device smoke test", title_justify="left")
    for col in ("device", "name", "step", "result", "ms"):
        table.add_column(col)
    for d in devices:
        for i, step in enumerate(d["steps"]):
            mark = "[green]ok[/]" if step["ok"] else "[red]FAIL[/]"
            table.add_row(d["device"] if i == 0 else "", d["name"] if i == 0 else "", step["name"],
                          f"{mark} {step['detail']}", f"{step['milliseconds']:.1f}")
    return table


@click.group()
@click.version_option(package_name="chipdock")
def main() -> None:
    """chipdock: hardware plug-in SDK."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def check(as_json: bool) -> None:
    """List every backend and smoke-test every device; non-zero exit on failure."""
    from ._check import run_check

    report = run_check()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        console = _console()
        console.print(f"chipdock {report['core_version']} (device ABI {report['abi_version']})")
        console.print(_backend_table(report["backends"]))
        console.print(_device_table(report["devices"]))
        if not report["devices"]:
            console.print("[red]no devices found[/]")
        console.print("[green]all devices passed[/]" if report["ok"] else "[red]check FAILED[/]")
    sys.exit(0 if report["ok"] else 1)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def doctor(as_json: bool) -> None:
    """Explain the installation: versions, plugins, why each was accepted or refused."""
    import chipdock

    info: dict[str, Any] = {
        "core_version": chipdock.__version__,
        "abi_version": "{}.{}".format(*chipdock.ABI_VERSION),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cmake_dir": chipdock.cmake_dir(),
        "environment": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "backends": [b.as_dict() for b in chipdock.backends()],
        "devices": [{"device": str(d), **d.properties()} for d in chipdock.devices()],
        "plugin_log": [{"level": lvl, "message": msg} for lvl, msg in chipdock._C.plugin_log()],
    }
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    console = _console()
    for key in ("core_version", "abi_version", "python", "platform", "cmake_dir"):
        console.print(f"[bold]{key}[/]: {info[key]}")
    console.print(f"[bold]environment[/]: {info['environment'] or '(none of ' + ', '.join(ENV_VARS) + ')'}")
    for b in info["backends"]:
        verdict = "[green]accepted[/]" if b["status"] == "accepted" else f"[red]refused[/]: {b['reason']}"
        console.print(f"\n[bold]{b['name']}[/] {b['version']} (ABI {b['abi_version'] or '?'}) {verdict}")
        console.print(f"  source: {b['source']}\n  manifest: {b['manifest_path']}\n  library: {b['library_path']}")
        if b["status"] == "accepted":
            console.print(f"  devices: {b['device_count']} {b['device_error']}  kernels: {b['kernel_count']}")
    for d in info["devices"]:
        console.print(f"\n[bold]{d['device']}[/]: {d['name']} ({d['vendor']}, {d['architecture']}), "
                      f"{d['total_memory'] >> 20} MiB, {d['compute_units']} compute units, "
                      f"runtime {d['runtime_version'] or '-'}, driver {d['driver_version'] or '-'}")
    for entry in info["plugin_log"]:
        console.print(f"log[{entry['level']}]: {entry['message']}")


@main.group()
def bench() -> None:
    """Benchmarks beside PyTorch and NumPy (ratios: higher is better)."""


@bench.command("ops")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the results as JSON here.")
@click.option("--quick", is_flag=True, help="Small sizes, few repeats (a smoke run).")
@click.option("--runs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run everything this many times and report each case's median (noisy machines).")
def bench_ops(json_path: str | None, quick: bool, runs: int) -> None:
    """Op speed: dispatch overhead, elementwise GB/s, matmul/conv GFLOP/s, softmax/layer_norm."""
    from ._bench_ops import format_table, run, write_json

    report = run(quick=quick, runs=runs)
    click.echo(format_table(report))
    if json_path:
        write_json(report, json_path)
        click.echo(f"wrote {json_path}")


@main.command()
@click.option("--device", required=True, metavar="TYPE[:ORDINAL]", help="The device under test (ordinal 0 by default).")
@click.option("--suite", "level", type=click.Choice(["quick", "full"]), default="quick", show_default=True,
              help="quick: the cases marked quick; full: every case.")
@click.option("--only", multiple=True, metavar="PATTERN",
              help="Run only cases whose id, group or suite matches (fnmatch; repeatable).")
@click.option("--except", "exclude", multiple=True, metavar="PATTERN",
              help="Leave out cases whose id, group or suite matches (fnmatch; repeatable).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False), default="conformance-report", metavar="DIR",
              show_default=True, help="Folder for report.json, junit.xml and report.html.")
@click.option("--baseline", type=click.Path(dir_okay=False), metavar="OLD/report.json",
              help="An earlier report.json: list the fixed, regressed and changed cases.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help="Seconds a case may run before it counts as hung and its worker is killed.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs.")
@click.option("--jobs", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes running side by side (timing-sensitive cases prefer 1).")
@click.option("--isolation", type=click.Choice(["suite", "group", "case"]), default="suite", show_default=True,
              help="A fresh worker process per suite, per group or per case (a crash always costs only its case).")
@click.option("--json", "as_json", is_flag=True, help="Print report.json instead of the summary.")
def conformance(device: str, level: str, only: tuple[str, ...], exclude: tuple[str, ...], report_dir: str,
                baseline: str | None, timeout: float, seed: int, jobs: int, isolation: str, as_json: bool) -> None:
    """Run the conformance and precision suites on a device; exit status 0 only if no case failed.

    Every case runs in a child process: a crash or a hang fails that case and the run goes on.
    """
    from pathlib import Path
    from shlex import join

    from chipdock_conformance.runner import RunError, RunOptions, UsageError
    from chipdock_conformance.runner import main as run_main

    opts = RunOptions(device=device, level=level, only=only, exclude=exclude,  # type: ignore[arg-type]
                      report_dir=Path(report_dir), baseline=Path(baseline) if baseline else None,
                      timeout=timeout, seed=seed, jobs=jobs, isolation=isolation,  # type: ignore[arg-type]
                      command=join(["chipdock", *sys.argv[1:]]))
    try:
        code = run_main(opts, as_json=as_json)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    except RunError as exc:
        click.echo(f"chipdock conformance: {exc}", err=True)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
