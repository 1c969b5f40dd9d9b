"""The long fuzz profile: N calls drawn from the opset spec, counts per outcome and per op.

    python bench/fuzz.py --calls 100000 --seed 1 [--ops add,tile] [--device cpu:0] [--timeout 30]

Calls are drawn by hypothesis (chipdock_conformance.fuzz_strategies) from the seed and run in a
worker process (chipdock_conformance.fuzz), so a crash or a hang is counted and the run goes on.
Prints the counts per outcome, the ops with bad outcomes, and a repro for the first few of each
outcome; exits 1 when any call crashed, hung, gave a wrong result or raised an unclean error.
The quick profile of the same fuzzer runs in CI: conformance/tests/test_fuzz.py.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from collections import Counter

from hypothesis import HealthCheck, Phase, given, seed, settings

from chipdock_conformance.fuzz import BAD, OUTCOMES, Fuzzer, Tally, label, repro
from chipdock_conformance.fuzz_strategies import any_call


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", type=int, default=10000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ops", default="", help="comma-separated op names (default: every op of the spec)")
    p.add_argument("--device", default="cpu:0")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds before a call counts as a hang")
    p.add_argument("--show", type=int, default=3, help="repros printed per outcome")
    p.add_argument("--save", default="", help="write every bad call and its outcome to this file (pickle)")
    args = p.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o] or None
    tally = Tally(max_examples=10**9)
    start = time.monotonic()
    with Fuzzer(args.device, timeout=args.timeout) as fuzzer:

        @seed(args.seed)
        @settings(max_examples=args.calls, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(any_call(ops))
        def one(call: dict) -> None:
            tally.add(call, fuzzer.run(call))
            if tally.calls % 5000 == 0:
                print(f"... {tally.summary()} ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)

        one()
    print(f"seed {args.seed}, device {args.device}: {tally.summary()} in {time.monotonic() - start:.0f} s")
    per_op: dict[str, Counter[str]] = {}
    for (name, kind), n in tally.per_op.items():
        per_op.setdefault(name, Counter())[kind] = n
    print(f"\n{'op':32s}" + "".join(f"{k:>9s}" for k in OUTCOMES))
    for name in sorted(per_op):
        print(f"{name:32s}" + "".join(f"{per_op[name].get(k, 0):9d}" for k in OUTCOMES))
    shown: Counter[str] = Counter()
    for call, out in tally.examples:
        key = f"{out.kind}/{label(call)}/{out.detail[:60]}"
        if shown[key] or shown[out.kind] >= args.show * 20:
            continue
        shown[key] += 1
        shown[out.kind] += 1
        print(f"\n--- {out.kind} {label(call)}: {out.detail[:400]}\n{repro(call, args.device)}")
    if args.save:
        with open(args.save, "wb") as f:
            pickle.dump([(call, out.kind, out.detail) for call, out in tally.examples], f)
    return 1 if any(tally.counts.get(k) for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
