"""``chipdock doctor``: what is installed, what each backend was built against, and why it was accepted or refused.

Every plugin is first probed alone in a child process (``python -c`` loading just that plugin through the core),
so one that crashes (a segfault, an abort, an ``exit()``) or hangs in its entry is named with what happened while
every other backend is still reported. Only the plugins whose probe came back are then loaded in this process, the
way ``import chipdock`` loads them, which decides what a probe alone cannot: which of two backends claiming one
device type wins.

The report is a JSON-able dict (``collect``); ``chipdock doctor`` prints it (cli.py) or dumps it (``--json``).
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from . import _C, _discovery, _runtime
from ._opset import opset_version

#: Seconds a probe may take before its plugin counts as hung (``chipdock doctor --timeout``).
DEFAULT_PROBE_TIMEOUT = 30.0
_MARK = "@@chipdock-doctor-probe@@ "
_STDERR_TAIL = 600  # characters of a failed probe's stderr kept in the report

_STAGE = "@@chipdock-doctor-stage@@ "

# The child: loads the one plugin through the core (discovery's checks, the manifest's environment, the core's
# loader), then prints what it learned on one marked line. Before each step it says which step it is in (flushed, so
# the parent has it even after a crash): the library is opened first on its own (ctypes, with the core's flags, only
# after discovery accepted its manifest), so that a crash in its constructors is told from one in its entry; the
# core's own dlopen then gets the same handle. What the plugin wrote to stderr before it died (an assertion's message
# before its abort) is the last stderr line the report quotes.
PROBE_CODE = f"""
import ctypes, json, os, sys
from pathlib import Path

def stage(name):
    sys.stdout.write("\\n{_STAGE}" + name + "\\n")
    sys.stdout.flush()

stage("import")
from chipdock import _C, _discovery, _runtime
cand = _discovery.Candidate(sys.argv[2], Path(sys.argv[1]), label=sys.argv[3])
try:
    manifest = _discovery.read_manifest(cand.manifest_path, _C.ABI_VERSION[0])
except Exception:
    manifest = None  # refused before any library is opened: _load_one says why
if manifest is not None:
    _runtime._apply_environment(manifest["environment"])
    stage("dlopen")
    try:
        ctypes.CDLL(manifest["library_path"], mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError:
        pass  # the core's dlopen fails the same way and says so
stage("entry")
info = _runtime._load_one_confined(cand)
stage("report")
devices = []
for dev in _C.devices():
    try:
        devices.append({{"device": str(dev), **dev.properties()}})
    except Exception as exc:
        devices.append({{"device": str(dev), "error": f"{{type(exc).__name__}}: {{exc}}"}})
log = [{{"level": level, "message": message}} for level, message in _C.plugin_log()]
sys.stdout.write("\\n{_MARK}" + json.dumps({{"info": info.as_dict(), "devices": devices, "log": log}}) + "\\n")
sys.stdout.flush()
os._exit(0)  # the plugin is not shut down: the probe is about loading it
"""

#: Where a probe was when it crashed or hung (the last stage it announced).
STAGES = {
    "import": "while the child imported chipdock (before the plugin was touched)",
    "dlopen": "in dlopen of its library (its constructors or those of the libraries it links)",
    "entry": "in chipdock_plugin_entry or the calls the core makes right after it (device_get_count, "
             "device_get_properties, kernels_register)",
    "report": "after it loaded, while its devices were described",
}


@dataclass
class Probe:
    """How one plugin's probe in a child process went."""

    manifest_path: str
    outcome: str  # "loaded" (the child came back; the plugin may still be refused), "crashed", "hung", "failed"
    detail: str = ""
    seconds: float = 0.0
    exit_status: int | None = None
    signal: str = ""
    stage: str = ""  # the last step the child announced: import, dlopen, entry, report (STAGES)
    stderr_tail: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    devices: list[dict[str, Any]] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("info", "devices", "log"):
            out.pop(key)
        return out


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def probe(cand: _discovery.Candidate, timeout: float) -> Probe:
    """Loads `cand` alone in a child process, killed (with everything it started) after `timeout` seconds."""
    path = str(cand.manifest_path)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE_CODE, path, cand.source, cand.label], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    seconds = time.monotonic() - start
    text_err = err.decode("utf-8", "replace")
    result = Probe(path, "loaded", seconds=round(seconds, 3), exit_status=proc.returncode,
                   stderr_tail=text_err[-_STDERR_TAIL:].strip())
    lines = out.decode("utf-8", "replace").splitlines()
    stages = [line[len(_STAGE):].strip() for line in lines if line.startswith(_STAGE)]
    result.stage = stages[-1] if stages else ""
    where = STAGES.get(result.stage, "before the child started")
    marked = [line for line in lines if line.startswith(_MARK)]
    if marked:
        try:
            data = json.loads(marked[-1][len(_MARK):])
            result.info, result.devices, result.log = data["info"], data["devices"], data["log"]
            result.stderr_tail = ""
            return result  # it came back: whatever happened after its answer is not the entry's doing
        except (ValueError, KeyError):
            pass
    if hung:
        result.outcome = "hung"
        result.detail = (f"hung {where}: loading it did not finish within {timeout:g} s in a child process, "
                         "which was killed (chipdock doctor --timeout SECONDS allows longer)")
    elif proc.returncode is not None and proc.returncode < 0:
        result.outcome, result.signal = "crashed", _signal_name(-proc.returncode)
        result.detail = (f"crashed with {result.signal} (signal {-proc.returncode}) {where}, in a child process "
                         "loading it alone")
    else:
        result.outcome = "failed"
        result.detail = (f"the child process loading it exited with status {proc.returncode} without an answer "
                         f"{where} (an exit() in the plugin, or a broken installation)")
    last = [line for line in result.stderr_tail.splitlines() if line.strip()][-1:]
    if last and result.outcome != "hung":
        result.detail += f"; its last words on stderr: {last[0].strip()}"
    return result


