"""The ``chipdock`` command line."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _console() -> Console:
    # Logs and pipes get a wide table instead of one wrapped to 80 columns. No emoji codes: a backend's
    # string ":warning:" stays text.
    return Console(emoji=False) if sys.stdout.isatty() else Console(width=160, emoji=False)


# C0, DEL and C1 (0x9b is a one-byte CSI on some terminals).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _plain(value: Any) -> str:
    """`value` as inert terminal text, for every string a backend, a manifest or the system supplies.

    Control characters become visible escapes (``\\x1b``, ``\\n``) instead of reaching the terminal, and
    rich markup (``[bold]``) is escaped, as report.html escapes the same strings for HTML.
    """
    return escape(_CONTROL.sub(lambda m: ascii(m.group())[1:-1], str(value)))


ENV_VARS = ("CHIPDOCK_PLUGIN_PATH", "CHIPDOCK_CPU_STRICT", "CHIPDOCK_CPU_DEVICES", "CHIPDOCK_CPU_MEMORY_LIMIT",
            "CHIPDOCK_CPU_ISA", "CHIPDOCK_CPU_HIDE_FEATURES", "CHIPDOCK_CPU_BF16", "CHIPDOCK_CPU_GEMM",
            "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
            # The npu backend: which Ascend runtime it opens (backends/npu/README.md), the test double's knobs.
            "CHIPDOCK_NPU_RUNTIME", "CHIPDOCK_NPU_OPAPI_LIBRARY", "CHIPDOCK_NPU_CALLBACKS", "ASCEND_HOME_PATH",
            "CHIPDOCK_NPU_SIM_DEVICES", "CHIPDOCK_NPU_SIM_MEMORY", "CHIPDOCK_NPU_SIM_CANN_VERSION",
            "CHIPDOCK_NPU_SIM_SOC", "CHIPDOCK_NPU_SIM_FAIL_OP")


def _backend_table(backends: list[dict[str, Any]]) -> Table:
    table = Table(title="backends", title_justify="left")
    for col in ("backend", "version", "ABI", "status", "devices / reason"):
        table.add_column(col)
    for b in backends:
        if b["status"] == "accepted":
            status = "[green]accepted[/]"
            detail = str(b["device_count"]) + (f" ({_plain(b['device_error'])})" if b["device_error"] else "")
            if b.get("runtime"):
                detail += f" on {_plain(b['runtime'])}"
        else:
            status, detail = "[red]refused[/]", _plain(b["reason"])
        table.add_row(_plain(b["name"]), _plain(b["version"] or "-"), _plain(b["abi_version"] or "-"), status, detail)
    return table


def _device_table(devices: list[dict[str, Any]]) -> Table:
    table = Table(title="device smoke test", title_justify="left")
    for col in ("device", "name", "step", "result", "ms"):
        table.add_column(col)
    for d in devices:
        for i, step in enumerate(d["steps"]):
            mark = "[green]ok[/]" if step["ok"] else "[red]FAIL[/]"
            table.add_row(_plain(d["device"]) if i == 0 else "", _plain(d["name"]) if i == 0 else "", step["name"],
                          f"{mark} {_plain(step['detail'])}", f"{step['milliseconds']:.1f}")
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
        for message in report["warnings"]:
            console.print(f"[yellow]warning[/]: {_plain(message)}")
        if not report["devices"]:
            console.print("[red]no devices found[/]")
        console.print("[green]all devices passed[/]" if report["ok"] else "[red]check FAILED[/]")
    sys.exit(0 if report["ok"] else 1)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="Seconds each plugin's probe (a child process loading just that plugin) may take before the "
                   "plugin counts as hung and the probe is killed.")
def doctor(as_json: bool, timeout: float) -> None:
    """Explain the installation: versions, plugins, why each was accepted or refused.

    Every plugin is first loaded alone in a child process, so one that crashes or hangs while loading is named
    (and never loaded here) while the others are still reported.
    """
    from ._doctor import collect

    info = collect(timeout)
    from ._compat import matrix_report

    info["compatibility_matrix"] = matrix_report(info["backends"])
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    console = _console()
    _print_doctor(info, console)


def _print_doctor(info: dict[str, Any], console: Console) -> None:
    """The text form of ``chipdock doctor``: installation, backends, device types, devices, log, problems."""
    for key in ("core_version", "abi_version", "opset_version", "python", "platform", "cmake_dir"):
        console.print(f"[bold]{key}[/]: {_plain(info[key])}")
    environment = _plain(info["environment"]) if info["environment"] else "(none of " + ", ".join(ENV_VARS) + ")"
    console.print(f"[bold]environment[/]: {environment}")
    for b in info["backends"]:
        p = {k: _plain(v) for k, v in b.items() if isinstance(v, str)}
        verdict = "[green]accepted[/]" if b["status"] == "accepted" else f"[red]refused[/]: {p['reason']}"
        if p["runtime"]:
            verdict += f" on {p['runtime']}"
        console.print(f"\n[bold]{p['name']}[/] {p['version']} (ABI {p['abi_version'] or '?'}) {verdict}")
        console.print(f"  source: {p['source']}\n  manifest: {p['manifest_path']}\n  library: {p['library_path']}")
        probe = b["probe"]
        mark = "[red]" + probe["outcome"] + "[/]" if probe["outcome"] in ("crashed", "hung", "failed") \
            else probe["outcome"]
        console.print(f"  probe (child process): {mark}" + (f" in {probe['seconds']:.2f} s" if "seconds" in probe
                                                             else "") + (f": {_plain(probe['detail'])}"
                                                                         if probe.get("detail") else ""))
        if probe.get("stderr_tail") and probe["outcome"] != "loaded":
            console.print("  probe stderr: " + _plain(probe["stderr_tail"].splitlines()[-1]))
        if b.get("device_type"):
            built = {k: _plain(v) for k, v in b["built_against"].items()}
            console.print(f"  built against: core {built['core']}, ABI {built['abi']}, opset {built['opset']} "
                          f"(installed: {built['installed']})")
            for what, check in b["runtime_check"].items():
                if check["verdict"] == "nothing declared":
                    console.print(f"  {what}: none declared; machine: {_plain(check['found'] or '-')}")
                    continue
                verdict = "no devices" if check["verdict"].startswith("no devices") else check["verdict"]
                console.print(f"  {what}: declares {_plain(check['declared'])}; machine: "
                              f"{_plain(check['found'] or '-')} ({_plain(verdict)})")
        for name, what in b.get("environment", {}).items():
            console.print(f"  environment default (manifest): {_plain(name)} {_plain(what)}")
        if b["status"] == "accepted":
            console.print(f"  devices: {b['device_count']} {p['device_error']}  kernels: {b['kernel_count']}")
        for warning in b.get("warnings", []):
            console.print(f"  [yellow]warning[/]: {_plain(warning)}")
    for claim in info["device_type_claims"]:
        console.print(f"\n[bold]device type {_plain(claim['device_type'])}[/]: {_plain(claim['explanation'])}")
    for d in info["devices"]:
        p = {k: _plain(v) for k, v in d.items() if isinstance(v, str)}
        console.print(f"\n[bold]{p['device']}[/]: {p['name']} ({p['vendor']}, {p['architecture']}), "
                      f"{d['total_memory'] >> 20} MiB, {d['compute_units']} compute units, "
                      f"runtime {p['runtime_version'] or '-'}, driver {p['driver_version'] or '-'}")
    for entry in info["plugin_log"]:
        console.print(f"log[{entry['level']}]: {_plain(entry['message'])}")
    console.print("")
    if info["problems"]:
        console.print(f"[bold]problems[/] ({len(info['problems'])}):")
        for problem in info["problems"]:
            console.print(f"  - {_plain(problem)}")
    else:
        console.print("[bold]problems[/]: none")
    from ._compat import matrix_report_lines

    for line in matrix_report_lines(info["compatibility_matrix"]):
        console.print(_plain(line))


@main.command()
@click.option("--vendor", required=True, type=click.Choice(["cpu", "cuda", "npu", "xpu", "dcu"]),
              help="The compatibility matrix row to write the image of.")
@click.option("--output", "-o", type=click.Path(file_okay=False), metavar="DIR",
              help="The build context to write (default: ./chipdock-image-VENDOR); must be empty or new.")
@click.option("--force", is_flag=True, help="Rewrite the generated files of a non-empty DIR (other files are kept).")
@click.option("--manifest", type=click.Path(exists=True), metavar="FILE|DIR",
              help="Check the row against this manifest (.chipdock.json, or a backend's source folder) instead of "
                   "the installed backend's.")
def image(vendor: str, output: str | None, force: bool, manifest: str | None) -> None:
    """Write a Dockerfile (with README.md) for VENDOR's image from the compatibility matrix."""
    from ._image import ImageError, write_image

    try:
        result = write_image(vendor, output, force=force, manifest=manifest)
    except ImageError as exc:
        _fail("image", exc)
        return
    click.echo(f"wrote {', '.join(result.files)} into {result.output} (row {vendor}; checked against "
               f"{result.check.source})")
    click.echo(f"next: fill {result.output}/wheels/ as its README.md says, then "
               f"DOCKER_BUILDKIT=1 docker build -t {result.tag} {result.output}")


