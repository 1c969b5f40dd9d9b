"""Which attributes a kernel receives on each launch path (the backend guide's "Attributes on each launch
path", chipdock/support/attributes.h and the opset README say the same): through the dispatcher every
declared attribute, its default filled in and normalized; through the raw chipdock._C.launch_kernel exactly
what the caller passed. The toy's attribute_echo variant registers a float32 softmax that writes
num_attributes and the `axis` it saw (-99: absent) into its output."""

from __future__ import annotations

from core_helpers import run_json
from plugins.build import build_toy_plugin

ECHO = """
import json, numpy as np, chipdock
from chipdock import _C
x = chipdock.tensor(np.zeros((2, 3), np.float32), device="toy:0")

def seen(t):
    row = t.numpy()[0]
    return [float(row[0]), float(row[1])]

out = {"default": seen(chipdock.ops.softmax(x)), "given": seen(chipdock.ops.softmax(x, axis=0))}
for name, attrs in (("raw_none", {}), ("raw_negative", {"axis": -1})):
    y = chipdock.empty((2, 3), chipdock.float32, device="toy:0")
    _C.launch_kernel("softmax", [x], [y], attrs, None)
    out[name] = seen(y)
print(json.dumps(out))
"""


def test_the_dispatcher_passes_every_attribute_normalized_and_a_raw_launch_what_it_is_given(tmp_path):
    manifest = build_toy_plugin(tmp_path, "attribute_echo")
    out = run_json(ECHO, env={"CHIPDOCK_PLUGIN_PATH": str(manifest)})
    assert out == {
        "default": [1.0, 1.0],  # axis absent from the call: the default -1, normalized to 1 (ndim 2)
        "given": [1.0, 0.0],
        "raw_none": [0.0, -99.0],  # a raw launch fills no default ...
        "raw_negative": [1.0, -1.0],  # ... and normalizes nothing
    }, out