def probe_all(cands: list[_discovery.Candidate], timeout: float) -> dict[str, Probe]:
    """Probes of every candidate that has a manifest, side by side; keyed by manifest path."""
    todo = [c for c in cands if not c.error and c.manifest_path is not None]
    results: dict[str, Probe] = {}
    lock = threading.Lock()

    def one(cand: _discovery.Candidate) -> None:
        try:
            result = probe(cand, timeout)
        except OSError as exc:  # the interpreter could not be started
            result = Probe(str(cand.manifest_path), "failed", f"the probe could not start: {exc}")
        with lock:
            results[str(cand.manifest_path)] = result

    if todo:
        with ThreadPoolExecutor(max_workers=min(8, len(todo))) as pool:
            list(pool.map(one, todo))
    return results


# --------------------------------------------------------------- comparisons --


def _declared(value: dict[str, Any], version_key: str) -> str:
    return " ".join(str(v) for v in (value.get("name"), value.get(version_key)) if v)


def _found_versions(devices: list[dict[str, Any]], key: str) -> list[str]:
    found: list[str] = []
    for dev in devices:
        value = dev.get(key) or ""
        if value and value not in found:
            found.append(value)
    return found


def _release_in(text: str) -> tuple[int, ...] | None:
    """The first dotted number in `text` ("CANN 8.0.RC1" -> (8,)... "535.104.05" -> (535, 104, 5))."""
    for word in text.replace("(", " ").split():
        found = _discovery.release(word)
        if found is not None:
            return found
    return None