@main.command("new-backend")
@click.argument("name")
@click.option("--device-type", metavar="TYPE",
              help="The device type it provides (device strings TYPE:0); default NAME.")
@click.option("--output", metavar="DIR", type=click.Path(),
              help="The folder to write, new or empty (default ./NAME).")
def new_backend(name: str, device_type: str | None, output: str | None) -> None:
    """Write the scaffold of an out-of-tree backend NAME that builds and passes the runtime conformance groups.

    A host-memory device with a worker thread per stream, events, callbacks, the copy kernel and a float32 add
    over strided/broadcast operands, on the backend kit of this chipdock (CMake, support library, unsupported
    list, pyproject with the entry point, README, test). NAME: an identifier such as mydev."""
    from ._scaffold import new_backend as write
    from .errors import InvalidArgumentError

    try:
        folder = write(name, device_type, output)
    except InvalidArgumentError as exc:
        _fail("new-backend", exc)
    console = _console()
    console.print(f"wrote the {_plain(name)} backend to {_plain(folder)}")
    console.print(f"next: cd {_plain(folder)} && pip install --no-build-isolation . && "
                  f"chipdock conformance --device {_plain(device_type or name)} --suite quick --only runtime "
                  "(README.md has the build without a wheel)")


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
@click.option("--mutation-score", is_flag=True,
              help="Instead of judging the device, plant bugs in it (the mutation proxy) and report how many the "
                   "selected cases catch: mutation.json in --report (docs/conformance.md, \"Mutation score\").")
