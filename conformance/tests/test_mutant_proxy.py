"""The mutation proxy (conformance/mutation/mutant_proxy.c) through the
chipdock API: operator 0 is transparent, every operator has its visible
effect and bumps `applied`, a mutant touches only the kernel it names, and
switching back to 0 restores exact results.

The proxy loads once per process and wraps a private copy of the CPU
backend, so every test runs its checks in a child process with the
environment `mutation_control.prepare` returns; the child prints one JSON
line that the test judges.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chipdock_conformance import mutation_control as mc

REPO = Path(__file__).resolve().parents[2]
HEADER = REPO / "conformance" / "mutation" / "mutant_control.h"
CHILD_TIMEOUT_S = 120

# Imported by every child: the devices, the control record, helpers.
PRELUDE = """
import json, os, sys, threading, time
import numpy as np
import chipdock
from chipdock._C import abi
from chipdock_conformance import mutation_control as mc

control = mc.Control(os.environ["CHIPDOCK_MUTANT_CONTROL"])

def run(op, arrays, device, **attrs):
    tensors = [chipdock.tensor(a, device=device) for a in arrays]
    return getattr(chipdock.ops, op)(*tensors, **attrs).numpy()

def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()

def report(**values):
    print("RESULT " + json.dumps(values), flush=True)
"""


def cpu_library() -> Path:
    chipdock_cpu = pytest.importorskip("chipdock_cpu")
    return Path(chipdock_cpu.__file__).resolve().parent / "libchipdock_cpu.so"


@pytest.fixture
def proxy_env(tmp_path: Path) -> dict[str, str]:
    """A proxy load over a private copy of the CPU backend."""
    return mc.prepare(tmp_path / "mutant", cpu_library(), private_copy=True)


def child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHIPDOCK_MUTANT_", "CHIPDOCK_PLUGIN_PATH"))}
    env.update(extra)
    return env


def run_child(env: dict[str, str], body: str, control: str | None = None) -> dict:
    """Runs PRELUDE + `body` in a fresh interpreter; the dict it reported.
    `control`: the control file the child maps when `env` has none (or a bad one)."""
    prelude = PRELUDE
    if control is not None:
        prelude = prelude.replace('os.environ["CHIPDOCK_MUTANT_CONTROL"]', repr(control))
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(body)],
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads(lines[-1][len("RESULT ") :])


# --- the record's layout -----------------------------------------------------------


def test_python_layout_matches_the_c_header():
    """The offsets the header pins (static asserts) are the Python mirror's."""
    pinned = dict(re.findall(r"offsetof\(cd_mutant_control, (\w+)\) == (\d+)", HEADER.read_text()))
    python = {
        "magic": mc.OFF_MAGIC,
        "version": mc.OFF_VERSION,
        "op_code": mc.OFF_OPERATOR,
        "k": mc.OFF_K,
        "num_dtypes": mc.OFF_NUM_DTYPES,
        "dtypes": mc.OFF_DTYPES,
        "op": mc.OFF_OP,
        "padding": 148,
        "applied": mc.OFF_APPLIED,
        "pending": mc.OFF_PENDING,
        "release": mc.OFF_RELEASE,
    }
    assert {k: int(v) for k, v in pinned.items()} == python
    codes = dict(re.findall(r"CD_MUTANT_(\w+) = (\d+)", HEADER.read_text()))
    assert {k.lower(): int(v) for k, v in codes.items()} == mc.OPERATORS


def test_dtype_codes_are_the_cores():
    from chipdock._dtypes import BY_CODE

    assert mc.DTYPE_CODES == {dtype.name: code for code, dtype in BY_CODE.items()}