def runtime_check(backend: dict[str, Any], devices: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The vendor runtime and driver the manifest declares against what the backend's devices report."""
    out: dict[str, dict[str, str]] = {}
    no_devices = backend.get("device_error") or "the backend reports no devices"
    for what, key, version_key, found_key in (("runtime", "vendor_runtime", "version", "runtime_version"),
                                              ("driver", "driver", "min_version", "driver_version")):
        declared = _declared(backend.get(key) or {}, version_key)
        found = _found_versions(devices, found_key)
        entry = {"declared": declared or "(not declared)", "found": "; ".join(found)}
        wanted = (backend.get(key) or {}).get(version_key) or ""
        if not declared:
            entry["verdict"] = "nothing declared"
        elif backend.get("status") != "accepted":
            entry["verdict"] = "not loaded"
        elif not devices:
            entry["verdict"] = f"no devices: {no_devices}"
        elif not found:
            entry["verdict"] = "the devices do not report one"
        elif not wanted:
            entry["verdict"] = "no version declared to compare with"
        else:
            want, have = _release_in(wanted), [_release_in(f) for f in found]
            if want is None or any(h is None for h in have):
                entry["verdict"] = "not comparable (the backend itself checks it)"
            elif what == "driver":
                old = [f for f, h in zip(found, have, strict=True) if h is not None and h < want]
                entry["verdict"] = f"too old: {old[0]} is below the minimum {wanted}" if old else \
                    f"ok (at least {wanted})"
            else:
                same = all(h is not None and h[:len(want)] == want for h in have)
                entry["verdict"] = "matches" if same else \
                    f"differs: built against {wanted}, the devices report {'; '.join(found)}"
        out[what] = entry
    return out


def device_type_claims(backends: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every device type more than one backend claims, in discovery order, with the one the core took and why."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for b in backends:
        if b.get("device_type"):
            by_type.setdefault(b["device_type"], []).append(b)
    out = []
    for device_type, claims in by_type.items():
        if len(claims) < 2:
            continue
        winner = next((b for b in claims if b["status"] == "accepted"), None)
        names = ", ".join(f"{b['name']} ({b['manifest_path']})" for b in claims)
        if winner is None:
            why = "none of them loaded"
        else:
            earlier = claims[:claims.index(winner)]
            why = (f"{winner['name']} ({winner['manifest_path']}) won: the core takes the first backend of a device "
                   "type that loads, in discovery order (CHIPDOCK_PLUGIN_PATH entries in order, then entry points)")
            if earlier:
                why += "; before it, " + ", ".join(f"{b['name']} ({b['manifest_path']}) was refused: {b['reason']}"
                                                   for b in earlier)
            why += "; the later ones are refused"
        out.append({"device_type": device_type, "claimed_by": [b["manifest_path"] for b in claims],
                    "winner": winner["manifest_path"] if winner else "", "explanation":
                    f"device type '{device_type}' is claimed by {len(claims)} backends: {names}; {why}"})
    return out


def _built_against(b: dict[str, Any], core_version: str, core_opset: int) -> dict[str, str]:
    core = b.get("core_version") or ""
    opset = b.get("opset_version", 1)
    return {
        "core": core or "unknown (the manifest predates the field)",
        "abi": b.get("abi_version") or "?",
        "opset": str(opset) if b.get("opset_declared") else f"{opset} (assumed: the manifest predates the field)",
        "installed": f"core {core_version}, ABI {'{}.{}'.format(*_C.ABI_VERSION)}, opset {core_opset}",
    }


# ------------------------------------------------------------------- report --


def collect(timeout: float = DEFAULT_PROBE_TIMEOUT) -> dict[str, Any]:
    """Probes every plugin in a child process, loads those that came back, and returns the report."""
    from . import _check

    cands = _discovery.candidates()
    probes = probe_all(cands, timeout)
    if _runtime._backends is None:  # else this process loaded them already (doctor called from a session)
        _runtime.skip_plugins({path: p.detail for path, p in probes.items() if p.outcome != "loaded"})
    infos = _runtime.backends()
    devices = _runtime.devices()
    runtimes = _check.device_runtimes(devices)
    core_version, core_opset = _C.__version__, opset_version()
    device_dicts = [{"device": str(d), **d.properties()} for d in devices]
    # Loading makes one BackendInfo per candidate, in the candidates' order.
    paths = [str(c.manifest_path) if c.manifest_path else "" for c in cands] if len(cands) == len(infos) else []
    backends = []
    for i, info in enumerate(infos):
        b = {**info.as_dict(), "runtime": runtimes.get(info.name, "")}
        p = probes.get(paths[i] if paths else b["manifest_path"])
        b["probe"] = p.summary() if p else {"outcome": "not probed", "detail": "refused before any library was opened"}
        mine = [d for d in device_dicts if d["device"].split(":")[0] == b["device_type"]] if info.accepted else []
        b["built_against"] = _built_against(b, core_version, core_opset)
        b["runtime_check"] = runtime_check(b, mine)
        backends.append(b)
    claims = device_type_claims(backends)
    problems = []
    for b in backends:
        if b["probe"]["outcome"] in ("crashed", "hung", "failed"):
            problems.append(f"{b['name']} ({b['manifest_path']}): {b['probe']['detail']}")
        elif b["status"] != "accepted":
            problems.append(f"{b['name']} ({b['manifest_path'] or b['source']}): refused: {b['reason']}")
        problems += [f"{b['name']}: {w}" for w in b["warnings"]]
        if b["status"] == "accepted" and not b["opset_declared"] and core_opset > 1:
            problems.append(f"{b['name']}: its manifest records no opset version: treated as opset 1, so attributes "
                            "added since are never handed to its kernels (rebuild it with this kit)")
    problems += [c["explanation"] for c in claims]
    from .cli import ENV_VARS

    return {
        "core_version": core_version,
        "abi_version": "{}.{}".format(*_C.ABI_VERSION),
        "opset_version": core_opset,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cmake_dir": _runtime.cmake_dir(),
        "environment": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "probe_timeout_s": timeout,
        "backends": backends,
        "device_type_claims": claims,
        "devices": device_dicts,
        "plugin_log": [{"level": lvl, "message": msg} for lvl, msg in _C.plugin_log()],
        "problems": problems,
    }
