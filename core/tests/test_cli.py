import json
import os
import subprocess
import sys

from core_helpers import run_python


def chipdock_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chipdock.cli", *args], capture_output=True, text=True,
        env={**os.environ, **(env or {})}, timeout=300,
    )


def test_check_passes_on_the_cpu_reference():
    proc = chipdock_cli("check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for text in ("backends", "cpu", "accepted", "stream + event ordering", "all devices passed"):
        assert text in proc.stdout


def test_check_json_covers_every_device_and_step():
    proc = chipdock_cli("check", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    assert [d["device"] for d in report["devices"]][:2] == ["cpu:0", "cpu:1"]
    steps = {s["name"] for s in report["devices"][0]["steps"]}
    assert steps == {"allocate", "copy round trip", "stream + event ordering", "event timing"}
    cpu = [b for b in report["backends"] if b["name"] == "cpu"][0]
    assert cpu["status"] == "accepted" and cpu["abi_version"] == report["abi_version"]


def test_check_and_doctor_name_the_runtime_each_backend_runs_on():
    """The runtime a backend's devices report is on the backend's own line too (a backend on a test double of its
    vendor's runtime says so there as well as on each device)."""
    report = json.loads(chipdock_cli("check", "--json").stdout)
    doctor_report = json.loads(chipdock_cli("doctor", "--json").stdout)
    runtimes = {d["device"]: d["runtime_version"] for d in doctor_report["devices"]}
    cpu = [b for b in report["backends"] if b["name"] == "cpu"][0]
    assert cpu["runtime"] == runtimes["cpu:0"] and cpu["runtime"], cpu
    assert "; " not in cpu["runtime"]  # every CPU device reports the same: listed once
    row = [line for line in chipdock_cli("check").stdout.splitlines() if line.startswith("│ cpu ")][0]
    assert f"on {cpu['runtime']}" in row, row
    doctor = chipdock_cli("doctor").stdout.splitlines()
    assert any(line.startswith("cpu ") and line.endswith(f"accepted on {cpu['runtime']}") for line in doctor), doctor


def test_check_shows_a_clamped_isa_as_a_warning():
    """CHIPDOCK_CPU_ISA above the CPU (faked by hiding AVX-512) passes the check, with the clamp said aloud."""
    env = {"CHIPDOCK_CPU_ISA": "avx512", "CHIPDOCK_CPU_HIDE_FEATURES": "avx512"}
    proc = chipdock_cli("check", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning: cpu: CHIPDOCK_CPU_ISA=avx512 asks for avx512, but this CPU offers only" in proc.stdout
    report = json.loads(chipdock_cli("check", "--json", env=env).stdout)
    assert any("CHIPDOCK_CPU_ISA=avx512" in w for w in report["warnings"])
    assert json.loads(chipdock_cli("check", "--json").stdout)["warnings"] == []


def test_check_fails_with_a_non_zero_exit_when_a_device_fails():
    # 1 MiB of device memory cannot hold the 4 MiB smoke test buffers.
    proc = chipdock_cli("check", "--json", env={"CHIPDOCK_CPU_MEMORY_LIMIT": "1M"})
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    failed = [s for s in report["devices"][0]["steps"] if not s["ok"]]
    assert failed and "OutOfMemoryError" in failed[0]["detail"]


def test_check_lists_refused_plugins_without_failing(tmp_path):
    manifest = tmp_path / "ghost.chipdock.json"
    manifest.write_text('{"schema": 1, "name": "ghost", "device_type": "ghost", "version": "0", '
                        '"library": "libghost.so", "abi": {"major": 1, "minor": 0}}')
    proc = chipdock_cli("check", env={"CHIPDOCK_PLUGIN_PATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout
    assert "ghost" in proc.stdout and "refused" in proc.stdout


def test_version_option():
    proc = run_python("from chipdock.cli import main; main(['--version'])")
    assert "0.1.0" in proc.stdout