@click.option("--kill-matrix", is_flag=True,
              help="With --mutation-score: run every case on every mutant and record which cases kill which.")
@click.option("--select-quick", type=click.Path(dir_okay=False), metavar="OUT.json",
              help="With --mutation-score --suite full: write the fewest case variants that kill every mutant the "
                   "full suite kills (implies --kill-matrix).")
@click.option("--mutants", "mutant_patterns", multiple=True, metavar="PATTERN",
              help="With --mutation-score: only the mutants whose id, group or operator matches (fnmatch; "
                   "repeatable).")
@click.option("--dump", "dump_case", nargs=2, type=(str, click.Path(file_okay=False)), metavar="CASE_ID DIR",
              help="Instead of a run: run the op case CASE_ID once (with --seed) and write its inputs, expected and "
                   "actual outputs (.npz), case.json and replay.py, which replays it through chipdock.ops, to DIR.")
def conformance(device: str, level: str, only: tuple[str, ...], exclude: tuple[str, ...], report_dir: str,
                baseline: str | None, timeout: float, seed: int, jobs: int, isolation: str, as_json: bool,
                mutation_score: bool, kill_matrix: bool, select_quick: str | None,
                mutant_patterns: tuple[str, ...], dump_case: tuple[str, str] | None) -> None:
    """Run the conformance and precision suites on a device; exit status 0 only if no case failed.

    Every case runs in a child process: a crash or a hang fails that case and the run goes on.
    Exit status: 0 passed, 1 a case failed, 2 bad usage, 130 (Ctrl-C) or 143 (SIGTERM) when stopped, after
    writing the report of the cases that finished. With --mutation-score: 0 when the run completed (the score
    is information), 1 when a selected case fails on the unmutated device.
    """
    from pathlib import Path
    from shlex import join

    from chipdock_conformance.runner import RunOptions
    from chipdock_conformance.runner import main as run_main

    if dump_case:
        _dump(device, dump_case[0], dump_case[1], seed, as_json)
    if mutation_score:
        if baseline:
            raise click.UsageError("--baseline compares conformance reports; it does not apply to --mutation-score")
        _mutation_score(device, level, only, exclude, report_dir, timeout, seed, jobs, as_json, kill_matrix,
                        select_quick, mutant_patterns)
    if kill_matrix or select_quick or mutant_patterns:
        raise click.UsageError("--kill-matrix, --select-quick and --mutants need --mutation-score")
    opts = RunOptions(device=device, level=level, only=only, exclude=exclude,  # type: ignore[arg-type]
                      report_dir=Path(report_dir), baseline=Path(baseline) if baseline else None,
                      timeout=timeout, seed=seed, jobs=jobs, isolation=isolation,  # type: ignore[arg-type]
                      command=join(["chipdock", *sys.argv[1:]]))
    _exit_with(lambda: run_main(opts, as_json=as_json), "chipdock conformance")


