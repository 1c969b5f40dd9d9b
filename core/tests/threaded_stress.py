"""A threaded stress run of streams, allocations, copies, ops and event joins.

Every thread loops for a fixed time: it creates streams, allocates, copies,
launches ops on one stream and joins them on another through an event, lets a
host callback allocate, drops streams and tensors in random orders, and checks
every result against NumPy. A deadlock trips faulthandler, which prints every
thread's stack and exits with status 1 instead of hanging.

    python core/tests/threaded_stress.py --threads 16 --seconds 60

prints one JSON line: {"threads", "seconds", "iterations", "errors"}.
core/tests/test_thread_safety.py runs it for a bounded time in CI.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys
import threading
import time

import numpy as np

import chipdock
from chipdock import ops


def callback_round_trip(values: np.ndarray) -> float:
    """What a host callback does: allocate, copy and read back, on a stream of
    its own (waiting for a stream that waits for this callback would be a
    cycle of the caller's making)."""
    with chipdock.stream(chipdock.Stream()):
        return float(chipdock.tensor(values).numpy().sum())


def one_round(rng: np.random.Generator, keep: list[chipdock.Tensor]) -> None:
    n = int(rng.integers(1, 1 << 14))
    a = rng.integers(-100, 100, n).astype(np.float32)
    x = chipdock.tensor(a)
    producer, consumer = chipdock.Stream(), chipdock.Stream()
    with chipdock.stream(producer):
        y = ops.mul(x, x)  # a*a on the producer
        x.record_stream(producer)
    joined = producer.record_event(chipdock.Event(enable_timing=False))
    consumer.wait_event(joined)
    allocated: list[float] = []
    with chipdock.stream(consumer):
        z = ops.add(y, x)  # a*a + a on the consumer, after the join
        y.record_stream(consumer)
        x.record_stream(consumer)
        w = chipdock.zeros((n,), chipdock.float32)
        w.copy_(z)
        consumer.add_callback(lambda: allocated.append(callback_round_trip(a[:64])))
    finished = consumer.record_event(chipdock.Event(enable_timing=False))
    chipdock.current_stream().wait_event(finished)  # later reads here follow the consumer
    expected = a * a + a
    # Drop the streams before (or after) the tensors: a freed tensor may hold
    # the last trace of a stream.
    if rng.random() < 0.5:
        del producer
        if rng.random() < 0.5:
            del consumer
    del x, y
    if rng.random() < 0.2:
        keep.append(w)  # a long-lived tensor used on a dropped stream
        if len(keep) > 8:
            keep.pop(0)
    if not np.array_equal(w.numpy(), expected):
        raise AssertionError(f"a*a + a on {n} elements differs from NumPy")
    if not np.array_equal(z.numpy(), expected):
        raise AssertionError(f"the consumer's result on {n} elements differs from NumPy")
    if allocated != [float(a[:64].sum())]:
        raise AssertionError(f"the host callback's allocation gave {allocated}, not [{a[:64].sum()}]")
    if rng.random() < 0.05:
        chipdock.synchronize()
    if rng.random() < 0.02:
        chipdock.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--hang-after", type=float, default=60.0,
                        help="seconds past the end after which the run counts as deadlocked")
    args = parser.parse_args()
    faulthandler.dump_traceback_later(args.seconds + args.hang_after, exit=True)
    stop = time.monotonic() + args.seconds
    iterations = [0] * args.threads
    errors: list[str] = []

    def worker(k: int) -> None:
        rng = np.random.default_rng(args.seed * 1000 + k)
        keep: list[chipdock.Tensor] = []
        try:
            while time.monotonic() < stop:
                one_round(rng, keep)
                iterations[k] += 1
        except Exception as e:  # reported, and the run fails
            errors.append(f"thread {k}: {type(e).__name__}: {e}")

    start = time.monotonic()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    chipdock.synchronize()
    faulthandler.cancel_dump_traceback_later()
    print(json.dumps({"threads": args.threads, "seconds": round(time.monotonic() - start, 1),
                      "iterations": sum(iterations), "errors": errors}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