def test_control_set_writes_the_record(tmp_path: Path):
    path = mc.write_control(tmp_path / "c")
    with mc.Control(path) as control:
        control.set("perturb_ulp", k=3, op="add", dtypes=("float32", "float32", "float32"))
        raw = path.read_bytes()
        assert int.from_bytes(raw[8:12], "little") == 1
        assert int.from_bytes(raw[12:16], "little") == 3
        assert int.from_bytes(raw[16:20], "little") == 3
        assert [int.from_bytes(raw[20 + 4 * i : 24 + 4 * i], "little") for i in range(4)] == [1, 1, 1, 0]
        assert raw[84:88] == b"add\0"
        assert control.operator == "perturb_ulp" and control.applied == 0 and control.pending == 0
        control.clear()
        assert control.operator == "none"
        with pytest.raises(ValueError, match="unknown operator"):
            control.set("no_such_operator")
        with pytest.raises(ValueError, match="unknown dtype"):
            control.set("perturb_ulp", op="add", dtypes=("float128",))


def test_control_refuses_a_file_that_is_not_a_record(tmp_path: Path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\0" * mc.FILE_SIZE)
    with pytest.raises(ValueError, match="not a version-1 control file"):
        mc.Control(bad)


def test_the_wheel_ships_the_proxy_exporting_only_the_entry():
    library = mc.proxy_library()
    assert library.is_file()
    assert (library.parent / "mutant.manifest-template.json").is_file()
    if shutil.which("nm") is None:
        pytest.skip("nm is not installed")
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True).stdout
    assert [line.split()[-1] for line in symbols.splitlines()] == ["chipdock_plugin_entry"]


def test_prepare_lays_out_a_loadable_folder(tmp_path: Path):
    env = mc.prepare(tmp_path / "m", cpu_library(), private_copy=True)
    manifest = json.loads(Path(env["CHIPDOCK_PLUGIN_PATH"]).read_text())
    assert manifest["name"] == "mutant-cpu" and manifest["device_type"] == "mutant"
    assert (tmp_path / "m" / manifest["library"]).is_file()
    assert Path(env["CHIPDOCK_MUTANT_TARGET"]).parent == (tmp_path / "m").resolve()  # the private copy
    assert manifest["environment"] == {"OMP_WAIT_POLICY": "PASSIVE"}  # the target's defaults
    # The proxy forwards the target's kernels: the dispatcher hands them what the target was built for.
    assert manifest.get("opset_version") == mc.target_manifest(cpu_library()).get("opset_version")
    shared = mc.prepare(tmp_path / "s", cpu_library(), private_copy=False)
    assert Path(shared["CHIPDOCK_MUTANT_TARGET"]) == cpu_library()


# --- refusals ---------------------------------------------------------------------------

REFUSAL = """
info = [b for b in chipdock.backends() if b.name.startswith("mutant")]
report(status=info[0].status, reason=info[0].reason, cpu=[b.status for b in chipdock.backends() if b.name == "cpu"])
"""


@pytest.mark.parametrize("variable", ["CHIPDOCK_MUTANT_TARGET", "CHIPDOCK_MUTANT_CONTROL"])
def test_a_missing_variable_is_a_refusal_naming_the_proxy_and_the_variable(proxy_env, variable):
    env = {k: v for k, v in proxy_env.items() if k != variable}
    result = run_child(env, REFUSAL, control=proxy_env["CHIPDOCK_MUTANT_CONTROL"])
    assert result["status"] == "refused"
    assert "mutant" in result["reason"] and variable in result["reason"], result["reason"]
    assert result["cpu"] == ["accepted"]  # the other backends are untouched


def test_a_bad_control_file_is_a_refusal(proxy_env, tmp_path: Path):
    bad = tmp_path / "bad.control"
    bad.write_bytes(b"\xff" * mc.FILE_SIZE)
    good = proxy_env["CHIPDOCK_MUTANT_CONTROL"]
    result = run_child(dict(proxy_env, CHIPDOCK_MUTANT_CONTROL=str(bad)), REFUSAL, control=good)
    assert result["status"] == "refused"
    assert "mutant" in result["reason"] and "CHIPDOCK_MUTANT_CONTROL" in result["reason"], result["reason"]


def test_a_relative_target_is_a_refusal(proxy_env):
    env = dict(proxy_env, CHIPDOCK_MUTANT_TARGET="libchipdock_cpu.so")
    result = run_child(env, REFUSAL)
    assert result["status"] == "refused" and "not an absolute path" in result["reason"], result["reason"]


