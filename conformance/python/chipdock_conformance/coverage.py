"""Coverage: the ops and dtypes a backend lacks, measured against the CPU reference's registry.

Every kernel signature the reference (``cpu``) registers that the device's
backend does not is either *declared* unsupported, when the backend's
manifest lists the op (and the dtype) under ``unsupported`` with a reason
(device_api/docs/manifest.md), or *missing*. View ops (``view: true`` in the
spec) have no kernels and are never counted.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Gap:
    """One op whose signatures (with their dtype labels) the device lacks."""

    op: str
    dtypes: list[str]
    reason: str = ""  # the manifest's reason, for declared gaps

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, "dtypes": self.dtypes, "reason": self.reason}


@dataclass
class Coverage:
    device: str
    reference: str
    registered: int = 0  # signatures of the reference that the device registers too
    total: int = 0  # signatures of the reference
    declared: list[Gap] = field(default_factory=list)
    missing: list[Gap] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"device": self.device, "reference": self.reference, "registered": self.registered,
                "total": self.total, "declared_unsupported": [g.as_dict() for g in self.declared],
                "missing": [g.as_dict() for g in self.missing]}


def _signatures(device_type: str) -> dict[str, set[tuple[int, ...]]]:
    import chipdock
    from chipdock import _C

    chipdock.devices()  # loads the plugins
    out: dict[str, set[tuple[int, ...]]] = defaultdict(set)
    for op, codes in _C.kernels(device_type):
        out[op].add(tuple(codes))
    return out


def _label(codes: tuple[int, ...]) -> str:
    """A signature as dtype names, repeats dropped: (float32, float32, float32) -> "float32"."""
    from chipdock._dtypes import BY_CODE

    names: list[str] = []
    for c in codes:
        name = BY_CODE[c].name
        if name not in names:
            names.append(name)
    return "-".join(names)


def declared_unsupported(device_type: str) -> list[dict[str, Any]]:
    """The ``unsupported`` entries of the manifest of the backend providing ``device_type``."""
    import chipdock
    from chipdock import _C, _discovery

    for info in chipdock.backends():
        if info.accepted and info.device_type == device_type and info.manifest_path:
            return list(_discovery.read_manifest(Path(info.manifest_path), _C.ABI_VERSION[0])["unsupported"])
    return []


def entry_matches(entry: dict[str, Any], op: str, codes: tuple[int, ...]) -> bool:
    """Whether one ``unsupported`` entry covers the signature ``codes`` of ``op`` (device_api/docs/manifest.md).

    Same op, and: no ``dtypes`` (every signature), or a plain dtype name the signature uses anywhere, or a
    coverage label (names joined by ``-``, as this report prints them) equal to the signature's label."""
    if entry["op"] != op:
        return False
    if not entry["dtypes"]:
        return True
    from chipdock._dtypes import BY_CODE

    names = {BY_CODE[c].name for c in codes}
    label = _label(codes)
    return any(d == label if "-" in d else d in names for d in entry["dtypes"])


def _declared_reason(entries: list[dict[str, Any]], op: str, codes: tuple[int, ...]) -> str | None:
    """The reason of the first entry that matches (entries are read in manifest order)."""
    for e in entries:
        if entry_matches(e, op, codes):
            return str(e["reason"])
    return None


def coverage(device: str, reference: str = "cpu:0") -> Coverage:
    """What ``device``'s backend lacks of ``reference``'s registry, declared or missing."""
    from chipdock import _opset

    dev_type, ref_type = device.partition(":")[0], reference.partition(":")[0]
    spec_ops = _opset.load_spec()["ops"]
    ref, dev = _signatures(ref_type), _signatures(dev_type)
    entries = declared_unsupported(dev_type)
    result = Coverage(device, reference)
    for op in sorted(ref):
        if spec_ops.get(op, {}).get("view"):
            continue
        declared: dict[str, list[str]] = defaultdict(list)
        missing: list[str] = []
        for codes in sorted(ref[op]):
            result.total += 1
            if codes in dev.get(op, set()):
                result.registered += 1
                continue
            reason = _declared_reason(entries, op, codes)
            if reason is None:
                missing.append(_label(codes))
            else:
                declared[reason].append(_label(codes))
        for reason, labels in declared.items():
            result.declared.append(Gap(op, labels, reason))
        if missing:
            result.missing.append(Gap(op, missing))
    return result
