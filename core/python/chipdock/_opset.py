"""Loading the opset spec (device_api/opset/opset.yaml, shipped in the
wheel as chipdock/opset/opset.yaml) and registering it with the core."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from . import _C
from ._dtypes import BY_NAME

SPEC_PATH = Path(__file__).parent / "opset" / "opset.yaml"


@lru_cache(maxsize=1)
def load_spec() -> dict[str, Any]:
    """The parsed opset.yaml (cached)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open(SPEC_PATH, encoding="utf-8") as f:
        return yaml.load(f, Loader=loader)  # noqa: S506 - a safe loader


def _args(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for item in items:
        name, type_var = next((k, v) for k, v in item.items() if k not in ("optional", "variadic", "indexes"))
        arg = {"name": name, "type": type_var, "optional": bool(item.get("optional")),
               "variadic": bool(item.get("variadic"))}
        if "indexes" in item:
            arg["indexes"] = dict(item["indexes"])
        out.append(arg)
    return out


def _types(spec: dict[str, Any], types: dict[str, Any]) -> dict[str, list[int]]:
    groups = spec["dtype_groups"]
    out = {}
    for var, value in types.items():
        names = groups[value] if isinstance(value, str) else value
        out[var] = [BY_NAME[n].code for n in names]
    return out


def opset_version() -> int:
    """The version of the opset this core implements (opset.yaml's ``version``)."""
    return int(load_spec()["version"])


def _since(where: str, value: Any, floor: int, version: int) -> int:
    """A ``since`` field: an int in [floor, version] (an op's default: 1; an attribute's: its op's)."""
    if value is None:
        return floor
    if not isinstance(value, int) or isinstance(value, bool) or not floor <= value <= version:
        raise ValueError(f"opset.yaml: {where}: 'since' must be an opset version in [{floor}, {version}] "
                         f"(the op's, or 1, up to the opset's version {version}), got {value!r}")
    return value


def _attributes(attrs: dict[str, Any], op_name: str = "", op_since: int = 1,
                version: int = 1) -> list[dict[str, Any]]:
    out = []
    for name, a in (attrs or {}).items():
        default = a.get("default")
        if a["type"] == "dtype" and isinstance(default, str):
            default = BY_NAME[default].code
        out.append({
            "name": name, "type": a["type"], "required": bool(a.get("required")), "default": default,
            "min": a.get("min"), "nan": bool(a.get("nan", True)), "finite": bool(a.get("finite", False)),
            "length": int(a.get("length", -1)),
            "choices": list(a.get("choices", [])),
            "doc": a.get("doc", ""),
            "since": _since(f"{op_name}.{name}", a.get("since"), op_since, version),
        })
    return out


def op_table() -> dict[str, dict[str, Any]]:
    """Every op, in the form the core's register_op takes."""
    spec = load_spec()
    version = opset_version()
    table = {}
    for name, op in spec["ops"].items():
        since = _since(name, op.get("since"), 1, version)
        table[name] = {
            "since": since,
            "name": name,
            "doc": op["doc"],
            "inputs": _args(op["inputs"]),
            "outputs": _args(op["outputs"]),
            "types": _types(spec, op["types"]),
            "attributes": _attributes(op.get("attributes", {}), name, since, version),
            "output_dtype": {k: v.split(":", 1)[1] for k, v in (op.get("output_dtype") or {}).items()},
            "shape": op["shape"],
            "view": bool(op.get("view")),
            "nonempty": bool(op.get("nonempty")),
            "precision": op.get("precision", {}),
        }
    return table


def register_all() -> dict[str, dict[str, Any]]:
    table = op_table()
    for op in table.values():
        _C.register_op(op)
    return table