# --- operator 0: transparent -------------------------------------------------------------

TRANSPARENT = """
rng = np.random.default_rng(7)
a = rng.standard_normal((33, 17)).astype(np.float32)
b = rng.standard_normal((33, 17)).astype(np.float32)
a[0, :4] = [np.nan, np.inf, -0.0, 0.0]
w = rng.standard_normal((17, 9)).astype(np.float32)
cases = [
    ("add", [a, b], {}), ("mul", [a.astype(np.float64), b.astype(np.float64)], {}), ("exp", [a], {}),
    ("sum", [a], {"axes": [1]}), ("matmul", [a, w], {}), ("softmax", [a], {"axis": -1}),
    ("maximum", [a.astype(np.int32), b.astype(np.int32)], {}), ("lt", [a, b], {}),
]
equal = {op: same(run(op, arrays, "cpu", **kw), run(op, arrays, "mutant:0", **kw)) for op, arrays, kw in cases}
sliced = chipdock.tensor(a, device="mutant:0")[3:]
report(equal=equal, sliced=same(chipdock.ops.neg(sliced).numpy(), -a[3:]), applied=control.applied)
"""


def test_operator_0_gives_the_cpu_results_bit_for_bit(proxy_env):
    result = run_child(proxy_env, TRANSPARENT)
    assert all(result["equal"].values()), result["equal"]
    assert result["sliced"] and result["applied"] == 0


def test_operator_0_passes_the_quick_suite(proxy_env, tmp_path: Path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "chipdock.cli",
            "conformance",
            "--device",
            "mutant",
            "--suite",
            "quick",
            "--jobs",
            "2",
            "--report",
            str(tmp_path / "report"),
        ],
        env=child_env(proxy_env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "report" / "report.json").read_text())["summary"]
    assert summary["fail"] == 0 and summary["pass"] > 1000, summary
    assert "mutant-cpu" in json.dumps(json.loads((tmp_path / "report" / "report.json").read_text())["header"])


# --- kernel operators ----------------------------------------------------------------------

# Each: set the operator on (add, float32), run add on inputs that give it
# something to change, record what differs from the CPU, then clear and
# check that the same call is exact again. `effect` is how the child sees it.
KERNEL = """
OPERATOR, K = sys.argv[1], int(sys.argv[2])
F32 = ("float32", "float32", "float32")
def inputs(seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    a[:6] = [0.0, -0.0, np.nan, 1.0, np.inf, 2.0]
    b[:6] = [0.0, -0.0, 1.0, -1.0, 1.0, -2.0]  # +0, -0, NaN, 0, inf, 0
    return a, b

def attempt(seed):
    a, b = inputs(seed)
    expected = run("add", [a, b], "cpu")
    if OPERATOR == "ignore_byte_offset":
        big_a = np.concatenate([np.full(6, 100.0, np.float32), a])
        big_b = np.concatenate([np.full(6, 100.0, np.float32), b])
        x = chipdock.tensor(big_a, device="mutant:0")[6:]
        y = chipdock.tensor(big_b, device="mutant:0")[6:]
        got = chipdock.ops.add(x, y).numpy()
        return expected, got, None
    x, y = chipdock.tensor(a, device="mutant:0"), chipdock.tensor(b, device="mutant:0")
    out = chipdock.ops.add(x, y)
    got = out.numpy()
    later = None
    if OPERATOR == "late_finish":
        control.wait_idle(5.0)
        later = out.numpy()
    if OPERATOR == "write_input":
        later = x.numpy()
    return expected, got, later

control.set(OPERATOR, k=K, op="add", dtypes=F32)
effects = []
for seed in range(5):  # perturb_ulp & co. need an input with something to change
    expected, got, later = attempt(seed)
    control.wait_idle(5.0)
    a, b = inputs(seed)
    diff = [int(i) for i in np.flatnonzero(expected.view(np.uint32) != got.view(np.uint32))]
    effects.append({"diff": diff, "got": got.view(np.uint32).tolist(), "expected": expected.view(np.uint32).tolist(),
                    "later_exact": None if later is None else same(later, expected),
                    "input_changed": None if OPERATOR != "write_input" else not same(later, a)})
    if diff or OPERATOR in ("write_input",):
        break
applied = control.applied
pending_after = control.pending
control.clear()
a, b = inputs(11)
restored = same(run("add", [a, b], "mutant:0"), run("add", [a, b], "cpu"))
report(effects=effects, applied=applied, pending=pending_after, restored=restored, applied_after_clear=control.applied)
"""


