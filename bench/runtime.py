"""Runtime benchmark: ABI call cost through the core, and copy bandwidth.

    python3 bench/runtime.py [--device cpu:0] [--max-size 256M] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import chipdock  # noqa: E402

from _timing import best_of, human, median_of, parse_size  # noqa: E402

CALLS = 20_000


def abi_call_costs(dev: chipdock.Device) -> list[dict]:
    """ns per call, from Python (the binding included) and from C++ (core only)."""
    stream = chipdock.Stream(dev)
    event = chipdock.Event(dev, enable_timing=False)
    rows = []

    def record_query() -> None:
        event.record(stream)
        event.query()

    def noop() -> None:
        pass

    def callbacks() -> None:
        for _ in range(1000):
            stream.add_callback(noop)
        stream.synchronize()

    with chipdock.stream(stream):
        py_rq = best_of(record_query, repeat=5, number=CALLS) * 1e9
        py_cb = best_of(callbacks, repeat=5) / 1000 * 1e9
        py_sq = best_of(stream.query, repeat=5, number=CALLS) * 1e9
        cpp_rq = min(dev._native_call_cost("event_record_query", CALLS) for _ in range(5))
        cpp_cb = min(dev._native_call_cost("host_callback", CALLS) for _ in range(5))
        cpp_sq = min(dev._native_call_cost("stream_query", CALLS) for _ in range(5))
    rows.append({"call": "event_record + event_query", "python_ns": py_rq, "cpp_ns": cpp_rq})
    rows.append({"call": "stream_add_host_callback (empty, incl. run)", "python_ns": py_cb, "cpp_ns": cpp_cb})
    rows.append({"call": "stream_query", "python_ns": py_sq, "cpp_ns": cpp_sq})
    stream.destroy()
    return rows


def copy_bandwidth(dev: chipdock.Device, max_size: int, repeat: int) -> list[dict]:
    """GB/s of host->device and device->host copies beside numpy.copyto."""
    rows = []
    size = 1 << 10
    rng = np.random.default_rng(0)
    while size <= max_size:
        host_src = rng.integers(0, 256, size, dtype=np.uint8)
        host_dst = np.empty_like(host_src)
        dev_buf = chipdock.empty((size,), chipdock.uint8, dev)
        number = max(1, min(2000, (64 << 20) // size))
        pinned = chipdock.pinned_empty((size,), chipdock.uint8, dev)
        pinned[:] = host_src

        def pinned_h2d(pinned=pinned, dev_buf=dev_buf) -> None:
            dev_buf.copy_(pinned, non_blocking=True)

        def pinned_batch(number=number) -> None:
            for _ in range(number):
                pinned_h2d()
            chipdock.synchronize(dev)

        h2d = median_of(partial(dev_buf.copy_, host_src), repeat, number)
        h2d_pinned = median_of(pinned_batch, repeat) / number
        d2h = median_of(partial(dev_buf.numpy, out=host_dst), repeat, number)
        ref = median_of(partial(np.copyto, host_dst, host_src), repeat, number)
        assert np.array_equal(host_dst, host_src)
        rows.append({
            "bytes": size, "h2d_gbps": size / h2d / 1e9, "h2d_pinned_async_gbps": size / h2d_pinned / 1e9,
            "d2h_gbps": size / d2h / 1e9,
            "numpy_copyto_gbps": size / ref / 1e9, "h2d_vs_numpy": ref / h2d, "d2h_vs_numpy": ref / d2h,
        })
        del dev_buf, pinned
        size *= 4
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu:0")
    parser.add_argument("--max-size", default="256M")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", default=None, help="output file (default bench/results/runtime-<type>.json)")
    args = parser.parse_args()

    dev = chipdock.device(args.device)
    calls = abi_call_costs(dev)
    copies = copy_bandwidth(dev, parse_size(args.max_size), args.repeat)
    report = {
        "device": str(dev), "device_name": dev.name, "core_version": chipdock.__version__,
        "numpy_version": np.__version__, "machine": platform.machine(), "cpus": os.cpu_count(),
        "strict_mode": os.environ.get("CHIPDOCK_CPU_STRICT", "0"), "abi_calls": calls, "copies": copies,
    }

    print(f"chipdock {chipdock.__version__} on {dev} ({dev.name}), strict={report['strict_mode']}")
    print(f"\n{'ABI call through the core':48} {'Python ns':>10} {'C++ ns':>10}")
    for row in calls:
        print(f"{row['call']:48} {row['python_ns']:10.0f} {row['cpp_ns']:10.0f}")
    print(f"\n{'size':>9} {'H2D GB/s':>9} {'H2D pinned async':>17} {'D2H GB/s':>9} {'copyto GB/s':>12} "
          f"{'H2D/np':>7} {'D2H/np':>7}")
    for row in copies:
        print(f"{human(row['bytes']):>9} {row['h2d_gbps']:9.2f} {row['h2d_pinned_async_gbps']:17.2f} "
              f"{row['d2h_gbps']:9.2f} "
              f"{row['numpy_copyto_gbps']:12.2f} {row['h2d_vs_numpy']:7.2f} {row['d2h_vs_numpy']:7.2f}")

    out = Path(args.json) if args.json else Path(__file__).parent / "results" / f"runtime-{dev.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
