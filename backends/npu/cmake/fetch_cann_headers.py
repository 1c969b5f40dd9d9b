"""Fetches the AscendCL and HCCL headers from the pinned torch-npu wheel into a build folder.

CANN's headers are licensed (CANN Open Software License Agreement 2.0) and are never committed: the build downloads
the torch-npu wheel from PyPI (pip download, no dependencies, binary only), checks its sha256 against the pin and
unpacks only torch_npu/include/{acl,third_party/hccl} into <dest>/include. A wheel already on disk (--wheel, or one
left in <dest> by an earlier build) is used without downloading.

usage: fetch_cann_headers.py --version V --sha256 H --dest DIR [--wheel PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

# The wheel's headers are the same on every platform tag; this one is fetched wherever the build runs.
PLATFORM, PYTHON = "manylinux_2_28_x86_64", "311"
KEEP = ("torch_npu/include/acl/", "torch_npu/include/third_party/hccl/")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(version: str, dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform", PLATFORM,
           "--python-version", PYTHON, "--implementation", "cp", "-d", str(dest), f"torch-npu=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"chipdock-npu: could not download torch-npu=={version} for its CANN headers:\n{proc.stderr}")
    found = sorted(dest.glob(f"torch_npu-{version}-*.whl"))
    if not found:
        sys.exit(f"chipdock-npu: pip download left no torch_npu-{version} wheel in {dest}")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", required=True)
    parser.add_argument("--sha256", required=True)
    parser.add_argument("--dest", required=True, type=Path)
    parser.add_argument("--wheel", type=Path)
    args = parser.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    stamp = args.dest / "include" / ".torch-npu-version"
    if stamp.is_file() and stamp.read_text().strip() == f"{args.version} {args.sha256}":
        return
    wheel = args.wheel or next(iter(sorted(args.dest.glob(f"torch_npu-{args.version}-*.whl"))), None)
    if wheel is None:
        wheel = download(args.version, args.dest)
    actual = sha256(wheel)
    if actual != args.sha256:
        sys.exit(f"chipdock-npu: {wheel} has sha256 {actual}, the pin says {args.sha256}")
    with zipfile.ZipFile(wheel) as z:
        members = [n for n in z.namelist() if n.startswith(KEEP) and not n.endswith("/")]
        for name in members:
            target = args.dest / "include" / name[len("torch_npu/include/"):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
    stamp.write_text(f"{args.version} {args.sha256}\n")


if __name__ == "__main__":
    main()