def kernel_mutant(env: dict[str, str], operator: str, k: int = 1) -> dict:
    return run_child(env, KERNEL.replace("sys.argv[1], int(sys.argv[2])", f"{operator!r}, {k}"))


def f32_bits(value: float) -> int:
    import numpy as np

    return int(np.array([value], dtype=np.float32).view(np.uint32)[0])


@pytest.mark.parametrize(
    "operator",
    [
        "perturb_ulp",
        "flip_zero_sign",
        "drop_nan",
        "ignore_byte_offset",
        "write_input",
        "late_finish",
        "other_stream",
        "skip_last",
    ],
)
def test_each_kernel_operator_has_its_effect_and_clears(proxy_env, operator):
    check_kernel_effect(operator, kernel_mutant(proxy_env, operator, k=3))


@pytest.mark.parametrize("operator", ["perturb_ulp", "flip_zero_sign", "write_input", "late_finish", "skip_last"])
def test_kernel_operators_through_synchronous_copies(proxy_env, operator):
    """The path for a target without async copies or host callbacks
    (stream_synchronize + synchronous copies), forced on the CPU backend."""
    env = dict(proxy_env, CHIPDOCK_MUTANT_SYNC_EDITS="1")
    check_kernel_effect(operator, kernel_mutant(env, operator, k=3))


def check_kernel_effect(operator: str, result: dict) -> None:
    last = result["effects"][-1]
    diff, got, expected = last["diff"], last["got"], last["expected"]
    assert result["applied"] >= 1, result
    assert result["pending"] == 0 and result["restored"], result
    if operator == "perturb_ulp":  # the largest finite |value|, 3 ulps away from zero
        assert len(diff) == 1 and abs(got[diff[0]] - expected[diff[0]]) == 3
    elif operator == "flip_zero_sign":  # outputs 0 (+0+0), 1 (-0+-0), 3 (1-1), 5 (2-2) are zeros
        assert diff == [0, 1, 3, 5] and all(got[i] == expected[i] ^ 0x80000000 for i in diff)
    elif operator == "drop_nan":  # a NaN input gives the one NaN output; inf + 1 stays
        assert diff == [2] and got[2] == 0
    elif operator == "ignore_byte_offset":  # the kernel read the six 100.0 before each view
        assert diff[:6] == list(range(6)) and got[0] == f32_bits(200.0)
    elif operator == "write_input":
        assert diff == [] and last["input_changed"]
    elif operator == "late_finish":  # poisoned when the stream says done, correct 50 ms later
        assert diff and last["later_exact"]
    elif operator == "other_stream":  # held until the case is over: wrong at the first read, every time
        assert len(result["effects"]) == 1 and diff, "the kernel ran before the read"
    elif operator == "skip_last":
        assert diff == [63] and got[63] == 0x7B7B7B7B


def test_applied_counts_only_real_changes(proxy_env):
    body = """
    a = np.array([1.0, 2.0, -3.0], np.float32)
    b = np.array([0.5, 0.5, 0.5], np.float32)
    F32 = ("float32",) * 3
    counts = {}
    for name in ("flip_zero_sign", "drop_nan"):  # no zero, no NaN in the output
        control.set(name, op="add", dtypes=F32)
        counts[name] = [same(run("add", [a, b], "mutant:0"), a + b), control.applied]
    control.set("perturb_ulp", k=0, op="add", dtypes=F32)  # 0 ulps: no change
    counts["perturb_ulp_0"] = [same(run("add", [a, b], "mutant:0"), a + b), control.applied]
    control.clear()
    report(counts=counts)
    """
    assert run_child(proxy_env, body)["counts"] == {
        "flip_zero_sign": [True, 0],
        "drop_nan": [True, 0],
        "perturb_ulp_0": [True, 0],
    }


