"""How the npu plug-in finds CANN: without it, 0 devices and the reason (chipdock keeps working); an incomplete or
out-of-range CANN refused with what and where; the test double selected only explicitly, and then named on every
check, doctor and conformance line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

# The label every report line carries with the double (conftest.py and the plug-in say the same).
DOUBLE_LABEL = "simulated Ascend runtime (test double)"

# The range CMakeLists.txt declares (CHIPDOCK_NPU_CANN_MIN / _MAX_EXCLUSIVE) and the manifest carries.
CANN_RANGE = ">=8.0.0,<9.2.0"


# ---------------------------------------------------------------- no CANN


def test_without_cann_the_backend_is_accepted_with_zero_devices_and_the_reason(npu_info, no_cann_env):
    info = npu_info(no_cann_env)
    assert info["status"] == "accepted", info["reason"]
    assert info["device_count"] == 0
    reason = info["device_error"]
    assert reason.startswith("CANN not found"), reason
    # It says what it looked for and every place it looked.
    assert "libascendcl.so" in reason and "/usr/local/Ascend/ascend-toolkit/latest/lib64" in reason, reason
    assert "ld.so" in reason, reason
    # Registration needs the op libraries: none without CANN, and the log says why.
    assert info["kernel_count"] == 0
    assert info["vendor_runtime"] == {"name": "CANN", "version": CANN_RANGE}


def test_without_cann_import_and_the_cpu_device_still_work(run_fresh, no_cann_env):
    proc = run_fresh(
        """
        import numpy as np, chipdock
        print(chipdock.tensor(np.arange(4), device="cpu:0").numpy().sum())
        try:
            chipdock.device("npu:0")
        except chipdock.ChipdockError as e:
            print("lookup:", e)
        print([m for _, m in chipdock._C.plugin_log() if m.startswith("npu:")])
        """,
        no_cann_env,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "6"
    assert lines[1].startswith("lookup:") and "CANN not found" in lines[1], lines[1]
    assert "npu: no kernels registered: CANN not found" in lines[2], lines[2]


def test_ascend_home_path_is_searched_first(npu_info, no_cann_env, tmp_path):
    info = npu_info({**no_cann_env, "ASCEND_HOME_PATH": str(tmp_path)})
    reason = info["device_error"]
    assert f"{tmp_path}/lib64/libascendcl.so (absent)" in reason, reason
    assert reason.index(str(tmp_path)) < reason.index("/usr/local/Ascend"), reason


def test_an_explicit_runtime_folder_is_the_only_place_looked_at(npu_info, no_cann_env, tmp_path):
    info = npu_info({**no_cann_env, "CHIPDOCK_NPU_RUNTIME": str(tmp_path)})
    reason = info["device_error"]
    assert f"CHIPDOCK_NPU_RUNTIME={tmp_path}" in reason and f"{tmp_path}/libascendcl.so (absent)" in reason, reason
    assert "/usr/local/Ascend" not in reason and "ld.so" not in reason, reason


def test_chipdock_check_lists_npu_with_the_reason_and_still_passes(run_fresh, no_cann_env):
    proc = run_fresh(env=no_cann_env, args=["chipdock.cli", "check", "--json"])
    # No npu device means nothing to check, not a failure: the CPU device still passes.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    npu = [b for b in json.loads(proc.stdout)["backends"] if b["name"] == "npu"]
    assert len(npu) == 1 and npu[0]["device_count"] == 0 and "CANN not found" in npu[0]["device_error"]


# ---------------------------------------------------------------- an incomplete CANN


def _shared_library(folder: Path, name: str, source: str) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in library")
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / (name + ".c")
    src.write_text(source)
    out = folder / name
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True, capture_output=True)
    return out


def test_a_libascendcl_without_the_required_symbols_is_refused_naming_them(npu_info, no_cann_env, tmp_path):
    # A library of the right name that exports almost nothing (a foreign or broken install).
    lib = _shared_library(tmp_path, "libascendcl.so", "int aclInit(const char* p) { (void)p; return 0; }\n")
    info = npu_info({**no_cann_env, "CHIPDOCK_NPU_RUNTIME": str(tmp_path)})
    assert info["device_count"] == 0
    reason = info["device_error"]
    assert str(lib) in reason and "lacks" in reason, reason
    assert "aclrtSetDevice" in reason and "aclrtMalloc" in reason, reason
    assert "aclInit," not in reason and "aclInit " not in reason, reason  # the one it has is not listed


def test_a_libascendcl_that_cannot_be_loaded_says_why(npu_info, no_cann_env, tmp_path):
    (tmp_path / "libascendcl.so").write_text("not an ELF file\n")
    info = npu_info({**no_cann_env, "CHIPDOCK_NPU_RUNTIME": str(tmp_path)})
    reason = info["device_error"]
    assert f"{tmp_path}/libascendcl.so (" in reason and "(absent)" not in reason, reason


# ---------------------------------------------------------------- the test double


def test_the_double_is_never_used_unless_selected(npu_info, npu_double_env, no_cann_env):
    # The double is installed, but without CHIPDOCK_NPU_RUNTIME=test-double nothing looks in its folder.
    info = npu_info(no_cann_env)
    assert info["device_count"] == 0 and "_test_double" not in info["device_error"], info["device_error"]


def test_the_double_lists_its_devices_with_the_label(run_fresh, npu_double_env):
    proc = run_fresh(
        """
        import json, chipdock
        devices = [d for d in chipdock.devices() if str(d).startswith("npu")]
        print(json.dumps([{"device": str(d), **d.properties()} for d in devices]))
        """,
        {**npu_double_env, "CHIPDOCK_NPU_SIM_DEVICES": "3", "CHIPDOCK_NPU_SIM_SOC": "Ascend910B4"},
    )
    assert proc.returncode == 0, proc.stderr
    props = json.loads(proc.stdout.splitlines()[-1])
    assert [p["device"] for p in props] == ["npu:0", "npu:1", "npu:2"]
    for p in props:
        assert p["name"] == f"Ascend910B4 ({DOUBLE_LABEL})"
        assert p["vendor"] == "Huawei" and p["architecture"] == "Ascend910B4"
        assert p["runtime_version"] == f"CANN 8.3.RC1 ({DOUBLE_LABEL})"
        assert p["host_addressable"] == 0 and p["total_memory"] > 0


@pytest.mark.parametrize(("version", "verdict"), [("7.0.0", "too old"), ("8.0.RC3", "too old"),
                                                  ("9.2.0", "too new"), ("9.2.RC1", "too new"),
                                                  ("10.0.0", "too new")])
def test_a_cann_outside_the_range_is_refused_naming_both_versions(npu_info, npu_double_env, version, verdict):
    info = npu_info({**npu_double_env, "CHIPDOCK_NPU_SIM_CANN_VERSION": version})
    assert info["status"] == "accepted" and info["device_count"] == 0
    reason = info["device_error"]
    assert f"CANN {version} at " in reason and verdict in reason and CANN_RANGE in reason, reason


@pytest.mark.parametrize("version", ["8.0.0", "8.1.RC1", "9.1.0", "9.1.RC2"])
def test_a_cann_inside_the_range_is_accepted(npu_info, npu_double_env, version):
    info = npu_info({**npu_double_env, "CHIPDOCK_NPU_SIM_CANN_VERSION": version})
    assert info["device_count"] > 0, info["device_error"]


def test_a_missing_op_symbol_unregisters_that_op_only(run_fresh, npu_double_env, npu_package_dir):
    variant = npu_package_dir / "_test_double" / "variants" / "missing_op" / "libopapi.so"
    env = {**npu_double_env, "CHIPDOCK_NPU_OPAPI_LIBRARY": str(variant)}
    code = """
        import json, chipdock
        npu = [b for b in chipdock.backends() if b.name == "npu"][0]
        print(json.dumps({"kernels": npu.kernel_count,
                          "log": [m for _, m in chipdock._C.plugin_log() if "not registered" in m]}))
        """
    full = json.loads(run_fresh(code, npu_double_env).stdout.splitlines()[-1])
    missing = json.loads(run_fresh(code, env).stdout.splitlines()[-1])
    if full["kernels"] == 0:
        pytest.skip("no kernel family is built yet: nothing to unregister")
    # The variant hides aclnnMaximum (test_double/CMakeLists.txt, CDSIM_MISSING_OP): exactly that op is
    # added to whatever the full library already leaves unregistered, and the rest load.
    added = [m for m in missing["log"] if "aclnnMaximum" in m]
    assert added and all(str(variant) in m for m in added), missing["log"]
    assert not any("aclnnMaximum" in m for m in full["log"]), full["log"]
    assert len(missing["log"]) == len(full["log"]) + len(added)
    assert 0 < missing["kernels"] < full["kernels"]


def test_check_and_doctor_name_the_double_on_every_npu_line(run_fresh, npu_double_env):
    check = run_fresh(env=npu_double_env, args=["chipdock.cli", "check"])
    assert check.returncode == 0, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    # The backend's row, each device's first row and the load warning.
    backend_rows = [line for line in lines if line.startswith("│ npu ")]
    device_rows = [line for line in lines if line.startswith("│ npu:")]
    # (other npu warnings name ops the double's op library lacks)
    warnings = [line for line in lines if line.startswith("warning: npu: simulated")]
    assert len(backend_rows) == 1 and len(device_rows) == 2 and len(warnings) == 1, check.stdout
    for line in backend_rows + device_rows + warnings:
        assert "simulated Ascend runtime" in line, line
    doctor = run_fresh(env=npu_double_env, args=["chipdock.cli", "doctor"])
    assert doctor.returncode == 0, doctor.stderr
    lines = doctor.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("npu "))
    assert DOUBLE_LABEL in lines[start], lines[start]
    for line in lines:
        if line.startswith("npu:"):
            assert DOUBLE_LABEL in line, line
    assert any(line.startswith("log[") and DOUBLE_LABEL in line for line in lines), lines
    assert any(line.startswith("environment:") and "'CHIPDOCK_NPU_RUNTIME': 'test-double'" in line
               for line in lines), lines


def test_the_conformance_report_names_the_double_and_a_private_copy_finds_it(run_fresh, npu_double_env, tmp_path):
    # runtime.abi loads private copies of the plug-in from temporary folders: each must still find the wheel's
    # double (beside the wheel's own copy, loaded in the process), or its device_get_count fails.
    report_dir = tmp_path / "report"
    proc = run_fresh(env=npu_double_env, args=["chipdock.cli", "conformance", "--device", "npu", "--suite", "quick",
                                               "--only", "runtime.abi*", "--report", str(report_dir)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"chipdock conformance on npu:0 (Ascend910B3 ({DOUBLE_LABEL}))"), proc.stdout
    header = json.loads((report_dir / "report.json").read_text())["header"]
    assert header["device_name"] == f"Ascend910B3 ({DOUBLE_LABEL})"
    assert header["runtime_version"] == f"CANN 8.3.RC1 ({DOUBLE_LABEL})"
    assert DOUBLE_LABEL in (report_dir / "junit.xml").read_text()
    assert DOUBLE_LABEL in (report_dir / "report.html").read_text()


def test_an_acl_failure_names_the_call_the_code_its_name_and_the_runtime_message(run_fresh, npu_double_env):
    # aclrtMalloc beyond the device's memory: 207001 ACL_ERROR_RT_MEMORY_ALLOCATION, mapped to OutOfMemoryError,
    # with aclGetRecentErrMsg()'s text in parentheses.
    proc = run_fresh(
        """
        import chipdock
        try:
            chipdock.empty((4 << 20,), chipdock.uint8, "npu:0")
        except chipdock.ChipdockError as e:
            print(type(e).__name__, e)
        """,
        {**npu_double_env, "CHIPDOCK_NPU_SIM_MEMORY": str(1 << 20)},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.strip()
    assert out.startswith("OutOfMemoryError "), out
    assert "failed: 207001 ACL_ERROR_RT_MEMORY_ALLOCATION (" in out and "aclrtMalloc" in out, out
