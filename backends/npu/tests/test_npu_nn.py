"""The npu backend's nn family on the simulated Ascend runtime: matmul, gemm, the convolutions, the pools, the
normalizations and attention (src/kernels/nn*.cpp over test_double/ops/nn_*.cpp).

The conformance suite judges the values (.ci/test runs the whole suite on the double); these tests add what it does
not see: the registered dtypes against CANN's docs and the manifest's declared gaps, the pools' rewrite for paddings
aclnn's pools do not take (asymmetric ones, as ONNX's SAME_UPPER gives) over a grid of shapes against the CPU
reference, the error path of a failing aclnn call inside a composed kernel, and the double's own refusals of what
CANN's docs refuse, called through ctypes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NN_OPS = ("matmul", "gemm", "conv2d", "conv2d_fused", "conv_transpose2d", "max_pool2d", "avg_pool2d",
          "global_avg_pool", "batch_norm", "layer_norm", "rms_norm", "group_norm", "scaled_dot_product_attention")
HALF_AND_SINGLE = {"float32", "float16", "bfloat16"}  # aclnn's nn ops on Atlas A2: no DOUBLE


def _last_json(proc) -> object:
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_registered_dtypes_follow_the_docs_and_every_gap_is_declared(run_fresh, npu_double_env):
    got = _last_json(run_fresh(
        """
        import json, collections, chipdock, chipdock_npu
        from chipdock import _C
        from chipdock._dtypes import BY_CODE
        chipdock.backends()
        npu, cpu = collections.defaultdict(set), collections.defaultdict(set)
        for table, backend in ((npu, "npu"), (cpu, "cpu")):
            for op, codes in _C.kernels(backend):
                table[op].add(BY_CODE[codes[0]].name)
        manifest = json.load(open(chipdock_npu.manifest_path()))
        print(json.dumps({"npu": {k: sorted(v) for k, v in npu.items()}, "cpu": {k: sorted(v) for k, v in cpu.items()},
                          "unsupported": manifest.get("unsupported", [])}))
        """,
        npu_double_env,
    ))
    declared = {e["op"]: e for e in got["unsupported"]}
    for op in NN_OPS:
        assert set(got["npu"][op]) == HALF_AND_SINGLE, op
        assert set(got["cpu"][op]) - HALF_AND_SINGLE == set(declared[op]["dtypes"]), op
        assert "Atlas A2" in declared[op]["reason"], op
    assert "local_response_norm" not in got["npu"]  # no aclnn LRN: declared without dtypes, with the reason
    assert "dtypes" not in declared["local_response_norm"] and "aclnn" in declared["local_response_norm"]["reason"]


def test_pools_with_paddings_aclnn_does_not_take_match_the_cpu_reference(run_fresh, npu_double_env):
    """Asymmetric paddings (top, left, bottom, right) go through the explicit-padding rewrite: max exactly, avg within
    one rounding of the CPU reference's, for both divisor rules, ceil_mode, strides and 16-bit dtypes."""
    got = _last_json(run_fresh(
        """
        import itertools, json, numpy as np, chipdock
        rng = np.random.default_rng(7)
        MANTISSA = {"float32": 23, "float16": 10, "bfloat16": 7}
        worst, cases = {}, 0
        grid = itertools.product(("float32", "float16", "bfloat16"), [(5, 5), (8, 7)], [(3, 3), (2, 3)],
                                 [(1, 1), (2, 2), (2, 1)], [(1, 0, 0, 1), (0, 0, 1, 1), (0, 1, 1, 0)],
                                 [False, True], [False, True])
        for dt, (h, w), k, s, pad, include_pad, ceil in grid:
            x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
            common = dict(kernel=list(k), stride=list(s), padding=list(pad), ceil_mode=ceil)
            for op, attrs in (("avg_pool2d", {**common, "count_include_pad": include_pad}), ("max_pool2d", common)):
                a, b = (getattr(chipdock.ops, op)(chipdock.tensor(x, device=d, dtype=dt), **attrs).numpy()
                        .astype(np.float64) for d in ("npu:0", "cpu:0"))
                assert a.shape == b.shape, (op, attrs, a.shape, b.shape)
                # One ulp of the reference value in dt, at least of 1.0 (the inputs are of that size: sums cancel).
                exponent = np.floor(np.log2(np.maximum(np.abs(b), 1.0)))
                ulp = np.exp2(exponent - MANTISSA[dt])
                key = f"{op}/{dt}"
                worst[key] = max(worst.get(key, 0.0), float(np.max(np.abs(a - b) / ulp)))
                cases += 1
        print(json.dumps({"cases": cases, "worst_ulps": worst}))
        """,
        npu_double_env,
    ))
    assert got["cases"] == 3 * 2 * 2 * 3 * 3 * 2 * 2 * 2
    for key, ulps in got["worst_ulps"].items():
        assert ulps <= (0 if key.startswith("max_pool2d") else 2), (key, ulps)


