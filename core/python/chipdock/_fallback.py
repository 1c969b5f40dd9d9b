"""The CPU fallback policy: what happens when a device has no kernel for an op.

- ``error``: raise UnimplementedError naming the backend, op and dtypes;
- ``warn`` (default): run the op on the CPU reference (inputs copied there
  and results copied back), warn once per (device type, op, dtypes), count it;
- ``allow``: the same, silently (still counted).

``deny_ops(device_type, ops)`` forces named ops onto the fallback even when
the device has kernels for them (for a kernel known to be wrong). The
environment sets both at import: ``CHIPDOCK_FALLBACK=error|warn|allow`` and
``CHIPDOCK_DENY_OPS="cuda:conv2d,softmax;npu:topk"``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from . import _C
from .errors import InvalidArgumentError


def set_fallback_policy(policy: str) -> None:
    """Sets the policy: "error", "warn" or "allow"."""
    _C.set_fallback_policy(policy)


def fallback_policy() -> str:
    return _C.fallback_policy()


def deny_ops(device_type: str, ops: Iterable[str]) -> None:
    """Makes ``ops`` on every ``device_type`` device take the CPU fallback (replaces the list)."""
    from . import ops as op_module

    names = list(ops)
    unknown = [n for n in names if not hasattr(op_module, n)]
    if unknown:
        raise InvalidArgumentError.make("core", "deny_ops", f"unknown ops: {', '.join(unknown)}")
    _C.set_denied_ops(device_type, names)


def fallback_report() -> list[dict[str, object]]:
    """Every fallback so far: device type, op, dtypes, count and reason.

    The reason is "declared unsupported: <reason>" when the backend's manifest lists the op (and a dtype of
    the signature, or its coverage label such as "float32-bool"; the first entry that matches wins) under
    ``unsupported``, "the op is denied on <type>" for ``deny_ops``, and "no kernel" otherwise."""
    return list(_C.fallback_records())


def _apply_environment() -> None:
    policy = os.environ.get("CHIPDOCK_FALLBACK")
    if policy:
        set_fallback_policy(policy.strip().lower())
    for entry in filter(None, os.environ.get("CHIPDOCK_DENY_OPS", "").split(";")):
        device_type, _, ops = entry.partition(":")
        deny_ops(device_type.strip(), [op.strip() for op in ops.split(",") if op.strip()])


_apply_environment()
