"""Small ONNX models on a shared or CPU-limited machine: chipdock's CPU device beside onnxruntime.

Three conditions, each model in a fresh process per configuration (the
settings that matter are read when the OpenMP runtime loads):

- idle: nothing else runs;
- busy: one other process spins on a core the whole time (a neighbour on a
  shared VM, a second job, a compile);
- quota: the process sits in a cgroup limited to 1 CPU (docker --cpus=1), when
  this machine lets us make one (root, cgroup v1 or v2), else skipped.

Configurations: chipdock with its defaults (OpenMP threads wait passively,
OMP_WAIT_POLICY=PASSIVE from the CPU backend's manifest, and as many threads
as the affinity mask and the CPU quota allow), chipdock with
OMP_WAIT_POLICY=ACTIVE (spinning threads: the lowest latency on a machine of
your own), onnxruntime's CPU provider with its default spinning thread pool,
and onnxruntime with spinning off. All with the same intra-op thread count.

    python3 bench/shared_machine.py                 # writes bench/results/shared-machine-cpu.json
    python3 bench/shared_machine.py --models squeezenet --runs 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chipdock._host import cpu_model

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = ["squeezenet", "shufflenet", "inception_v1", "resnet50"]
CONFIGS = {
    "chipdock": {},
    "chipdock OMP_WAIT_POLICY=ACTIVE": {"OMP_WAIT_POLICY": "ACTIVE"},
    "onnxruntime": {},
    "onnxruntime no spinning": {},
}


def light_model(name: str) -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


# --- the worker: one model, one configuration, one process ------------------------------


def worker(config: str, model: Path, threads: int, runs: int, warmup: int) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    if config.startswith("chipdock"):
        import chipdock
        from chipdock.onnx import Session

        session = Session(str(model), device="cpu")
        feeds = {i.name: rng.standard_normal([d or 1 for d in i.shape]).astype(np.float32) for i in session.inputs}

        def once() -> object:
            return session.run(feeds)

        log = [m for _, m in chipdock._C.plugin_log() if "OpenMP threads" in m]
    else:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        if config.endswith("no spinning"):
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        feeds = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
                 for i in session.get_inputs()}

        def once() -> object:
            return session.run(None, feeds)

        log = []
    for _ in range(warmup):
        once()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        once()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return {"p50_ms": statistics.median(times), "p90_ms": times[int(0.9 * (len(times) - 1))], "log": log}


# --- conditions ---------------------------------------------------------------------------


@contextmanager
def busy_neighbour(active: bool):
    """One other process spinning on a core while the block runs."""
    if not active:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        proc.kill()
        proc.wait()


def make_quota_cgroup(cpus: float) -> tuple[Path | None, str]:
    """A cgroup limited to `cpus` CPUs, and how (or why not)."""
    period = 100000
    for root, quota_file, value in ((Path("/sys/fs/cgroup"), "cpu.max", f"{int(cpus * period)} {period}"),
                                    (Path("/sys/fs/cgroup/cpu"), "cpu.cfs_quota_us", str(int(cpus * period)))):
        if not (root / quota_file).exists() and not (root / "cgroup.procs").exists():
            continue
        group = root / f"chipdock_bench_{os.getpid()}"
        try:
            group.mkdir(exist_ok=True)
            (group / quota_file).write_text(value)
            return group, f"{group}/{quota_file} = {value}"
        except OSError as exc:
            reason = f"{group}: {exc}"
            try:
                group.rmdir()
            except OSError:
                pass
            continue
    return None, reason if "reason" in locals() else "no writable cgroup cpu controller"


def run_config(config: str, model: Path, args: argparse.Namespace, cgroup: Path | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
    env.update(CONFIGS[config])
    cmd = [sys.executable, __file__, "--worker", config, "--model", str(model), "--threads", str(args.threads),
           "--runs", str(args.runs), "--warmup", str(args.warmup)]
    if cgroup is not None:  # the child joins the cgroup before Python starts its work
        cmd = ["sh", "-c", f'echo $$ > "{cgroup}/cgroup.procs" && exec "$@"', "sh", *cmd]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=MODELS)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "shared-machine-cpu.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.threads, args.runs, args.warmup)))
        return 0

    cgroup, quota_note = make_quota_cgroup(1.0)
    conditions = [("idle", False, None), ("busy", True, None)]
    if cgroup is not None:
        conditions.append(("quota 1 CPU", False, cgroup))
    results: list[dict[str, Any]] = []
    try:
        for label, busy, group in conditions:
            with busy_neighbour(busy):
                for name in args.models:
                    for config in CONFIGS:
                        r = run_config(config, light_model(name), args, group)
                        results.append({"condition": label, "model": name, "config": config, **r})
                        shown = f"{r['p50_ms']:8.2f} ms p50  {r['p90_ms']:8.2f} ms p90" if "p50_ms" in r else r["error"]
                        print(f"{label:12s} {name:13s} {config:33s} {shown}", flush=True)
    finally:
        if cgroup is not None:
            cgroup.rmdir()
    meta = {"cpu": cpu_model(), "cpus": os.cpu_count(), "threads": args.threads, "runs": args.runs,
            "quota": quota_note, "python": sys.version.split()[0]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