def test_a_mutant_touches_only_the_kernel_it_names(proxy_env):
    body = """
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(50), rng.standard_normal(50)
    control.set("perturb_ulp", k=2, op="add", dtypes=("float32",) * 3)
    f32 = [a.astype(np.float32), b.astype(np.float32)]
    result = {
        "add_f64": same(run("add", [a, b], "mutant:0"), run("add", [a, b], "cpu")),
        "mul_f32": same(run("mul", f32, "mutant:0"), run("mul", f32, "cpu")),
        "applied_before_add_f32": control.applied,
        "add_f32": same(run("add", f32, "mutant:0"), run("add", f32, "cpu")),
        "applied": control.applied,
    }
    control.set("perturb_ulp", k=2, op="add")  # no dtypes: every signature of add
    result["add_f64_all"] = same(run("add", [a, b], "mutant:0"), run("add", [a, b], "cpu"))
    control.clear()
    report(**result)
    """
    result = run_child(proxy_env, body)
    assert result == {
        "add_f64": True,
        "mul_f32": True,
        "applied_before_add_f32": 0,
        "add_f32": False,
        "applied": 1,
        "add_f64_all": False,
    }, result


def test_perturb_ulp_on_integers_and_bools(proxy_env):
    body = """
    a = np.array([5, -9, 3], np.int32)
    b = np.array([1, 1, 1], np.int32)
    control.set("perturb_ulp", k=4, op="add", dtypes=("int32",) * 3)
    ints = run("add", [a, b], "mutant:0").tolist()
    x = np.array([True, False, False]); y = np.array([False, False, False])
    control.set("perturb_ulp", k=1, op="logical_or", dtypes=("bool",) * 3)
    bools = run("logical_or", [x, y], "mutant:0").tolist()
    control.clear()
    report(ints=ints, bools=bools)
    """
    result = run_child(proxy_env, body)
    assert result["ints"] == [6, -4, 4]  # -8 has the largest magnitude: +4 with wrap
    assert result["bools"] == [False, False, False]  # the True flipped


def test_pending_drains_to_zero(proxy_env):
    body = """
    a = np.arange(1000, dtype=np.float32)
    seen = {}
    x = chipdock.tensor(a, device="mutant:0")
    for name in ("late_finish", "other_stream"):
        control.set(name, op="add", dtypes=("float32",) * 3)
        peak = 0
        for _ in range(5):  # pending lasts 20 (other_stream) or 50 ms (late_finish): read it at once
            out = chipdock.ops.add(x, x)
            peak = max(peak, control.pending)
            if peak:
                break
        seen[name] = [peak, control.wait_idle(5.0), control.pending, same(out.numpy(), a + a)]
    control.clear()
    report(seen=seen)
    """
    seen = run_child(proxy_env, body)["seen"]
    for name, (peak, drained, pending, exact) in seen.items():
        assert peak >= 1 and drained and pending == 0 and exact, (name, seen[name])