@pytest.mark.parametrize(
    "failing, op, survivor",
    [
        # A step of a composed kernel fails; the kernels that do not need that step still run.
        ("aclnnDiv", "avg_pool2d_asymmetric", "avg_pool2d_symmetric"),
        ("aclnnConstantPadNd", "max_pool2d_asymmetric", "max_pool2d_symmetric"),
        ("aclnnRelu", "conv2d_fused", "conv2d"),
        ("aclnnSoftmax", "scaled_dot_product_attention", "matmul"),
    ],
)
def test_a_failing_aclnn_call_names_the_call_and_the_other_ops_still_run(run_fresh, npu_double_env, failing, op,
                                                                         survivor):
    got = _last_json(run_fresh(
        f"""
        import json, numpy as np, chipdock
        ops, dev = chipdock.ops, "npu:0"
        rng = np.random.default_rng(0)
        def t(*shape):
            return chipdock.tensor(rng.standard_normal(shape).astype(np.float32), device=dev)
        x, w, b, q, m = t(1, 2, 6, 6), t(4, 2, 3, 3), t(4), t(1, 2, 4, 8), t(5, 5)
        calls = {{
            "avg_pool2d_asymmetric": lambda: ops.avg_pool2d(x, kernel=[3, 3], padding=[0, 0, 1, 1]),
            "avg_pool2d_symmetric": lambda: ops.avg_pool2d(x, kernel=[3, 3], padding=[1, 1, 1, 1]),
            "max_pool2d_asymmetric": lambda: ops.max_pool2d(x, kernel=[3, 3], padding=[0, 0, 1, 1]),
            "max_pool2d_symmetric": lambda: ops.max_pool2d(x, kernel=[3, 3], padding=[1, 1, 1, 1]),
            "conv2d_fused": lambda: ops.conv2d_fused(x, w, b, None, activation="relu"),
            "conv2d": lambda: ops.conv2d(x, w, None),
            "scaled_dot_product_attention": lambda: ops.scaled_dot_product_attention(q, q, q, None),
            "matmul": lambda: ops.matmul(m, m),
        }}
        out = {{}}
        try:
            calls["{op}"]()
            out["error"] = None
        except chipdock.ChipdockError as exc:
            out["error"] = f"{{type(exc).__name__}}: {{exc}}"
        chipdock.synchronize(dev)
        out["survivor_shape"] = list(calls["{survivor}"]().numpy().shape)
        print(json.dumps(out))
        """,
        {**npu_double_env, "CHIPDOCK_NPU_SIM_FAIL_OP": failing},
    ))
    error = got["error"]
    assert error is not None, f"{op} ran although {failing} fails"
    name = op.replace("_asymmetric", "")
    assert "npu" in error and name in error and f"{failing}GetWorkspaceSize" in error and "561000" in error, error
    assert got["survivor_shape"]


DOUBLE_CHECKS = (Path(__file__).with_name("double_plan_calls.py").read_text() + r"""
import json
def conv(dtype, cube):
    return call(ops.aclnnConvolutionGetWorkspaceSize, tensor([1, 2, 5, 5], dtype), tensor([3, 2, 3, 3], dtype), None,
                ints(1, 1), ints(0, 0), ints(1, 1), B(False), ints(0, 0), I64(1), tensor([1, 3, 3, 3], dtype), I8(cube))

def avg(shape, padding, out_shape):
    return call(ops.aclnnAvgPool2dGetWorkspaceSize, tensor(shape, ACL_FLOAT), ints(3, 3), ints(1, 1), ints(*padding),
                B(False), B(False), I64(0), I8(0), tensor(out_shape, ACL_FLOAT))

print(json.dumps({
    "conv_float_allow_down": conv(ACL_FLOAT, 1),
    "conv_float16_keep": conv(ACL_FLOAT16, 0),
    "conv_float_keep": conv(ACL_FLOAT, 0),
    "avg_ok": avg([1, 1, 5, 5], [1, 1], [1, 1, 5, 5]),
    "avg_padding_over_half": avg([1, 1, 5, 5], [2, 2], [1, 1, 7, 7]),
    "avg_empty": avg([1, 1, 0, 5], [0, 0], [1, 1, 0, 3]),
}))
""")


def test_the_double_refuses_what_canns_docs_refuse(run_fresh, npu_double_env):
    got = _last_json(run_fresh(DOUBLE_CHECKS, npu_double_env))
    assert got["conv_float_allow_down"]["status"] == 0 and got["conv_float16_keep"]["status"] == 0
    assert got["avg_ok"]["status"] == 0
    for name, words in {"conv_float_keep": "KEEP_DTYPE", "avg_padding_over_half": "kernelSize / 2",
                        "avg_empty": "empty"}.items():
        assert got[name]["status"] == 161002, name
        assert words in got[name]["message"], (name, got[name]["message"])
