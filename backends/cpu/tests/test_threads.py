"""The kernels' thread count under a CPU quota (kernels/threads.h).

OpenMP knows OMP_NUM_THREADS and the affinity mask, not a cgroup's CPU
quota; the backend reads the quota itself. These cases point it at a fake
cgroup file system (CHIPDOCK_CPU_CGROUP_ROOT) and read the choice from the
plugin log, then check a threaded kernel still gives the right answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = r"""
import json, numpy as np, chipdock as cd
from chipdock import ops
x = np.ones(1 << 22, dtype=np.float32)
total = float(ops.sum(cd.tensor(x)).numpy())
log = [m for _, m in cd._C.plugin_log() if "OpenMP threads" in m]
print(json.dumps({"log": log[0], "sum": total}))
"""


def probe(root: Path | None, **env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "CHIPDOCK_CPU_CGROUP_ROOT")}
    if root is not None:
        full["CHIPDOCK_CPU_CGROUP_ROOT"] = str(root)
    full.update(env)
    done = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def own_cgroup_v2() -> str | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def fake_v2(tmp_path: Path, cpu_max: str) -> Path:
    own = own_cgroup_v2()
    if own is None:
        pytest.skip("no cgroup v2 line in /proc/self/cgroup")
    folder = tmp_path / own.lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cpu.max").write_text(cpu_max + "\n")
    return tmp_path


EXPECTED_SUM = float(1 << 22)  # exact in float32 in any summation order


def test_a_quota_of_one_cpu_means_one_thread(tmp_path):
    r = probe(fake_v2(tmp_path, "100000 100000"))
    assert "kernels use up to 1 OpenMP threads" in r["log"] and "cpu.max 100000/100000: 1 CPU" in r["log"], r["log"]
    assert r["sum"] == EXPECTED_SUM


def test_a_fractional_quota_rounds_up(tmp_path):
    r = probe(fake_v2(tmp_path, "50000 100000"))
    assert "1 CPU" in r["log"], r["log"]


def test_no_quota_leaves_openmp_alone(tmp_path):
    r = probe(fake_v2(tmp_path, "max 100000"))
    assert "cgroup" not in r["log"], r["log"]
    assert f"up to {min(os.cpu_count() or 1, len(os.sched_getaffinity(0)))} OpenMP threads" in r["log"], r["log"]


def test_omp_num_threads_below_the_quota_wins(tmp_path):
    r = probe(fake_v2(tmp_path, "400000 100000"), OMP_NUM_THREADS="1")
    assert "up to 1 OpenMP threads (OMP_NUM_THREADS=1" in r["log"], r["log"]
    assert r["sum"] == EXPECTED_SUM
