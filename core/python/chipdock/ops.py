"""Every op of the opset as a function: ``chipdock.ops.<name>(inputs..., *, attributes...)``.

The functions are generated from device_api/opset/opset.yaml when chipdock is
imported: their signatures and docstrings come from the spec, and each one
calls the C++ dispatcher directly. Inputs are Tensors (Python numbers and
NumPy arrays are converted, taking the dtype of the tensor they meet);
attributes are keyword-only.
"""

from __future__ import annotations

import keyword
from typing import Any

from . import _C, _opset
from ._dtypes import BY_CODE, as_dtype

__all__: list[str] = []


def _dtype_code(value: Any, op: str) -> int:
    return as_dtype(value, op).code


def _default_literal(attr: dict[str, Any]) -> str:
    value = attr["default"]
    if attr["type"] == "dtype":
        return f"_BY_CODE[{value}]"
    if isinstance(value, list):
        return repr(tuple(value))
    if isinstance(value, float) and value != value * 2 - value:  # inf
        return f"float({str(value)!r})"
    return repr(value)


def _docstring(op: dict[str, Any]) -> str:
    lines = [op["doc"], ""]
    types = {var: ", ".join(BY_CODE[c].name for c in codes) for var, codes in op["types"].items()}
    if op["inputs"]:
        lines.append("Inputs:")
        for a in op["inputs"]:
            extra = " (optional)" if a["optional"] else " (a sequence of tensors)" if a["variadic"] else ""
            lines.append(f"    {a['name']}{extra}: {a['type']} in {{{types[a['type']]}}}")
    lines.append("Outputs:")
    for a in op["outputs"]:
        dt = f"dtype given by `{op['output_dtype'][a['name']]}`" if a["name"] in op["output_dtype"] else a["type"]
        lines.append(f"    {a['name']}{' (several)' if a['variadic'] else ''}: {dt}")
    if op["attributes"]:
        lines.append("Attributes:")
        for a in op["attributes"]:
            default = "required" if a["required"] else f"default {a['default']!r}"
            choices = f", one of {a['choices']}" if a["choices"] else ""
            note = f" ({a['doc']})" if a["doc"] else ""
            lines.append(f"    {a['name']}: {a['type']}, {default}{choices}{note}")
    lines.append(f"Shape rule: {op['shape']}. Precision: {op['precision'].get('class', 'unspecified')}.")
    return "\n".join(lines)


def _source(op: dict[str, Any]) -> str:
    """Python source of the function for `op` (exec'd: real signatures, no *args parsing)."""
    params, inputs, attrs = [], [], []
    for a in op["inputs"]:
        params.append(f"{a['name']}=None" if a["optional"] else a["name"])
        inputs.append(a["name"])
    star = ["*"] if op["attributes"] or not op["inputs"] else []
    for a in op["attributes"]:
        name = a["name"] + "_" if keyword.iskeyword(a["name"]) else a["name"]
        params.append(name if a["required"] else f"{name}={_default_literal(a)}")
        value = f"_dtype_code({name}, {op['name']!r})" if a["type"] == "dtype" else name
        attrs.append(f"{a['name']!r}: {value}")
    if not op["inputs"]:
        params.append("device=None")
    device = "device" if not op["inputs"] else "None"
    signature = ", ".join(params[: len(op["inputs"])] + star + params[len(op["inputs"]):])
    tuple_src = "(" + "".join(f"{n}, " for n in inputs) + ")"
    return (f"def {op['name']}({signature}):\n"
            f"    return _dispatch({op['name']!r}, {tuple_src}, {{{', '.join(attrs)}}}, {device})\n")


def _build() -> None:
    namespace: dict[str, Any] = {"_dispatch": _C.dispatch, "_dtype_code": _dtype_code, "_BY_CODE": BY_CODE}
    for name, op in _opset.register_all().items():
        exec(_source(op), namespace)  # noqa: S102 - generated from the spec, not user input
        fn = namespace[name]
        fn.__doc__ = _docstring(op)
        fn.__module__ = __name__
        globals()[name] = fn
        __all__.append(name)


_build()