def test_other_stream_holds_its_kernel_until_the_case_is_over(proxy_env):
    """Deterministic, not a race: the kernel waits on the proxy's stream until
    the harness bumps `release` (wait_idle, the worker's settle), or a device
    synchronize; so a read long after the launch still sees the wrong output."""
    body = """
    from chipdock_conformance.mutation_worker import settle
    rng = np.random.default_rng(5)
    control.set("other_stream", op="add", dtypes=("float32",) * 3)
    seen = {}
    for how in ("wait_idle", "device_synchronize", "settle"):
        a = rng.standard_normal(1000).astype(np.float32) + 3.0  # new values: a reused block holds old sums
        x = chipdock.tensor(a, device="mutant:0")
        out = chipdock.ops.add(x, x)
        time.sleep(0.1)  # 5x the old 20 ms hold: the kernel must still be held
        early = same(out.numpy(), a + a)
        pending = control.pending
        start = time.monotonic()
        if how == "wait_idle":
            control.wait_idle(5.0)
        elif how == "device_synchronize":
            chipdock.device("mutant:0").synchronize()  # never a stall: it releases the held kernel
            control.wait_idle(5.0)
        else:
            settle("mutant:0", control)
        seen[how] = [early, pending, round(time.monotonic() - start, 3), same(out.numpy(), a + a), control.pending]
    control.clear()
    report(seen=seen)
    """
    seen = run_child(proxy_env, body)["seen"]
    for how, (early, pending, seconds, late, pending_after) in seen.items():
        assert not early and pending >= 1, (how, seen[how])
        assert seconds < 2.0 and late and pending_after == 0, (how, seen[how])


def test_other_stream_output_reads_a_poison_not_a_stale_result(proxy_env):
    """The allocator may hand the output a block that already holds the same result (an earlier case's): the
    held kernel's output then looked right, and which case killed the mutant varied between runs. Output 0 reads
    0x7B bytes (bool: False) until the held kernel has run."""
    body = """
    a = np.arange(256, dtype=np.float32)
    x = chipdock.tensor(a, device="mutant:0")
    first = chipdock.ops.add(x, x)
    right = same(first.numpy(), a + a)
    del first  # its block goes back to the cache, holding a + a
    control.set("other_stream", op="add", dtypes=("float32",) * 3)
    out = chipdock.ops.add(x, x)
    held = out.numpy().view(np.uint32).tolist()
    control.wait_idle(5.0)
    later = same(out.numpy(), a + a)
    control.clear()
    report(right=right, held=sorted(set(held)), later=later)
    """
    result = run_child(proxy_env, body)
    assert result == {"right": True, "held": [0x7B7B7B7B], "later": True}, result


def test_late_finish_poisons_bool_outputs_with_the_inverted_values(proxy_env):
    """0x7B (or ~1 = 0xFE) reads as True: a mostly-True output would look right."""
    body = """
    x = np.array([True, True, False, True]); y = np.array([True, False, False, False])
    control.set("late_finish", op="logical_or", dtypes=("bool",) * 3)
    out = chipdock.ops.logical_or(chipdock.tensor(x, device="mutant:0"), chipdock.tensor(y, device="mutant:0"))
    early = out.numpy().tolist()
    control.wait_idle(5.0)
    later = out.numpy().tolist()
    control.clear()
    report(early=early, later=later)
    """
    result = run_child(proxy_env, body)
    assert result == {"early": [False, False, True, False], "later": [True, True, False, True]}, result


# --- runtime operators ---------------------------------------------------------------------