def _exit_with(run: Callable[[], int], command: str) -> None:
    """Exits with what ``run`` returns: a conformance UsageError is click's (status 2), a RunError (the run
    could not start) is printed with ``command`` and gives status 1."""
    from chipdock_conformance.runner import RunError, UsageError

    try:
        code = run()
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    except RunError as exc:
        click.echo(f"{command}: {exc}", err=True)
        code = 1
    sys.exit(code)


def _dump(device: str, case_id: str, directory: str, seed: int, as_json: bool) -> None:
    """``chipdock conformance --dump CASE_ID DIR``: chipdock_conformance.dump; exits 0 once written (the case's
    own verdict is printed, not the exit status), 1 when it cannot be dumped."""
    from pathlib import Path

    from chipdock_conformance.dump import FILES, DumpError, dump
    from chipdock_conformance.runner import UsageError, normalize_device

    from .errors import ChipdockError

    try:
        done = dump(normalize_device(device), case_id, Path(directory), seed)
    except UsageError as exc:
        raise click.UsageError(str(exc)) from None
    except (DumpError, ChipdockError, OSError) as exc:
        _fail("conformance", exc)
    if as_json:
        click.echo(json.dumps({"case_id": done.case_id, "status": done.status, "reason": done.reason,
                               "directory": str(done.directory), "files": list(FILES)}, indent=2))
    else:
        click.echo(f"{done.case_id}: {done.status}" + (f": {done.reason}" if done.reason else ""))
        click.echo(f"wrote {', '.join(FILES)} to {done.directory}; replay: python {done.directory / 'replay.py'}")
    sys.exit(0)


def _mutation_score(device: str, level: str, only: tuple[str, ...], exclude: tuple[str, ...], report_dir: str,
                    timeout: float, seed: int, jobs: int, as_json: bool, kill_matrix: bool, select_quick: str | None,
                    mutant_patterns: tuple[str, ...]) -> None:
    """``chipdock conformance --mutation-score``: chipdock_conformance.mutation; exits."""
    from pathlib import Path
    from shlex import join

    from chipdock_conformance.mutation import MutationOptions
    from chipdock_conformance.mutation import main as mutation_main

    opts = MutationOptions(device=device, level=level, only=only, exclude=exclude,  # type: ignore[arg-type]
                           mutants=mutant_patterns, report_dir=Path(report_dir), timeout=timeout, seed=seed,
                           jobs=jobs, kill_matrix=kill_matrix,
                           select_quick=Path(select_quick) if select_quick else None,
                           command=join(["chipdock", *sys.argv[1:]]))
    _exit_with(lambda: mutation_main(opts, as_json=as_json), "chipdock conformance --mutation-score")


