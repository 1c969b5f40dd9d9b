"""Smoke test of installed chipdock wheels: `chipdock check`, then a tiny op on each device named.

usage: python wheel_smoke.py [--backend NAME ...] DEVICE [DEVICE ...]
       python wheel_smoke.py --load PACKAGE      (a backend wheel alone, before any core wheel exists)

Run by .ci/wheels in a fresh venv holding only the repaired wheels (and their declared dependencies), and by
cibuildwheel's test-command (pyproject.toml, [tool.cibuildwheel]). It fails, naming what is wrong, unless

- `chipdock check --json` passes on every device (its own smoke test: memory, copies, streams, events);
- each backend named (--backend, default: the backend of each device) is accepted and loaded from this environment's
  site-packages, not from a source tree or CHIPDOCK_PLUGIN_PATH;
- add and matmul on each device give NumPy's result (matmul on cpu:0 runs on oneDNN);
- a CUDA library is mapped only from this environment's NVIDIA wheels;
- every library a backend wheel grafted (its `<package>.libs/` folder, auditwheel's) that the process has mapped is
  the wheel's own copy, not the build machine's.

--load only opens the plug-in library a backend package's manifest names (every library it links, grafted ones
included, must resolve) and looks up its entry symbol; cibuildwheel tests chipdock-cpu that way, as it is built before
the core that the full test needs.

Select the npu test double first where wanted: CHIPDOCK_NPU_RUNTIME=test-double.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path


def fail(message: str) -> None:
    sys.exit(f"wheel smoke test: {message}")


def check_installation(backends: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "chipdock.cli", "check", "--json"], capture_output=True, text=True)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        fail(f"chipdock check --json printed no JSON (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    by_name = {b["name"]: b for b in report["backends"]}
    for name in backends:
        backend = by_name.get(name)
        if backend is None:
            fail(f"backend {name!r} not found; chipdock check found {sorted(by_name)}")
        if backend["status"] != "accepted":
            fail(f"backend {name!r} was refused: {backend['reason']}")
        library = Path(backend["library_path"]).resolve()
        if site not in library.parents:
            fail(f"backend {name!r} was loaded from {library}, not from this environment's {site}")
        print(f"backend {name} {backend['version']} (ABI {backend['abi_version']}): {backend['device_count']} devices, "
              f"{backend['kernel_count']} kernels, from {library.relative_to(site)}")
    if proc.returncode != 0 or not report["ok"]:
        failed = [f"{d['device']}: {s['name']}: {s['detail']}" for d in report["devices"] for s in d["steps"]
                  if not s["ok"]]
        fail("chipdock check failed: " + ("; ".join(failed) or "no device found"))
    print(f"chipdock check: {len(report['devices'])} devices passed (core {report['core_version']})")


def run_ops(device: str) -> None:
    import numpy as np

    import chipdock

    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, 64)).astype(np.float32)
    b = rng.standard_normal((64, 32)).astype(np.float32)
    ta, tb = chipdock.tensor(a, device=device), chipdock.tensor(b, device=device)
    added = chipdock.ops.add(ta, ta).numpy()
    if not np.array_equal(added, a + a):
        fail(f"add on {device} differs from NumPy")
    product = chipdock.ops.matmul(ta, tb).numpy()
    if not np.allclose(product, a @ b, rtol=1e-4, atol=1e-4):
        fail(f"matmul on {device} differs from NumPy by {np.abs(product - a @ b).max()}")
    print(f"{device}: add and matmul match NumPy")


def _stem(name: str) -> str:
    """libdnnl-3a6f0c1e.so.2.6 (auditwheel's grafted name) and libdnnl.so.2 both give libdnnl."""
    return re.sub(r"-[0-9a-f]{8}$", "", name.split(".so")[0])


def check_grafted_libraries() -> None:
    """A library that a wheel grafted (into a <package>.libs/ folder) must be mapped from such a folder only: the
    build machine's copy (Debian's oneDNN, say) loaded beside it would mean the wheel does not stand on its own."""
    site = Path(sysconfig.get_paths()["platlib"]).resolve()
    folders = sorted(site.glob("*.libs"))
    grafted = {_stem(p.name) for libs in folders for p in libs.iterdir()}
    mapped = {Path(line.split()[-1]).resolve() for line in Path("/proc/self/maps").read_text().splitlines()
              if line.split() and line.split()[-1].startswith("/")}
    used = []
    for path in sorted(mapped):
        if _stem(path.name) not in grafted or ".so" not in path.name:
            continue
        if path.parent not in folders:
            fail(f"{path} is mapped, but a wheel grafted its own {_stem(path.name)} into {[str(f) for f in folders]}")
        if path.parent.name.startswith("chipdock"):
            used.append(f"{path.parent.name}/{path.name}")
    print(f"grafted libraries of chipdock wheels in use: {', '.join(used) or 'none'}")


def load_plugin(package: str) -> None:
    import ctypes
    import importlib

    module = importlib.import_module(package)
    manifest = Path(module.manifest_path())
    library = manifest.parent / json.loads(manifest.read_text())["library"]
    try:
        handle = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        fail(f"{package}: {library} does not load: {e}")
    if not hasattr(handle, "chipdock_plugin_entry"):
        fail(f"{package}: {library} does not export chipdock_plugin_entry")
    print(f"{package}: {library.name} loads and exports chipdock_plugin_entry")


# Libraries that come from vendor wheels (chipdock-cuda requires NVIDIA's): mapped from this environment, else not at
# all; never from a toolkit on the machine, which would mean the excluded soname resolved outside the wheels.
VENDOR_WHEEL_LIBRARIES = ("libcudart.so*", "libcublas.so*", "libcublasLt.so*", "libnccl.so*")


def check_vendor_wheel_libraries() -> None:
    import fnmatch

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = Path(line.split()[-1]) if line.split() else Path()
        if any(fnmatch.fnmatch(path.name, p) for p in VENDOR_WHEEL_LIBRARIES):
            if site not in path.resolve().parents:
                fail(f"{path} is mapped from outside this environment's vendor wheels ({site})")
            print(f"vendor library from its wheel: {path.resolve().relative_to(site)}")
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("devices", nargs="*", metavar="DEVICE")
    parser.add_argument("--backend", action="append", default=[], help="a backend that must be accepted")
    parser.add_argument("--load", metavar="PACKAGE", help="only open this backend package's plug-in library")
    args = parser.parse_args()
    if args.load:
        load_plugin(args.load)
        check_grafted_libraries()
        return
    if not args.devices:
        parser.error("name at least one device (or --load PACKAGE)")
    check_installation(args.backend or sorted({d.split(":")[0] for d in args.devices}))
    for device in args.devices:
        run_ops(device)
    check_grafted_libraries()
    check_vendor_wheel_libraries()


if __name__ == "__main__":
    main()