# Each scenario drives raw slots of the proxy (chipdock._C.abi, as the runtime
# suite does) and returns whether the backend behaved correctly (or, for
# memory_info_total, the total it reported). The child runs it with the
# operator set, then cleared.
RUNTIME = """
OPERATOR, K = sys.argv[1], int(sys.argv[2])
chipdock.device("mutant:0")
api = abi.Api("mutant")

def call(slot, *args):
    result = getattr(api, slot)(*args)
    assert result[0] == 0, (slot, result)
    outs = result[2:]
    return None if not outs else outs[0] if len(outs) == 1 else outs

def gated(stream):
    gate = abi.Gate(10.0)
    call("stream_add_gate", stream, gate)
    assert gate.wait_entered(10.0)
    return gate

def blocks(fn, gate, seconds=0.3):
    # True if fn() waited for the gate (opened `seconds` later).
    opener = threading.Timer(seconds, gate.open)
    start = time.monotonic()
    opener.start()
    fn()
    elapsed = time.monotonic() - start
    opener.join()
    return elapsed >= seconds * 0.6

def scenario(name):
    s = call("stream_create", 0, 0)
    keep = []
    try:
        if name == "timing_at_record":
            e0, e1 = call("event_create", 0, 0), call("event_create", 0, 0)
            call("event_record", e0, s)
            gate = gated(s)
            call("event_record", e1, s)
            time.sleep(0.06)
            gate.open()
            call("stream_synchronize", s)
            ms = call("event_elapsed_time", e0, e1)
            call("event_destroy", e0); call("event_destroy", e1)
            return ms >= 40.0
        if name == "copy_truncated":
            p = call("memory_allocate", 0, 4096)
            call("memory_set", 0, p, 0, 4096)
            data = (np.arange(4096) % 251 + 1).astype(np.uint8)
            out = np.full(4096, 0x3C, np.uint8)
            call("memcpy", "h2d", 0, p, data.ctypes.data, 4096, None)
            call("memcpy", "d2h", 0, out.ctypes.data, p, 4096, None)
            call("memory_free", 0, p)
            return same(out, data)
        if name == "destroy_no_wait":
            s2 = call("stream_create", 0, 0)
            gate = gated(s2)
            waited = blocks(lambda: call("stream_destroy", s2), gate)
            return waited
        if name == "event_early":
            gate = gated(s)
            e = call("event_create", 0, 0)
            call("event_record", e, s)
            pending = call("event_query", e) == 0
            waited = blocks(lambda: call("event_synchronize", e), gate)
            call("event_destroy", e)
            return pending and waited
        if name == "stream_query_idle":
            gate = gated(s)
            busy = call("stream_query", s) == 0
            gate.open()
            return busy
        if name == "wait_event_ignored":
            gate = gated(s)
            e = call("event_create", 0, 0)
            call("event_record", e, s)
            s2 = call("stream_create", 0, 0)
            call("stream_wait_event", s2, e)
            held = call("stream_query", s2) == 0
            gate.open()
            call("stream_synchronize", s2); call("stream_destroy", s2); call("event_destroy", e)
            return held
        if name == "callback_early":
            gate = gated(s)
            recorder = abi.Recorder()
            call("stream_add_record", s, recorder, 1, 0)
            time.sleep(0.05)
            held = recorder.tokens() == []
            gate.open()
            recorder.wait_count(1, 5.0)
            return held
        if name == "device_sync_last_stream":
            gate = gated(s)
            s2 = call("stream_create", 0, 0)  # the newest live stream, idle
            waited = blocks(lambda: call("device_synchronize", 0), gate)
            call("stream_destroy", s2)
            return waited
        if name == "memory_info_total":
            return call("memory_get_info", 0)[1]
        if name == "async_copy_now":
            p = call("memory_allocate", 0, 256)
            call("memory_set", 0, p, 0, 256)
            gate = gated(s)
            data = np.full(256, 7, np.uint8)
            out = np.full(256, 0x3C, np.uint8)
            keep += [data, out]
            call("memcpy", "h2d", 0, p, data.ctypes.data, 256, s)
            call("memcpy", "d2h", 0, out.ctypes.data, p, 256, None)  # not ordered with the stream
            gate.open()
            call("stream_synchronize", s)
            call("memory_free", 0, p)
            return same(out, np.zeros(256, np.uint8))
        raise ValueError(name)
    finally:
        call("stream_synchronize", s)
        call("stream_destroy", s)

control.set(OPERATOR, k=K)
mutated = scenario(OPERATOR)
applied = control.applied
drained = control.wait_idle(5.0)
control.clear()
restored = scenario(OPERATOR)
report(mutated=mutated, restored=restored, applied=applied, drained=drained, pending=control.pending)
"""


@pytest.mark.parametrize(
    "operator",
    [
        "timing_at_record",
        "copy_truncated",
        "destroy_no_wait",
        "event_early",
        "stream_query_idle",
        "wait_event_ignored",
        "callback_early",
        "device_sync_last_stream",
        "memory_info_total",
        "async_copy_now",
    ],
)
def test_each_runtime_operator_has_its_effect_and_clears(proxy_env, operator):
    result = run_child(proxy_env, RUNTIME.replace("sys.argv[1], int(sys.argv[2])", f"{operator!r}, 1"))
    assert result["applied"] >= 1 and result["drained"] and result["pending"] == 0, result
    if operator == "memory_info_total":
        assert result["mutated"] == 2 * result["restored"] > 0, result
    else:
        assert result["mutated"] is False and result["restored"] is True, result