# ------------------------------------------------------------------ models (chipdock.onnx)

_DEVICE_HELP = "The device to run on, TYPE[:ORDINAL] (see `chipdock doctor`)."


def _fail(command: str, exc: BaseException) -> None:
    """A clear one-line error on stderr and exit status 1 (bad input, a missing backend, an unsupported model)."""
    click.echo(f"chipdock {command}: {exc}", err=True)
    sys.exit(1)


def _model_errors() -> tuple[type[BaseException], ...]:
    from .errors import ChipdockError

    errors: list[type[BaseException]] = [ChipdockError, OSError]
    try:
        import onnx

        errors.append(onnx.checker.ValidationError)
        from google.protobuf.message import DecodeError

        errors.append(DecodeError)
    except ImportError:
        pass
    return tuple(errors)


def _model_options(fn: Any) -> Any:
    for option in reversed([
        click.argument("model", type=click.Path(exists=True, dir_okay=False)),
        click.option("--device", required=True, metavar="TYPE[:ORDINAL]", help=_DEVICE_HELP),
        click.option("--inputs", "inputs_path", type=click.Path(exists=True, dir_okay=False), metavar="FILE.npz",
                     help="Inputs by name (numpy.savez); otherwise generated from the declared dtypes and shapes."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the generated inputs."),
        click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE",
                     help="Size of a symbolic input dimension for generated inputs (repeatable; default 1)."),
        click.option("--json", "as_json", is_flag=True, help="Print the result as JSON."),
    ]):
        fn = option(fn)
    return fn


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _tensor_table(title: str, rows: list[Any]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in ("name", "shape", "dtype", "min", "max", "mean"):
        table.add_column(col, justify="right" if col in ("min", "max", "mean") else "left")
    for r in rows:
        stat = [("-" if v is None else f"{v:.6g}") for v in (r.min, r.max, r.mean)]
        table.add_row(r.name, str(tuple(r.shape)), r.dtype, *stat)
    return table


@main.command()
@_model_options
@click.option("--bench", "bench_runs", type=click.IntRange(min=1), metavar="N",
              help="Benchmark: cold start, then N timed runs after the warmup (latency percentiles, throughput, "
                   "peak device memory).")
@click.option("--warmup", type=click.IntRange(min=0), default=3, show_default=True, help="Untimed runs before --bench.")
@click.option("--profile", is_flag=True, help="With --bench: time every node as well and list the op types by time.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows of the --profile table.")
@click.option("--memory-limit", metavar="BYTES",
              help="Refuse, before it allocates, a model whose planned peak device memory exceeds BYTES (e.g. "
                   "1073741824, 512M, 2GiB; default: the device's memory, never more than it has free).")
def run(model: str, device: str, inputs_path: str | None, seed: int, dims: tuple[str, ...], as_json: bool,
        bench_runs: int | None, warmup: int, profile: bool, top: int, memory_limit: str | None) -> None:
    """Run an ONNX model on a device and describe its outputs; --bench measures it."""
    if profile and bench_runs is None:
        raise click.UsageError("--profile needs --bench N")
    try:
        from .onnx import runner
    except ImportError as exc:
        _fail("run", exc)
    try:
        result = _run_model(runner, model, device, inputs_path, seed, runner.parse_dims(dims), bench_runs, warmup,
                            profile, memory_limit)
    except _model_errors() as exc:
        _fail("run", exc)
    result["fallbacks"] = _fallbacks()
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    console = _console()
    rep = result["run"]
    console.print(f"[bold]{model}[/] on [bold]{rep['device']}[/]: run in {rep['seconds'] * 1e3:.2f} ms")
    console.print(_tensor_table("inputs", [runner.TensorSummary(**t) for t in rep["inputs"]]))
    console.print(_tensor_table("outputs", [runner.TensorSummary(**t) for t in rep["outputs"]]))
    if "bench" in result:
        console.print(_bench_table(result["bench"]))
        if result["bench"]["profile"]:
            console.print(_profile_table(result["bench"]["profile"][:top]))
    _print_fallbacks(console, result["fallbacks"])


def _fallbacks() -> list[dict[str, Any]]:
    """chipdock.fallback_report() for run/diff: every op this process ran on the CPU reference instead."""
    import chipdock

    return [dict(r) for r in chipdock.fallback_report()]


def _print_fallbacks(console: Console, rows: list[dict[str, Any]]) -> None:
    if not rows:
        console.print("CPU fallbacks: none (every op ran on its device)")
        return
    table = Table(title=f"CPU fallbacks: {len(rows)} (op, dtypes) ran on the CPU reference "
                        "(chipdock.fallback_report())", title_justify="left")
    for col in ("device type", "op", "dtypes", "calls", "reason"):
        table.add_column(col, justify="right" if col == "calls" else "left", overflow="fold")
    for r in rows:
        table.add_row(str(r["device_type"]), str(r["op"]), str(r["dtypes"]), str(r["count"]), str(r["reason"]))
    console.print(table)


def _run_model(runner: Any, model: str, device: str, inputs_path: str | None, seed: int, dims: dict[str, int],
               bench_runs: int | None, warmup: int, profile: bool, memory_limit: str | None = None) -> dict[str, Any]:
    import chipdock

    from .onnx import Session

    def feeds(session: Any) -> dict[str, Any]:
        return runner.prepare_inputs(session, inputs_path, seed, dims)

    chipdock_device = chipdock.device(device)  # an unknown device fails here, before the model loads
    if bench_runs is None:
        session = Session(model, device=chipdock_device, memory_limit=memory_limit)
        report, _ = runner.run_once(session, feeds(session), model)
        return {"run": report.as_dict()}
    def make_session() -> Any:
        return Session(model, device=chipdock_device, memory_limit=memory_limit)

    bench_report, session = runner.benchmark(make_session, chipdock_device, feeds, bench_runs, warmup, model)
    inputs = feeds(session)
    if profile:
        bench_report.profile = runner.profile_ops(session, inputs, repeats=max(1, min(bench_runs, 10)))
    report, _ = runner.run_once(session, inputs, model)
    return {"run": report.as_dict(), "bench": bench_report.as_dict()}


def _bench_table(b: dict[str, Any]) -> Table:
    table = Table(title=f"benchmark: {b['runs']} runs after {b['warmup']} warmup, batch {b['batch']}",
                  title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    lat = b["latency_ms"]
    for label, value in (
        ("cold start: Session()", f"{b['session_seconds'] * 1e3:.1f} ms"),
        ("cold start: first run", f"{b['first_run_seconds'] * 1e3:.2f} ms"),
        ("latency P50", f"{lat['p50']:.3f} ms"), ("latency P95", f"{lat['p95']:.3f} ms"),
        ("latency P99", f"{lat['p99']:.3f} ms"), ("latency mean / min / max",
                                                  f"{lat['mean']:.3f} / {lat['min']:.3f} / {lat['max']:.3f} ms"),
        ("throughput", f"{b['inferences_per_s']:.1f} inferences/s, {b['samples_per_s']:.1f} samples/s"),
        ("device memory: weights", _fmt_bytes(b["weights_bytes"])),
        ("device memory: peak", _fmt_bytes(b["peak_bytes"])),
    ):
        table.add_row(label, value)
    return table


def _profile_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="time by op type (each node timed alone, device synchronized)", title_justify="left")
    for col in ("op type", "nodes", "ms per run", "share", "slowest node", "its ms"):
        table.add_column(col, justify="left" if col in ("op type", "slowest node") else "right")
    for r in rows:
        table.add_row(r["op_type"], str(r["nodes"]), f"{r['ms']:.3f}", f"{r['share'] * 100:.1f}%",
                      r["slowest_node"], f"{r['slowest_ms']:.3f}")
    return table


@main.command()
@_model_options
@click.option("--reference", default="cpu", show_default=True, metavar="TYPE[:ORDINAL]",
              help="The device the model's values are compared with.")
@click.option("--rtol", type=click.FloatRange(min=0), help="Judge float outputs by |dev - ref| <= atol + rtol*|ref| "
              "instead of the opset's precision table.")
@click.option("--atol", type=click.FloatRange(min=0), help="See --rtol (the one not given is 0).")
@click.option("--all", "show_all", is_flag=True, help="List every node (default: the first 5, then failures).")
def diff(model: str, device: str, inputs_path: str | None, seed: int, dims: tuple[str, ...], as_json: bool,
         reference: str, rtol: float | None, atol: float | None, show_all: bool) -> None:
    """Run a model on DEVICE and on the reference with the same inputs and compare every intermediate tensor.

    Exit status 1 when any node's error exceeds its tolerance; the first such node is marked.
    """
    try:
        from .onnx import diff as diff_mod
        from .onnx import runner
    except ImportError as exc:
        _fail("diff", exc)
    import chipdock

    try:
        chipdock.device(device)  # an unknown device fails here, before the model loads
        chipdock.device(reference)
        report = diff_mod.diff(model, device, reference, inputs_path, seed, runner.parse_dims(dims), rtol, atol)
    except _model_errors() as exc:
        _fail("diff", exc)
    fallbacks = _fallbacks()
    if as_json:
        click.echo(json.dumps({**report.as_dict(), "fallbacks": fallbacks}, indent=2))
    else:
        _print_diff(report, show_all)
        _print_fallbacks(_console(), fallbacks)
    sys.exit(0 if report.ok else 1)


def _print_diff(report: Any, show_all: bool) -> None:
    console = _console()
    table = Table(title=f"{report.model}: {report.device} vs {report.reference}", title_justify="left")
    for col in ("#", "node", "op", "output", "shape", "dtype", "max abs", "max rel", "local abs", "bad", "tolerance",
                ""):
        table.add_column(col, justify="right" if col in ("#", "max abs", "max rel", "local abs", "bad") else "left")
    shown = 0
    for i, n in enumerate(report.nodes):
        if not (show_all or i < 5 or not n.ok or i == report.first_failure):
            continue
        mark = ("[red bold]FIRST[/]" if i == report.first_failure else "[red]over[/]") if not n.ok else "[green]ok[/]"
        if n.note:
            mark += f" {n.note}"
        elif n.judged_on == "propagated":
            mark += " (judged on propagated error)"
        table.add_row(str(n.index), n.node or "-", n.op_type, n.output, str(tuple(n.shape)), n.dtype,
                      f"{n.max_abs:.3g}", f"{n.max_rel:.3g}",
                      "-" if n.local_max_abs is None else f"{n.local_max_abs:.3g}", f"{n.mismatches}/{n.size}",
                      n.tolerance, mark)
        shown += 1
    console.print(table)
    if shown < len(report.nodes):
        console.print(f"({len(report.nodes) - shown} more rows within tolerance; --all lists them)")
    console.print("max abs/rel: the device against the reference run; local abs: against the node alone re-run on "
                  "the reference with the device's inputs (what `bad` counts)")
    console.print(f"tolerances: {report.tolerance_source}")
    if report.ok:
        console.print(f"[green]all {len(report.nodes)} values within tolerance[/]")
    else:
        first = report.nodes[report.first_failure]
        bad = sum(not n.ok for n in report.nodes)
        console.print(f"[red]{bad} of {len(report.nodes)} values out of tolerance; first: node "
                      f"{first.node or first.index!r} ({first.op_type}) output {first.output!r}[/]")


if __name__ == "__main__":
    main()