def test_device_sync_last_stream_differs_from_the_target_only_in_which_streams_it_waits_for(proxy_env):
    """Killed only by its planted semantics: a bad ordinal is the target's own
    refusal, and the stream it waits for is the newest one still live."""
    body = """
    chipdock.device("mutant:0")
    api, cpu = abi.Api("mutant"), abi.Api("cpu")
    control.set("device_sync_last_stream")
    bad = (-1, api.device_get_count()[2], 99)
    refusals = {str(d): [api.device_synchronize(d)[0], cpu.device_synchronize(d)[0]] for d in bad}
    older = call("stream_create", 0, 0)
    gate = gated(older)
    newer = call("stream_create", 0, 0)
    call("stream_destroy", newer)  # the newest live stream is `older` again
    waited = blocks(lambda: call("device_synchronize", 0), gate)
    call("stream_synchronize", older)
    call("stream_destroy", older)
    control.clear()
    report(refusals=refusals, waited=waited)
    """
    prelude_calls = RUNTIME[RUNTIME.index("def call(") : RUNTIME.index("def scenario(")]
    result = run_child(proxy_env, prelude_calls + textwrap.dedent(body))
    assert result["waited"], result
    for ordinal, (mutant, target) in result["refusals"].items():
        assert mutant == target != 0, (ordinal, result)


def test_device_sync_last_stream_skips_a_stream_the_target_forgot(proxy_env):
    """A negotiate case calls a copy of the proxy's entry, which runs the target's entry again: the target forgets
    its streams while the proxy still tracks them. The mutant once synchronized such a dead handle and raised
    InvalidHandleError (a kill by side effect); it now skips it."""
    body = """
    from chipdock_conformance.case import Context
    from chipdock_conformance.suites import collect_suite
    from chipdock_conformance.worker import run_case
    ctx = Context("mutant:0", level="quick")
    cases = collect_suite("runtime", "chipdock_conformance.runtime", ctx).cases
    negotiate = next(c for c in cases if c.id.startswith("runtime/abi/negotiate"))
    chipdock.device("mutant:0")
    api = abi.Api("mutant")
    stream = api.stream_create(0, 0)[2]
    negotiated = run_case(negotiate, ctx)["status"]
    forgotten = api.stream_query(stream)[0] != 0
    control.set("device_sync_last_stream")
    status = api.device_synchronize(0)[0]
    control.clear()
    report(negotiated=negotiated, forgotten=forgotten, status=status)
    """
    result = run_child(proxy_env, body)
    if not result["forgotten"]:
        pytest.skip("the target kept its streams across a second entry: nothing stale to skip")
    assert result == {"negotiated": "pass", "forgotten": True, "status": 0}, result


def test_a_target_with_more_kernels_than_trampolines_is_refused_loudly(proxy_env, tmp_path: Path):
    """Built with a limit of 10 kernels, the proxy refuses the CPU backend's
    625 registrations by name instead of wrapping some of them."""
    import chipdock

    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    library = Path(proxy_env["CHIPDOCK_PLUGIN_PATH"]).parent / mc.PROXY_FILE
    subprocess.run(
        [compiler, "-std=c99", "-shared", "-fPIC", "-fvisibility=hidden", "-DMUTANT_MAX_KERNELS=10",
         f"-I{chipdock.include_dir()}", str(REPO / "conformance" / "mutation" / "mutant_proxy.c"),
         "-o", str(library), "-ldl", "-lpthread"],
        check=True,
    )  # fmt: skip
    result = run_child(proxy_env, REFUSAL)
    assert result["status"] == "refused", result
    assert "mutant-cpu" in result["reason"] and "than the 10 the proxy wraps" in result["reason"], result["reason"]
